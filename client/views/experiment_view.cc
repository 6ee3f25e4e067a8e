#include "client/views/experiment_view.h"

#include "common/run_states.h"

#include <cmath>

#include "client/views/device_health_view.h"
#include "client/views/number_format.h"
#include "client/views/text_table.h"
#include "common/bounded_json_or_discarded.h"

namespace xv::client {

bool IsTerminalState(const std::string& state) {
  ExperimentState parsed = ExperimentState::kQueued;
  return ParseExperimentState(state, &parsed) && IsTerminal(parsed);
}

nlohmann::json ExperimentJson(const v1::Experiment& e) {
  using nlohmann::json;
  json j = {{"id", e.id()},
            {"campaign_id", e.campaign_id()},
            {"round_id", e.round_id()},
            {"name", e.name()},
            {"state", e.state()},
            {"attempt", e.attempt()},
            {"worker", e.worker()},
            {"device", e.device_name()},
            {"trainer", e.trainer()},
            {"seed", e.seed()},
            {"recipe_hash", e.recipe_hash()},
            {"decision", e.decision()},
            {"decision_reason", e.decision_reason()},
            {"round_decision", e.round_decision()},
            {"role", e.role()},
            {"reused_from_id", e.reused_from_id()},
            {"failure_kind", e.failure_kind()},
            {"failure_detail", e.failure_detail()},
            {"created_at", e.created_at()},
            {"started_at", e.started_at()},
            {"finished_at", e.finished_at()},
            {"progress", e.progress()}};
  json overrides = ParseBoundedJsonOrDiscarded(e.overrides_json());
  j["overrides"] = overrides.is_discarded() ? json(e.overrides_json()) : overrides;
  const char* figures[] = {"val_bpb",      "tok_per_sec",      "mfu_percent",   "num_steps",
                           "total_tokens", "training_seconds", "total_seconds", "peak_vram_mb",
                           "num_params",   "attention_backend"};
  if (!e.has_result()) {
    for (const char* f : figures) j[f] = nullptr;
    AddHealthJson(nullptr, &j);
    return j;
  }
  const v1::Result& r = e.result();
  auto finite_or_null = [](double v) { return std::isfinite(v) ? json(v) : json(nullptr); };
  j["val_bpb"] = finite_or_null(r.val_bpb());
  j["tok_per_sec"] = finite_or_null(r.tok_per_sec());
  j["mfu_percent"] = r.mfu_percent() < 0 ? json(nullptr) : finite_or_null(r.mfu_percent());
  j["num_steps"] = r.num_steps();
  j["total_tokens"] = r.total_tokens();
  j["training_seconds"] = finite_or_null(r.training_seconds());
  j["total_seconds"] = finite_or_null(r.total_seconds());
  j["peak_vram_mb"] = finite_or_null(r.peak_vram_mb());
  j["num_params"] = r.num_params();
  j["attention_backend"] = r.attention_backend();
  j["peak_flops_source"] = r.peak_flops_source();
  j["metric_version"] = r.metric_version();
  AddHealthJson(&r, &j);
  return j;
}

namespace {

// The results table's columns. Priority 0 is always shown; at a narrow width the highest numbers
// are left out first (docs/xvctl.md § results).
std::vector<TextTable::Column> ResultsColumns(bool show_health) {
  using A = TextTable::Align;
  std::vector<TextTable::Column> columns = {{"id", A::kRight, 0},     {"name", A::kLeft, 0, true},
                                            {"state", A::kLeft, 0},   {"val_bpb", A::kRight, 0},
                                            {"mem GB", A::kRight, 3}, {"tok/s", A::kRight, 4},
                                            {"MFU", A::kRight, 5}};
  if (show_health) columns.push_back({"MFU meas", A::kRight, 9});
  columns.insert(columns.end(), {{"steps", A::kRight, 8}, {"seconds", A::kRight, 6}});
  if (show_health) {
    columns.insert(columns.end(), {{"energy", A::kRight, 10}, {"tok/J", A::kRight, 10}});
  }
  columns.insert(columns.end(), {{"device", A::kLeft, 7},
                                 {"worker", A::kLeft, 11},
                                 {"started", A::kLeft, 12},
                                 {"finished", A::kLeft, 12},
                                 {"decision", A::kLeft, 1},
                                 {"reason", A::kLeft, 2, true}});
  return columns;
}

std::string StateCell(const v1::Experiment& e) {
  std::string state = e.state();
  if (!e.failure_kind().empty() && e.state() != ToString(ExperimentState::kSucceeded) &&
      e.failure_kind() != e.state()) {
    state += "/" + e.failure_kind();
  }
  return state;
}

// "HH:MM:SS" of a UTC ISO-8601 time ("2026-12-01T20:05:00.123Z"), "-" when unset.
std::string TimeOfDayCell(const std::string& iso) {
  const size_t t = iso.find('T');
  return t == std::string::npos || iso.size() < t + 9 ? "-" : iso.substr(t + 1, 8);
}

std::string ReasonCell(const v1::Experiment& e) {
  std::string reason = !e.decision_reason().empty()  ? e.decision_reason()
                       : !e.round_decision().empty() ? e.round_decision()
                                                     : "";
  if (e.reused_from_id() != 0) {
    // Identical figures to another row are not a coincidence: say whose run they are.
    const std::string reuse = "result of #" + std::to_string(e.reused_from_id()) + " (not rerun)";
    reason = reason.empty() ? reuse : reuse + "; " + reason;
  }
  return reason.empty() ? "-" : reason;
}

}  // namespace

std::string MemoryGbCell(const v1::Experiment& e) {
  if (!e.has_result()) return "-";
  const double mb = e.result().peak_vram_mb();
  return std::isfinite(mb) && mb > 0 ? FormatFixed(mb / 1024, 1) : "-";
}

std::string RenderResultsTable(const std::vector<v1::Experiment>& experiments, size_t max_width) {
  // Energy, tokens per joule and MFU against the measured ceiling only when some row has them
  // (device health, issue 6; the worker's probe, issue 3).
  bool show_health = false;
  for (const auto& e : experiments) {
    show_health |=
        e.has_result() && (e.result().measured_peak_flops() > 0 ||
                           e.result().health().has_energy_j() || e.result().health().throttled());
  }
  TextTable t(ResultsColumns(show_health));
  for (const auto& e : experiments) {
    std::string val_bpb = "-", tok = "-", mfu = "-", steps = "-", secs = "-";
    if (e.has_result()) {
      const v1::Result& r = e.result();
      val_bpb = FormatFixed(r.val_bpb(), 6);
      tok = FormatThousands(r.tok_per_sec());
      mfu = r.mfu_percent() < 0 ? "?" : FormatFixed(r.mfu_percent(), 2) + "%";
      steps = FormatThousands(r.num_steps());
      secs = FormatFixed(r.total_seconds(), 1);
    } else if (e.state() == "running") {
      val_bpb = "(" + FormatFixed(100 * e.progress(), 0) + "%)";
    }
    std::vector<std::string> row = {std::to_string(e.id()), e.name(), StateCell(e), val_bpb,
                                    MemoryGbCell(e),        tok,      mfu};
    if (show_health) {
      auto measured = e.has_result() ? MeasuredMfuPercent(e.result()) : std::nullopt;
      row.push_back(measured ? FormatFixed(*measured, 2) + "%" : "-");
    }
    row.insert(row.end(), {steps, secs});
    if (show_health) {
      row.push_back(e.has_result() ? EnergyCell(e.result()) : "-");
      row.push_back(e.has_result() ? TokensPerJouleCell(e.result()) : "-");
    }
    row.insert(row.end(), {e.device_name().empty() ? "-" : e.device_name(),
                           e.worker().empty() ? "-" : e.worker(), TimeOfDayCell(e.started_at()),
                           TimeOfDayCell(e.finished_at()),
                           e.decision().empty() ? "-" : e.decision(), ReasonCell(e)});
    t.AddRow(std::move(row));
  }
  return t.RenderFitting(max_width);
}

}  // namespace xv::client
