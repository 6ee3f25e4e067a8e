// The decisions of daemon/sched/attempt_outcome.h: the terminal state of a Finished report, the
// late-success rule and result reuse.
#include "daemon/sched/attempt_outcome.h"

#include <gtest/gtest.h>

#include <string>

namespace xv::sched {
namespace {

FinishedReport Report(const std::string& state, StoredSummary summary) {
  FinishedReport r;
  r.state = state;
  r.summary = summary;
  return r;
}

TEST(DecideFinishedOutcome, SuccessWithValBpbSucceeds) {
  FinishedReport r = Report("succeeded", StoredSummary::kWithValBpb);
  r.failure_kind = "ignored";
  AttemptOutcome out = DecideFinishedOutcome(r);
  EXPECT_EQ(out.state, ExperimentState::kSucceeded);
  EXPECT_EQ(out.failure_kind, "ignored");  // the store clears it for a success
}

TEST(DecideFinishedOutcome, ExitZeroWithoutSummaryIsFailed) {
  AttemptOutcome out = DecideFinishedOutcome(Report("succeeded", StoredSummary::kNone));
  EXPECT_EQ(out.state, ExperimentState::kFailed);
  EXPECT_EQ(out.failure_kind, "crashed");
  EXPECT_EQ(out.failure_detail, "the trainer exited successfully without a summary event");
}

TEST(DecideFinishedOutcome, SuccessWithoutValBpbIsInvalid) {
  AttemptOutcome out = DecideFinishedOutcome(Report("succeeded", StoredSummary::kWithoutValBpb));
  EXPECT_EQ(out.state, ExperimentState::kInvalid);
  EXPECT_EQ(out.failure_kind, "implausible_result");
  EXPECT_NE(out.failure_detail.find("val_bpb"), std::string::npos);
}

TEST(DecideFinishedOutcome, ImplausibleMarkMakesAnyEndInvalidButCancelled) {
  for (const char* state : {"succeeded", "diverged", "failed", "timed_out", "bogus"}) {
    FinishedReport r = Report(state, StoredSummary::kWithValBpb);
    r.marked_implausible = true;
    r.implausible_detail = "step event 3: loss: not finite";
    r.failure_kind = "oom";
    AttemptOutcome out = DecideFinishedOutcome(r);
    EXPECT_EQ(out.state, ExperimentState::kInvalid) << state;
    EXPECT_EQ(out.failure_kind, kImplausibleResultKind) << state;
    EXPECT_EQ(out.failure_detail, "step event 3: loss: not finite") << state;
  }
  FinishedReport cancelled = Report("cancelled", StoredSummary::kNone);
  cancelled.marked_implausible = true;
  EXPECT_EQ(DecideFinishedOutcome(cancelled).state, ExperimentState::kCancelled);
}

TEST(DecideFinishedOutcome, UnknownOrDaemonOwnStateIsFailedCrashed) {
  for (const char* state : {"bogus", "", "queued", "running", "lost", "Succeeded"}) {
    FinishedReport r = Report(state, StoredSummary::kWithValBpb);
    r.failure_detail = "boom";
    AttemptOutcome out = DecideFinishedOutcome(r);
    EXPECT_EQ(out.state, ExperimentState::kFailed) << state;
    EXPECT_EQ(out.failure_kind, "crashed") << state;
    EXPECT_EQ(out.failure_detail,
              "worker reported unknown state '" + std::string(state) + "': boom");
  }
  FinishedReport kind_given = Report("nope", StoredSummary::kNone);
  kind_given.failure_kind = "oom";
  AttemptOutcome out = DecideFinishedOutcome(kind_given);
  EXPECT_EQ(out.failure_kind, "oom");
  EXPECT_EQ(out.failure_detail, "worker reported unknown state 'nope'");
}

TEST(DecideFinishedOutcome, ReportedEndsPassThrough) {
  for (ExperimentState s :
       {ExperimentState::kDiverged, ExperimentState::kFailed, ExperimentState::kInvalid,
        ExperimentState::kTimedOut, ExperimentState::kCancelled}) {
    FinishedReport r = Report(std::string(ToString(s)), StoredSummary::kNone);
    r.failure_kind = "k";
    r.failure_detail = "d";
    AttemptOutcome out = DecideFinishedOutcome(r);
    EXPECT_EQ(out.state, s);
    EXPECT_EQ(out.failure_kind, "k");
    EXPECT_EQ(out.failure_detail, "d");
  }
}

TEST(ExperimentTakesOutcome, ActiveAttemptTakesAnyOutcome) {
  for (ExperimentState now : {ExperimentState::kAssigned, ExperimentState::kRunning}) {
    EXPECT_TRUE(ExperimentTakesOutcome({now, 2}, 2, ExperimentState::kFailed));
    EXPECT_TRUE(ExperimentTakesOutcome({now, 2}, 2, ExperimentState::kSucceeded));
    // Another attempt is the active one.
    EXPECT_FALSE(ExperimentTakesOutcome({now, 3}, 2, ExperimentState::kSucceeded));
    EXPECT_FALSE(ExperimentTakesOutcome({now, 1}, 2, ExperimentState::kSucceeded));
  }
}

TEST(ExperimentTakesOutcome, LateSuccessWinsWhileRequeuedOrLost) {
  for (ExperimentState now : {ExperimentState::kQueued, ExperimentState::kLost}) {
    EXPECT_TRUE(ExperimentTakesOutcome({now, 1}, 1, ExperimentState::kSucceeded));
    EXPECT_TRUE(ExperimentTakesOutcome({now, 2}, 1, ExperimentState::kSucceeded));
    EXPECT_FALSE(ExperimentTakesOutcome({now, 1}, 2, ExperimentState::kSucceeded));
    EXPECT_FALSE(ExperimentTakesOutcome({now, 1}, 1, ExperimentState::kFailed));
    EXPECT_FALSE(ExperimentTakesOutcome({now, 2}, 1, ExperimentState::kDiverged));
  }
}

TEST(ExperimentTakesOutcome, EndedExperimentsNeverMove) {
  for (ExperimentState now :
       {ExperimentState::kSucceeded, ExperimentState::kDiverged, ExperimentState::kFailed,
        ExperimentState::kInvalid, ExperimentState::kCancelled, ExperimentState::kTimedOut}) {
    EXPECT_FALSE(ExperimentTakesOutcome({now, 1}, 1, ExperimentState::kSucceeded)) << ToString(now);
  }
}

TEST(MayReuseResult, OnlyASucceededOriginalWithAResult) {
  EXPECT_TRUE(MayReuseResult({ExperimentState::kSucceeded, false, true}));
  EXPECT_FALSE(MayReuseResult({ExperimentState::kSucceeded, true, true}));    // a reuse row
  EXPECT_FALSE(MayReuseResult({ExperimentState::kSucceeded, false, false}));  // no result row
  for (ExperimentState s :
       {ExperimentState::kQueued, ExperimentState::kRunning, ExperimentState::kDiverged,
        ExperimentState::kFailed, ExperimentState::kInvalid, ExperimentState::kLost}) {
    EXPECT_FALSE(MayReuseResult({s, false, true})) << ToString(s);
  }
}

}  // namespace
}  // namespace xv::sched
