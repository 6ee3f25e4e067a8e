// How long running experiments have left, for `status`, `wait` and `watch`. A trainer's progress
// is its timed training seconds over its time budget (steps 0-10 are an untimed warm-up, where
// progress stays 0), so (1 - progress) x budget is the training time left; evaluation follows it.
// Thread-safety: pure functions.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "xv/v1/types.pb.h"

namespace xv::client {

// The experiment's time budget in seconds: its own `time_budget_s` override, else
// `campaign_budget_s` (the campaign's budget contract or head recipe); 0 = unknown.
double ExperimentTimeBudget(const v1::Experiment& e, double campaign_budget_s);

// True while a running experiment has not finished its untimed warm-up steps (progress 0).
bool InWarmUp(const v1::Experiment& e);

// Training seconds left for a running experiment past its warm-up: (1 - progress) x budget.
// nullopt for other states, during the warm-up, or when budget_s is not positive.
std::optional<double> TrainingSecondsLeft(const v1::Experiment& e, double budget_s);

// The progress cell of `status`: "starting" (assigned), "warm-up (untimed steps)", or the bar
// with "~2m10s left" when the budget is known.
std::string ProgressCell(const v1::Experiment& e, double budget_s, int bar_width = 20);

// Seconds until every experiment of `exps` has finished, roughly: the running ones' training
// time left plus, for each queued or assigned one, a whole run (the mean total seconds of the
// finished runs in `exps`, else its budget), divided over the runs active now (at least 1); the
// finished runs' mean overhead (total minus training seconds) is added to every unfinished run.
// nullopt when some unfinished run has no budget and nothing has finished to learn from; 0 when
// every experiment has finished.
std::optional<double> SecondsUntilAllFinished(
    const std::vector<v1::Experiment>& exps,
    const std::function<double(const v1::Experiment&)>& budget_of);

// " ~1m05s left" style suffix, "" for nullopt.
std::string EtaSuffix(const std::optional<double>& seconds);

}  // namespace xv::client
