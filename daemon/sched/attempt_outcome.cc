// Decisions about finished attempts and reused results. See attempt_outcome.h.
#include "daemon/sched/attempt_outcome.h"

namespace xv::sched {
namespace {

// The states a trainer's report may end an attempt in (queued, assigned, running and lost are the
// daemon's own).
bool IsReportableEnd(ExperimentState state) {
  switch (state) {
    case ExperimentState::kSucceeded:
    case ExperimentState::kDiverged:
    case ExperimentState::kFailed:
    case ExperimentState::kInvalid:
    case ExperimentState::kTimedOut:
    case ExperimentState::kCancelled:
      return true;
    case ExperimentState::kQueued:
    case ExperimentState::kAssigned:
    case ExperimentState::kRunning:
    case ExperimentState::kLost:
      return false;
  }
  return false;
}

}  // namespace

AttemptOutcome DecideFinishedOutcome(const FinishedReport& report) {
  AttemptOutcome out;
  out.failure_kind = report.failure_kind;
  out.failure_detail = report.failure_detail;
  ExperimentState reported = ExperimentState::kFailed;
  if (ParseExperimentState(report.state, &reported) && IsReportableEnd(reported)) {
    out.state = reported;
  } else {
    out.failure_detail = "worker reported unknown state '" + report.state + "'" +
                         (report.failure_detail.empty() ? "" : ": " + report.failure_detail);
    out.state = ExperimentState::kFailed;
    if (out.failure_kind.empty()) out.failure_kind = "crashed";
  }
  if (report.marked_implausible && out.state != ExperimentState::kCancelled) {
    // The trainer reported figures that cannot be true: whatever it says now, the run is invalid
    // and is never kept.
    out.state = ExperimentState::kInvalid;
    out.failure_kind = kImplausibleResultKind;
    out.failure_detail = report.implausible_detail;
  }
  if (out.state == ExperimentState::kSucceeded) {
    switch (report.summary) {
      case StoredSummary::kNone:
        out.state = ExperimentState::kFailed;
        out.failure_kind = "crashed";
        out.failure_detail = "the trainer exited successfully without a summary event";
        break;
      case StoredSummary::kWithoutValBpb:
        out.state = ExperimentState::kInvalid;
        out.failure_kind = kImplausibleResultKind;
        out.failure_detail =
            "val_bpb: the summary has none (a succeeded run needs a positive finite val_bpb)";
        break;
      case StoredSummary::kWithValBpb:
        break;
    }
  }
  return out;
}

bool ExperimentTakesOutcome(const ExperimentAtFinish& experiment, int finished_attempt,
                            ExperimentState outcome) {
  if (experiment.attempt == finished_attempt && IsActive(experiment.state)) return true;
  const bool waiting_or_lost =
      experiment.state == ExperimentState::kQueued || experiment.state == ExperimentState::kLost;
  return outcome == ExperimentState::kSucceeded && waiting_or_lost &&
         experiment.attempt >= finished_attempt;
}

bool MayReuseResult(const EarlierRun& earlier) {
  return earlier.state == ExperimentState::kSucceeded && !earlier.is_reuse && earlier.has_result;
}

}  // namespace xv::sched
