#include "client/views/experiment_detail_view.h"

#include <cmath>
#include <sstream>

#include "client/views/device_health_view.h"
#include "client/views/experiment_view.h"
#include "client/views/number_format.h"
#include "common/bounded_json_or_discarded.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

std::string Value(const nlohmann::json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}

std::string LastLines(const std::string& text, int lines) {
  size_t pos = text.size();
  if (pos > 0 && text[pos - 1] == '\n') --pos;
  for (int i = 0; i < lines && pos != std::string::npos && pos > 0; ++i) {
    pos = text.rfind('\n', pos - 1);
  }
  return pos == std::string::npos || pos == 0 ? text : text.substr(pos + 1);
}

void AddFigures(const v1::Experiment& e, std::ostringstream& out) {
  if (!e.has_result()) {
    out << "figures:   none (no result)\n";
    return;
  }
  const v1::Result& r = e.result();
  out << "val_bpb:   " << FormatFixed(r.val_bpb(), 6) << "  (metric " << r.metric_version()
      << ")\n";
  out << "time:      " << FormatFixed(r.training_seconds(), 1) << " s training, "
      << FormatFixed(r.total_seconds(), 1) << " s total; " << FormatThousands(r.num_steps())
      << " steps, " << FormatThousands(r.total_tokens()) << " tokens\n";
  out << "speed:     " << FormatThousands(r.tok_per_sec()) << " tok/s, MFU "
      << (r.mfu_percent() < 0
              ? std::string("unknown (no peak for this device)")
              : FormatFixed(r.mfu_percent(), 2) + "% of " + FormatFixed(r.peak_flops() / 1e12, 1) +
                    " TFLOP/s (" + r.peak_flops_source() + ")");
  if (auto measured = MeasuredMfuPercent(r)) {
    out << ", " << FormatFixed(*measured, 2) << "% of the measured ceiling";
  }
  out << "\n";
  out << "memory:    " << MemoryGbCell(e) << " GB peak allocated, "
      << FormatFixed(r.peak_reserved_mb() / 1024, 1) << " GB reserved\n";
  out << "model:     " << FormatThousands(r.num_params()) << " params, depth " << r.depth()
      << ", attention " << r.attention_backend() << "\n";
  if (r.health().has_energy_j() || r.health().has_avg_power_w()) {
    out << "energy:    " << EnergyCell(r) << ", " << TokensPerJouleCell(r) << " tok/J\n";
  }
}

}  // namespace

nlohmann::json RecipeDiffJson(const v1::Experiment& e, const std::string& head_recipe_json) {
  nlohmann::json diff = nlohmann::json::object();
  const nlohmann::json overrides = ParseBoundedJsonOrDiscarded(e.overrides_json());
  const nlohmann::json head = ParseBoundedJsonOrDiscarded(head_recipe_json);
  if (!overrides.is_object()) return diff;
  for (const auto& [knob, value] : overrides.items()) {
    const bool known = head.is_object() && head.contains(knob);
    diff[knob] = {{"run", value}, {"head", known ? head[knob] : nlohmann::json(nullptr)}};
  }
  return diff;
}

std::string RenderExperimentDetail(const v1::Experiment& e, const v1::Campaign& campaign,
                                   const EventsSummary& events, int tail_lines) {
  std::ostringstream out;
  const bool kind_adds = !e.failure_kind().empty() && e.failure_kind() != e.state();
  out << "#" << e.id() << " " << e.name() << "  " << e.state()
      << (kind_adds ? "/" + e.failure_kind() : "") << "  (campaign " << campaign.name() << " #"
      << e.campaign_id() << ", round " << e.round_id() << ", "
      << (e.role().empty() ? "candidate" : e.role()) << ", seed " << e.seed() << ", attempt "
      << e.attempt() << ")\n";
  out << "decision:  " << (e.decision().empty() ? "-" : e.decision())
      << (e.decision_reason().empty() ? "" : ": " + e.decision_reason()) << "\n";
  if (!e.round_decision().empty()) out << "round:     " << e.round_decision() << "\n";
  if (e.reused_from_id() != 0) {
    out << "reused:    the result of #" << e.reused_from_id() << " (not rerun)\n";
  }
  out << "device:    " << (e.device_name().empty() ? "-" : e.device_name()) << " (worker "
      << (e.worker().empty() ? "-" : e.worker()) << ", trainer " << e.trainer() << ")\n";
  out << "recipe:    " << e.recipe_hash() << " (config " << e.config_hash() << "); head "
      << campaign.head_recipe_hash() << "\n";
  if (!e.source_sha256().empty()) {
    out << "code:      " << e.source_sha256() << " (" << e.source_bytes()
        << " bytes: a code candidate's train.py, stored by this hash)\n";
  }
  const nlohmann::json diff = RecipeDiffJson(e, campaign.head_recipe_json());
  if (diff.empty()) {
    out << "changes:   none (the head's recipe as it was when the round was built)\n";
  } else {
    out << "changes against the head:\n";
    for (const auto& [knob, v] : diff.items()) {
      out << "  " << knob << ": " << (v["head"].is_null() ? "(not in the head)" : Value(v["head"]))
          << " -> " << Value(v["run"]) << "\n";
    }
  }
  AddFigures(e, out);
  std::string counts;
  for (const auto& [kind, n] : events.counts) {
    counts += (counts.empty() ? "" : ", ") + std::to_string(n) + " " + kind;
  }
  out << "events:    " << (counts.empty() ? "none stored" : counts)
      << (events.complete ? "" : " (so far)") << "\n";
  if (!events.source_sha256.empty()) {
    out << "source:    " << events.source_sha256.substr(0, 12) << " (" << events.source_file
        << ", constants rewritten)\n";
  }
  if (!events.states.empty()) {
    out << "states:    ";
    for (size_t i = 0; i < events.states.size(); ++i) {
      out << (i ? " -> " : "") << events.states[i];
    }
    out << "\n";
  }
  if (!e.failure_detail().empty()) out << "failure:   " << e.failure_detail() << "\n";
  if (!e.stderr_tail().empty() && (!e.failure_kind().empty() || e.state() != "succeeded")) {
    out << "stderr (last " << tail_lines << " lines):\n" << LastLines(e.stderr_tail(), tail_lines);
    if (e.stderr_tail().back() != '\n') out << "\n";
  }
  return EscapeForTerminal(out.str(), /*keep_newlines_and_tabs=*/true);
}

nlohmann::json ExperimentDetailJson(const v1::Experiment& e, const v1::Campaign& campaign,
                                    const EventsSummary& events) {
  nlohmann::json j = ExperimentJson(e);
  j["recipe_diff"] = RecipeDiffJson(e, campaign.head_recipe_json());
  j["head_recipe_hash"] = campaign.head_recipe_hash();
  j["campaign"] = campaign.name();
  j["events"] = {
      {"counts", events.counts}, {"states", events.states}, {"complete", events.complete}};
  if (!events.source_sha256.empty()) {
    j["source"] = {{"sha256", events.source_sha256}, {"file", events.source_file}};
  }
  if (!e.source_sha256().empty()) {
    j["code"] = {{"sha256", e.source_sha256()}, {"bytes", e.source_bytes()}};
  }
  j["stderr_tail"] = e.stderr_tail();
  return j;
}

}  // namespace xv::client
