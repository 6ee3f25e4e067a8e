// RoundDecider: the keep/discard decision of one round (DESIGN.md § Keep/discard semantics).
// Input: the val_bpb of every finished run of the head controls and of each candidate; output:
// keep or discard for every candidate with the reason and the statistics behind it.
//
// Rules, in order, for each candidate:
//  1. any run that diverged or whose val_bpb is not finite -> discard ("non_finite_replicate");
//     its NaN rate is reported;
//  2. fewer finite runs than the test needs (welch 2, noise_band 1) -> discard
//     ("insufficient_replicates"); fewer than 2 finite head runs (under noise_band: on the
//     candidate's device classes) -> discard ("insufficient_head_replicates");
//  3. the test, at alpha' = (1 - confidence) / m under bonferroni (m = candidates that reach this
//     step) or alpha' = 1 - confidence under none:
//       welch: one-sided Welch t-test, pass when p < alpha' ("not_significant" otherwise) and
//              improvement = head mean - candidate mean >= min_effect ("below_min_effect");
//       noise_band: pass when candidate mean < head mean - band, band = max(min_effect,
//              k * head_sd) ("outside_noise_band"); head runs are those on the device classes of
//              the candidate's runs (a run with an empty device class matches every class);
//  4. of the candidates that pass, the one with the lowest mean is kept (ties: the first given);
//     the others are discarded ("beaten_by_better_candidate").
// Mapping from experiment states: succeeded -> a run with its val_bpb; diverged -> a run with
// diverged = true (its val_bpb may be NaN); failed, timed_out, lost, cancelled, invalid -> not
// passed in at all (no measurement; the caller counts them). head_runs are the runs of the head's
// resolved config the caller compares with: this round's controls and, when it reuses results
// of the identical config (same canonical hash), earlier ones. Head runs that are not finite are
// left out of the head's statistics and counted in its nan_rate.
// Thread-safety: stateless; Decide is a pure function.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "daemon/sched/acceptance_policy.h"

namespace xv::sched {

// One finished run (a result row).
struct RunOutcome {
  int64_t experiment_id = 0;  // for the record; 0 when unknown
  double val_bpb = std::numeric_limits<double>::quiet_NaN();
  bool diverged = false;     // the trainer reported a non-finite loss / divergence
  std::string device_class;  // e.g. the device name; "" matches every class
};

struct CandidateRuns {
  std::string name;  // unique within the round, non-empty
  std::vector<RunOutcome> runs;
};

// Statistics of one group of runs. mean and sd are over the finite runs.
struct RunGroupStats {
  int n_runs = 0;              // runs given
  int n = 0;                   // finite runs
  double nan_rate = 0.0;       // (n_runs - n) / n_runs; 0 when n_runs == 0
  std::optional<double> mean;  // when n >= 1
  std::optional<double> sd;    // when n >= 2
};

enum class DecisionReason {
  kKept,
  kNonFiniteReplicate,
  kInsufficientReplicates,
  kInsufficientHeadReplicates,
  kNotSignificant,
  kBelowMinEffect,
  kOutsideNoiseBand,
  kBeatenByBetterCandidate,
};

// "kept", "non_finite_replicate", ... (stable; stored and filtered on).
const char* DecisionReasonName(DecisionReason reason);

struct CandidateDecision {
  std::string name;
  bool keep = false;
  bool passed = false;  // passed the test (step 3), whether or not it was the one kept
  DecisionReason reason = DecisionReason::kNotSignificant;
  std::string reason_text;  // one line for people: the numbers behind the reason
  RunGroupStats stats;
  RunGroupStats head;  // the head runs this candidate was compared with
  // Set once the candidate reaches the test (step 3):
  std::optional<double> improvement;  // head mean - candidate mean
  std::optional<double> t;            // empty when the standard error is 0
  std::optional<double> df;
  std::optional<double> p;      // one-sided; noise_band: the prediction-bound p
  std::optional<double> alpha;  // alpha' the test used
  // The improvement needed to pass: welch max(min_effect, t_{1-alpha', df} * se);
  // noise_band max(min_effect, k * head_sd).
  std::optional<double> band;
  std::optional<double> band_k;  // noise_band: k
};

struct RoundDecision {
  AcceptancePolicy policy;
  RunGroupStats head;                         // every head run given
  std::vector<CandidateDecision> candidates;  // in input order
  std::optional<size_t> kept_index;           // index into candidates
  int tested = 0;                             // m: candidates that reached the test
  std::string summary;                        // one line, e.g. for rounds.decision_summary

  // The decision for storage: {"mode", "policy", "head", "tested", "kept" (name or null),
  // "summary", "candidates": [{"name", "decision": "keep"|"discard", "reason", "reason_text",
  // "passed", "stats", "head", "improvement", "t", "df", "p", "alpha", "band", "band_k"}]}; a
  // statistic that does not apply is null.
  nlohmann::json ToJson() const;
};

class RoundDecider {
 public:
  // Decides one round. Errors (InvalidArgument, naming the field): the policy fails
  // ValidateAcceptancePolicy, a candidate name is empty or repeated. Having no candidates is not
  // an error (nothing is kept).
  Status Decide(const AcceptancePolicy& policy, const std::vector<RunOutcome>& head_runs,
                const std::vector<CandidateRuns>& candidates, RoundDecision* decision) const;
};

}  // namespace xv::sched
