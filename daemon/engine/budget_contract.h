// BudgetContract: a campaign's budget contract, stored as JSON in campaigns.budget_json.
//   time_budget_s: 1..86400        optional; when set, the campaign's base recipe, its head and
//                                  every run of the campaign train for exactly this long (a
//                                  candidate or recipe with another time_budget_s is refused:
//                                  comparing runs of different budgets is meaningless).
//   startup_allowance_s: 0..86400  default 300: process start, data loading, compilation.
//   eval_allowance_s: 0..86400     default: the time budget (so the default deadline stays
//                                  2 x budget + 300 s).
//   sequence_len: 1..1048576       the metric contract (issue 16): what val_bpb means stays fixed
//   eval_tokens: 1..1e12           inside a campaign. Optional integers; campaign creation pins
//                                  both to the base recipe's values when not given (a given value
//                                  becomes the base recipe's), and a candidate or recipe with
//                                  another value is refused naming the knob. Campaigns stored
//                                  before these fields existed pin neither.
//   max_concurrent: 1..4096        optional integer; at most this many experiments of the
//                                  campaign are assigned or running at once (placement skips
//                                  the campaign's queued work beyond it; others' work still
//                                  runs). Unset: no limit.
// The worker's hard deadline of a run = its time budget + startup + eval allowance.
// A stored "{}" (or "") is the default contract (nothing fixed).
// Thread-safety: plain values and pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace xv::daemon {

struct BudgetContract {
  std::optional<double> time_budget_s;  // unset: each recipe's own time_budget_s
  double startup_allowance_s = 300.0;
  std::optional<double> eval_allowance_s;  // unset: the run's time budget
  std::optional<int> max_concurrent;       // unset: no per-campaign limit
  std::optional<int64_t> sequence_len;     // unset: not pinned (campaigns before issue 16)
  std::optional<int64_t> eval_tokens;      // unset: not pinned
};

// Parses the contract as users write it (a JSON object; "" gives the defaults). Errors are
// InvalidArgument and name the field: "budget.time_budjet_s: unknown field (known: ...)",
// "budget.time_budget_s: must be a number of seconds in 1..86400, got 0".
Status ParseBudgetContract(const std::string& json_text, BudgetContract* out);

// The stored, normalised form: keys sorted, startup_allowance_s always present, the others
// when set. ParseBudgetContract(BudgetContractToJson(c)) == c.
std::string BudgetContractToJson(const BudgetContract& contract);

// The hard deadline the worker enforces for a run of `time_budget_s` under `contract`:
// time_budget_s + startup_allowance_s + (eval_allowance_s or time_budget_s).
double ContractHardDeadlineSeconds(const BudgetContract& contract, double time_budget_s);

// OK when `time_budget_s` is allowed by the contract; otherwise InvalidArgument
// "time_budget_s: fixed at 2 s by the campaign's budget contract (got 5)".
Status CheckContractTimeBudget(const BudgetContract& contract, double time_budget_s);

// Campaign creation's metric pinning: a contract's sequence_len / eval_tokens replace the base
// recipe's (`*sequence_len`, `*eval_tokens`); one the contract lacks is pinned to the recipe's.
void PinContractMetric(BudgetContract* contract, int* sequence_len, int64_t* eval_tokens);

// OK when the recipe's sequence_len and eval_tokens are those the contract pins; otherwise
// InvalidArgument naming the knob: "eval_tokens: fixed at 4096 by the campaign's metric contract
// (val_bpb is measured over this many validation tokens; got 8192)".
Status CheckContractMetric(const BudgetContract& contract, int64_t sequence_len,
                           int64_t eval_tokens);

}  // namespace xv::daemon
