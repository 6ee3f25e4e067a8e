// Sample summaries and the one-sided Welch t-test the keep/discard decider uses: "is the
// candidate's mean val_bpb lower than the head's?" (lower is better). Pure, thread-safe.
#pragma once

#include <optional>
#include <vector>

namespace xv::sched {

// Mean and sample standard deviation (n - 1 denominator) of finite values.
struct SampleSummary {
  int n = 0;
  double mean = 0.0;  // 0 when n == 0
  double sd = 0.0;    // 0 when n < 2
};

// Summarises `values`. Requires every value to be finite (the caller filters non-finite runs).
// Uses a two-pass sum so that values near 1.0 bpb with 1e-4 spreads keep their precision.
SampleSummary Summarize(const std::vector<double>& values);

// The one-sided Welch test of H0: mean(candidate) >= mean(head) against H1: mean(candidate) <
// mean(head).
struct WelchResult {
  double improvement = 0.0;     // head.mean - candidate.mean (positive: the candidate is lower)
  double standard_error = 0.0;  // sqrt(sd_c^2 / n_c + sd_h^2 / n_h)
  // improvement / standard_error; empty when standard_error is 0 (both samples constant).
  std::optional<double> t;
  // Welch-Satterthwaite degrees of freedom; when standard_error is 0, n_c + n_h - 2.
  double df = 0.0;
  // P(T >= t) under H0 for T ~ t(df). With standard_error 0: 0 when improvement > 0, else 1.
  double p_one_sided = 1.0;
};

// Runs the test. Requires candidate.n >= 2 and head.n >= 2 (the caller reports "insufficient
// replicates" otherwise); returns an empty optional when that does not hold.
std::optional<WelchResult> WelchOneSidedLower(const SampleSummary& candidate,
                                              const SampleSummary& head);

}  // namespace xv::sched
