// `xvctl compare`: runs grouped by candidate, device and trainer, with n, val_bpb mean and sd,
// tok/s, MFU with its denominator, peak memory, power and tokens per joule where measured.
// Runs of different metric versions or time budgets are refused, naming them: their figures do
// not compare. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "xv/v1/types.pb.h"

namespace xv::client {

struct CompareGroup {
  std::string candidate;  // the experiment name ("head", "matrix_lr=0.03")
  std::string device;     // device name, "-" when none ran
  std::string trainer;
  int runs = 0;    // every listed run of the group
  int n = 0;       // succeeded runs with a finite val_bpb: what the statistics are over
  int failed = 0;  // runs that ended in a failure state
  double val_bpb_mean = 0;
  double val_bpb_sd = 0;  // sample sd (n - 1); 0 for n < 2
  double tok_per_sec_mean = 0;
  double mfu_mean = -1;         // percent; -1 when no run knew its device peak
  std::string mfu_denominator;  // "989 TFLOP/s datasheet", "mixed", or "unknown"
  double peak_memory_gb = 0;    // the largest peak allocated memory of the group
  double power_w = -1;          // mean average power; -1 when not measured
  double tokens_per_joule = -1;
  std::vector<int64_t> ids;
};

// OK, or InvalidArgument naming the metric versions (or time budgets) and their runs when the
// finished runs of `runs` mix them. `budget_of` gives a run's time budget (0 = unknown, which
// mixes with nothing).
Status CheckComparable(const std::vector<v1::Experiment>& runs,
                       const std::function<double(const v1::Experiment&)>& budget_of);

// The groups, in order of their first run in `runs`.
std::vector<CompareGroup> BuildComparison(const std::vector<v1::Experiment>& runs);

// The table: candidate, device, trainer, n, val_bpb (mean), sd, tok/s, MFU, of (denominator),
// mem GB, W, tok/J; fitted to `max_width` (0 = every column).
std::string RenderComparison(const std::vector<CompareGroup>& groups, size_t max_width);

// {"groups": [...]} with the fields of CompareGroup (null for what was not measured).
nlohmann::json ComparisonJson(const std::vector<CompareGroup>& groups);

}  // namespace xv::client
