#include "client/views/watch_event_view.h"

#include "client/views/campaign_view.h"
#include "client/views/number_format.h"
#include "common/bounded_json_or_discarded.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

// "2026-11-30T09:00:11.123Z" -> "09:00:11.123".
std::string ClockTime(const std::string& t) {
  const auto pos = t.find('T');
  if (pos == std::string::npos) return t;
  std::string c = t.substr(pos + 1);
  if (!c.empty() && c.back() == 'Z') c.pop_back();
  return c;
}

// "  42%  ~2m10s left" from a step event's progress and remaining_s; "  warm-up" before the first
// timed step (progress 0); "" when the event has neither.
std::string StepProgress(const v1::WatchEvent& ev) {
  const nlohmann::json j = ParseBoundedJsonOrDiscarded(ev.json());
  if (!j.is_object() || !j.contains("progress") || !j["progress"].is_number()) return "";
  const double progress = j["progress"].get<double>();
  if (!(progress > 0)) return "  warm-up";
  std::string out = "  " + FormatFixed(100 * progress, 0) + "%";
  if (j.contains("remaining_s") && j["remaining_s"].is_number()) {
    out += "  ~" + FormatDuration(j["remaining_s"].get<double>()) + " left";
  }
  return out;
}

std::string WatchEventLineUnescaped(const v1::WatchEvent& ev) {
  std::string who;
  if (ev.experiment_id() != 0) {
    who = "#" + std::to_string(ev.experiment_id()) + " " + ev.name();
  } else {
    who = "round " + std::to_string(ev.round_id());
  }
  if (!ev.campaign().empty()) who += " [" + ev.campaign() + "]";
  std::string what;
  const std::string& k = ev.kind();
  if (k == "state" || k == "start") {
    what = ev.state();
    if (ev.attempt() > 0 && (ev.state() == "assigned" || ev.state() == "running")) {
      what += " (attempt " + std::to_string(ev.attempt()) + ")";
    }
    if (!ev.detail().empty()) what += ": " + ev.detail();
  } else if (k == "step") {
    what = "step " + std::to_string(ev.step()) + "  loss " + FormatFixed(ev.loss(), 4) +
           "  tok/s " + FormatThousands(ev.tok_per_sec()) + StepProgress(ev);
  } else if (k == "eval" || k == "summary") {
    what = k + "  val_bpb " + FormatFixed(ev.val_bpb(), 6);
  } else if (k == "nan") {
    what = "nan at step " + std::to_string(ev.step()) + ": " + ev.detail();
  } else if (k == "error") {
    what = "error: " + ev.detail();
  } else if (k == "decision") {
    what = "decided: " + ev.detail();
    // The round's drift figures (tok/s and steps per arm, the controls' trend and spread).
    const nlohmann::json j = ParseBoundedJsonOrDiscarded(ev.json());
    if (j.is_object() && j.contains("drift") && j["drift"].is_object()) {
      const std::string drift = RenderDrift(j["drift"].dump());
      if (!drift.empty()) what += "; drift: " + drift;
    }
  } else if (k == "head") {
    what = "head -> " + ev.name() + (ev.detail().empty() ? "" : " (" + ev.detail() + ")");
  } else if (k == "dropped") {
    return ClockTime(ev.time()) + "  " + ev.detail();
  } else {
    what = k;
  }
  return ClockTime(ev.time()) + "  " + who + "  " + what;
}

}  // namespace

nlohmann::json WatchEventJson(const v1::WatchEvent& ev) {
  nlohmann::json j = {{"cursor", ev.cursor()},
                      {"time", ev.time()},
                      {"kind", ev.kind()},
                      {"campaign", ev.campaign()},
                      {"campaign_id", ev.campaign_id()},
                      {"round_id", ev.round_id()},
                      {"experiment_id", ev.experiment_id()},
                      {"attempt", ev.attempt()},
                      {"name", ev.name()}};
  if (!ev.state().empty()) j["state"] = ev.state();
  if (!ev.detail().empty()) j["detail"] = ev.detail();
  if (ev.kind() == "dropped") j["dropped"] = ev.dropped();
  if (ev.kind() == "step" || ev.kind() == "eval" || ev.kind() == "nan") j["step"] = ev.step();
  if (ev.kind() == "step") {
    j["loss"] = ev.loss();
    j["tok_per_sec"] = ev.tok_per_sec();
  }
  if (ev.kind() == "summary" || ev.kind() == "eval") j["val_bpb"] = ev.val_bpb();
  nlohmann::json event = ParseBoundedJsonOrDiscarded(ev.json());
  if (!event.is_discarded() && !ev.json().empty()) j["event"] = event;
  return j;
}

std::string WatchEventLine(const v1::WatchEvent& ev) {
  // Names, details and states came from the daemon (and through it from submitters and trainers):
  // a control character in them is shown escaped, never sent to the terminal.
  return EscapeForTerminal(WatchEventLineUnescaped(ev));
}

}  // namespace xv::client
