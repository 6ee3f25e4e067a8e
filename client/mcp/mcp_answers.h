// McpAnswers: the compact JSON that `xvctl mcp`'s tools answer with, sized for a model's context
// (issue 17: a `results` of 23 rows was 75 KB). Every answer is built from the daemon's protos by
// the pure functions here, so its size can be tested without a daemon:
//  - DropEmpty removes nulls, empty strings, empty arrays and empty objects from objects (0 and
//    false stay: they are values);
//  - an experiment is a summary line (ExperimentSummary), not the whole row (the experiment tool
//    has that);
//  - a round's decision keeps, per candidate, the figures a decision rests on;
//  - campaign_show keeps the last N rounds and head changes, and says how many it left out;
//  - results keeps `limit` rows and says how to page on (next_after_id).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "xv/v1/experiments.pb.h"

namespace xv::client {

// `v` without null members, empty strings, arrays and objects in any object at any depth (array
// elements are kept, except that their own objects are cleaned too).
nlohmann::json DropEmpty(const nlohmann::json& v);

// One experiment in one line: id, round, name, state, val_bpb (6 decimals), steps, tok_per_sec
// (whole), peak_mem_mb (one decimal), decision, reason; for a failure failure_kind and the first
// 160 bytes of failure_detail; reused_from; progress and last_loss while it runs. Empties dropped.
nlohmann::json ExperimentSummary(const v1::Experiment& e);

// One round: id, kind, state, summary, kept (candidate), kept_experiment_id, experiments,
// unfinished and, once decided, the head's head_mean, head_sd, head_n and per candidate {name,
// decision, reason, mean, sd, n, improvement, p, band}, plus the confirm/ablation figures of those
// round kinds. Empties dropped.
nlohmann::json RoundSummary(const v1::RoundInfo& round);

// campaign_show: id, name, state, policy, budget, head (hash), head_recipe (every knob, unless
// `with_head_recipe` is false), the last `last_rounds` head changes and rounds (RoundSummary),
// rounds_total and rounds_left_out (when some were). `last_rounds` 0 = all.
nlohmann::json CampaignSummary(const v1::Campaign& campaign, int last_rounds,
                               bool with_head_recipe);

// status: counts, workers {name, state, device, running}, running experiments {id, name,
// campaign_id, round, worker, progress, last_loss}, write_mode when read-only, unserved trainers.
nlohmann::json StatusSummary(const v1::StatusResponse& resp, const std::string& address);

// What `results` was asked for, besides the daemon-side filter.
struct ResultsPage {
  int64_t round_id = 0;      // 0 = every round
  std::vector<int64_t> ids;  // empty = every id
  int64_t after_id = 0;      // > 0: id order from here (a cursor), the first `limit`
  int limit = 20;            // 0 = all
  bool best_first = false;   // sort val_bpb: the `limit` best (ignored with after_id)
};

// The results answer over `rows` (the daemon's matches in id order, or best first when
// page.best_first): {experiments: [ExperimentSummary], count (shown), total (matching),
// next_after_id (when a cursor page left rows out), left_out (rows not shown otherwise)}.
nlohmann::json ResultsAnswer(const std::vector<v1::Experiment>& rows, const ResultsPage& page);

// How long `runs` more runs take on the fleet: the median wall time of recent finished runs
// (`recent_run_s`, seconds each) times the waves needed when `runs_ahead` (queued and running
// before them, the new runs included) share `workers` workers: median * ceil(runs_ahead /
// workers). {eta_s, basis: "median of N recent runs (M s) x W waves over K workers"}; without a
// finished run or a worker, {basis: why there is no estimate}.
nlohmann::json EtaEstimate(std::vector<double> recent_run_s, int64_t runs_ahead, int64_t workers);

}  // namespace xv::client
