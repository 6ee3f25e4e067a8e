// The decisions about a finished attempt and a reused result that the store executes
// (daemon/store/attempt_finish.cc, submission_table.cc): which terminal state a trainer's Finished
// report leads to, when that report moves the experiment (the late-success rule), and when an
// earlier run's result stands in for a new experiment. Pure functions over the facts the store
// read in the same transaction.
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "common/run_states.h"

namespace xv::sched {

// The failure kind of an attempt whose trainer reported figures that cannot be true
// (result_plausibility.h); such an attempt ends invalid with it.
inline constexpr const char* kImplausibleResultKind = "implausible_result";

// What the results table holds for the attempt when its Finished arrives.
enum class StoredSummary {
  kNone,           // no summary event was stored
  kWithoutValBpb,  // a summary whose val_bpb is missing (NaN is stored as missing)
  kWithValBpb,
};

// A Finished report as the worker sent it, with what the store knows about its attempt.
struct FinishedReport {
  std::string state;  // Finished.state, as sent (may be any text)
  std::string failure_kind;
  std::string failure_detail;
  bool marked_implausible = false;  // an event of the attempt carried an implausible figure
  std::string implausible_detail;   // the attempt's failure detail naming that figure
  StoredSummary summary = StoredSummary::kNone;
};

// The terminal state the attempt ends in, with its failure kind and detail.
struct AttemptOutcome {
  ExperimentState state = ExperimentState::kFailed;
  std::string failure_kind;
  std::string failure_detail;
};

// The outcome of a Finished report, in this order:
//  - a state that is not one a trainer may end in (succeeded, diverged, failed, invalid,
//    timed_out, cancelled) is failed, kind crashed unless one was given, the detail saying what
//    was reported;
//  - an attempt marked implausible ends invalid (kind implausible_result, the marked detail)
//    whatever it reports, unless cancelled;
//  - a success without a stored summary is failed (crashed: "exited successfully without a
//    summary event"); a success whose summary has no val_bpb is invalid (implausible_result).
AttemptOutcome DecideFinishedOutcome(const FinishedReport& report);

// The experiment row a Finished report meets.
struct ExperimentAtFinish {
  ExperimentState state = ExperimentState::kQueued;
  int attempt = 0;  // the experiment's current attempt number
};

// Whether the experiment takes the finished attempt's outcome. It does when the attempt is its
// active one (same attempt number, assigned or running); or, for a success only, when the
// experiment waits in the queue or ended lost at this attempt number or a later one (the attempt
// was lost, its requeue not yet reassigned or out of attempts): a late result is accepted while no
// other attempt is running or has finished. A cancelled experiment never moves.
bool ExperimentTakesOutcome(const ExperimentAtFinish& experiment, int finished_attempt,
                            ExperimentState outcome);

// An earlier run of the same campaign and recipe row (same resolved config and seed).
struct EarlierRun {
  ExperimentState state = ExperimentState::kQueued;
  bool is_reuse = false;    // itself a reuse row (reused_from_id set)
  bool has_result = false;  // a results row for its current attempt
};

// Whether the earlier run's result stands in for a new experiment (DESIGN.md § Keep/discard
// semantics): only an original run (not a reuse row) that succeeded and has a result.
bool MayReuseResult(const EarlierRun& earlier);

}  // namespace xv::sched
