#include "worker/exit_classification.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace xv::worker {
namespace {

ExitStatus Exited(int code) { return ExitStatus{true, code, 0}; }
ExitStatus Signaled(int sig) { return ExitStatus{false, 0, sig}; }

TEST(ClassifyExit, ExitCodesOfDocsEventsMd) {
  struct Case {
    int code;
    const char* state;
    const char* kind;
  } cases[] = {
      {0, "succeeded", ""},        {1, "failed", "crashed"}, {2, "invalid", "invalid_config"},
      {3, "diverged", "diverged"}, {4, "failed", "oom"},     {5, "failed", "data_error"},
      {77, "failed", "crashed"}};
  for (const auto& c : cases) {
    AttemptOutcome o = ClassifyExit(Exited(c.code), KillReason::kNone, 0, "");
    EXPECT_EQ(o.state, c.state) << "exit code " << c.code;
    EXPECT_EQ(o.failure_kind, c.kind) << "exit code " << c.code;
  }
}

TEST(ClassifyExit, ErrorEventMessageBecomesTheDetail) {
  AttemptOutcome o =
      ClassifyExit(Exited(2), KillReason::kNone, 0, "matrix_lr: must be > 0, got -1");
  EXPECT_EQ(o.failure_detail, "matrix_lr: must be > 0, got -1");
  o = ClassifyExit(Exited(1), KillReason::kNone, 0, "boom");
  EXPECT_EQ(o.failure_detail, "boom (exit code 1)");
  o = ClassifyExit(Exited(1), KillReason::kNone, 0, "");
  EXPECT_EQ(o.failure_detail, "exit code 1");
}

TEST(ClassifyExit, SignalIsACrashNamingTheSignal) {
  AttemptOutcome o = ClassifyExit(Signaled(SIGSEGV), KillReason::kNone, 0, "");
  EXPECT_EQ(o.state, "failed");
  EXPECT_EQ(o.failure_kind, "crashed");
  EXPECT_EQ(o.failure_detail, "killed by SIGSEGV");
}

TEST(ClassifyExit, AKillByTheWorkerWinsOverTheExitStatus) {
  AttemptOutcome o = ClassifyExit(Signaled(SIGTERM), KillReason::kDeadline, 42, "");
  EXPECT_EQ(o.state, "timed_out");
  EXPECT_EQ(o.failure_kind, "timed_out");
  EXPECT_NE(o.failure_detail.find("42 s"), std::string::npos) << o.failure_detail;
  o = ClassifyExit(Exited(0), KillReason::kCancel, 0, "");
  EXPECT_EQ(o.state, "cancelled");
}

TEST(SignalName, KnownAndUnknown) {
  EXPECT_EQ(SignalName(SIGKILL), "SIGKILL");
  EXPECT_EQ(SignalName(99), "signal 99");
}

}  // namespace
}  // namespace xv::worker
