#include "client/views/run_eta.h"

#include <algorithm>
#include <cmath>

#include "client/views/number_format.h"
#include "client/views/progress_bar.h"
#include "common/bounded_json_or_discarded.h"
#include "common/run_states.h"

namespace xv::client {
namespace {

bool Is(const v1::Experiment& e, ExperimentState state) { return e.state() == ToString(state); }

}  // namespace

double ExperimentTimeBudget(const v1::Experiment& e, double campaign_budget_s) {
  const nlohmann::json overrides = ParseBoundedJsonOrDiscarded(e.overrides_json());
  if (overrides.is_object() && overrides.contains("time_budget_s") &&
      overrides["time_budget_s"].is_number()) {
    return overrides["time_budget_s"].get<double>();
  }
  return campaign_budget_s;
}

bool InWarmUp(const v1::Experiment& e) {
  return Is(e, ExperimentState::kRunning) && !(e.progress() > 0);
}

std::optional<double> TrainingSecondsLeft(const v1::Experiment& e, double budget_s) {
  if (!Is(e, ExperimentState::kRunning) || InWarmUp(e) || !(budget_s > 0)) return std::nullopt;
  return std::max(0.0, (1 - std::clamp(e.progress(), 0.0, 1.0)) * budget_s);
}

std::string EtaSuffix(const std::optional<double>& seconds) {
  return seconds ? " ~" + FormatDuration(*seconds) + " left" : "";
}

std::string ProgressCell(const v1::Experiment& e, double budget_s, int bar_width) {
  if (Is(e, ExperimentState::kAssigned)) return "starting";
  if (InWarmUp(e)) return "warm-up (untimed steps)";
  return RenderProgressBar(e.progress(), bar_width) + EtaSuffix(TrainingSecondsLeft(e, budget_s));
}

std::optional<double> SecondsUntilAllFinished(
    const std::vector<v1::Experiment>& exps,
    const std::function<double(const v1::Experiment&)>& budget_of) {
  double finished_total = 0, finished_overhead = 0;
  int finished = 0, active = 0;
  for (const auto& e : exps) {
    if (Is(e, ExperimentState::kRunning) || Is(e, ExperimentState::kAssigned)) ++active;
    if (e.has_result() && e.result().total_seconds() > 0) {
      finished_total += e.result().total_seconds();
      finished_overhead +=
          std::max(0.0, e.result().total_seconds() - e.result().training_seconds());
      ++finished;
    }
  }
  const double overhead = finished > 0 ? finished_overhead / finished : 0;
  double work = 0;
  for (const auto& e : exps) {
    ExperimentState state = ExperimentState::kQueued;
    if (!ParseExperimentState(e.state(), &state) || IsTerminal(state)) continue;
    const double budget = budget_of(e);
    if (state == ExperimentState::kRunning && !InWarmUp(e) && budget > 0) {
      work += *TrainingSecondsLeft(e, budget) + overhead;
    } else if (finished > 0) {
      work += finished_total / finished;
    } else if (budget > 0) {
      work += budget;
    } else {
      return std::nullopt;
    }
  }
  return work / std::max(1, active);
}

}  // namespace xv::client
