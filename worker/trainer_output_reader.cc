#include "worker/trainer_output_reader.h"

#include "common/run_states.h"

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"

namespace xv::worker {
namespace {

// The wire name of a state (Finished.state).
std::string StateName(ExperimentState state) { return std::string(ToString(state)); }

}  // namespace

using nlohmann::json;

TrainerOutputReader::TrainerOutputReader(TrainerOutputFormat format, double min_step_interval_s)
    : format_(format), parser_(min_step_interval_s) {}

void TrainerOutputReader::Take(const json& event, std::vector<TrainerOutputEvent>* out) {
  TrainerOutputEvent ev;
  ev.type = event["type"].get<std::string>();
  ev.json = DumpJsonLossless(event);
  if (ev.type == "error" && event.contains("message") && event["message"].is_string()) {
    error_message_ = event["message"].get<std::string>();
  }
  out->push_back(std::move(ev));
}

std::vector<TrainerOutputEvent> TrainerOutputReader::ReadLine(const std::string& line,
                                                              double now_s) {
  std::vector<TrainerOutputEvent> out;
  if (format_ != TrainerOutputFormat::kUpstream) {
    // A line nested deeper than any event (kMaxJsonDepth) is not an event: it is relayed as a log
    // line's text, so no reader downstream (the daemon's store) meets its nesting.
    json j = ParseBoundedJsonOrDiscarded(line);
    if (j.is_object() && j.contains("type") && j["type"].is_string()) {
      TrainerOutputEvent ev;
      ev.type = j["type"].get<std::string>();
      ev.json = line;  // verbatim
      if (ev.type == "error" && j.contains("message") && j["message"].is_string()) {
        error_message_ = j["message"].get<std::string>();
      }
      if (ev.type == "summary") saw_summary_ = true;
      out.push_back(std::move(ev));
      return out;
    }
  }
  if (format_ == TrainerOutputFormat::kXvEvents) {
    Take({{"type", "log"}, {"t", now_s}, {"text", line}}, &out);
    return out;
  }
  for (const json& ev : parser_.ParseLine(line, now_s)) Take(ev, &out);
  return out;
}

std::vector<TrainerOutputEvent> TrainerOutputReader::Finish(double now_s) {
  std::vector<TrainerOutputEvent> out;
  if (format_ == TrainerOutputFormat::kXvEvents) return out;
  for (const json& ev : parser_.Finish(now_s)) Take(ev, &out);
  return out;
}

AttemptOutcome ApplyOutputVerdict(const AttemptOutcome& by_exit, KillReason reason,
                                  const TrainerOutputReader& output, bool require_summary) {
  if (reason != KillReason::kNone) return by_exit;
  if (output.diverged())
    return {StateName(ExperimentState::kDiverged), "diverged", output.divergence_detail()};
  if (require_summary && by_exit.state == ToString(ExperimentState::kSucceeded) &&
      !output.saw_summary()) {
    return {StateName(ExperimentState::kFailed), "crashed",
            "exited 0 without a summary (no summary event and no val_bpb in a --- block)"};
  }
  return by_exit;
}

}  // namespace xv::worker
