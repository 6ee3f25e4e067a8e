// Time-left estimates and the warm-up of `status`, `wait` and `watch`.
#include "client/views/run_eta.h"

#include <gtest/gtest.h>

#include "client/views/watch_event_view.h"

namespace xv::client {
namespace {

v1::Experiment Running(double progress) {
  v1::Experiment e;
  e.set_state("running");
  e.set_progress(progress);
  return e;
}

TEST(RunEta, WarmUpIsShownAsSuchNotAsZeroPercent) {
  EXPECT_TRUE(InWarmUp(Running(0)));
  EXPECT_EQ(ProgressCell(Running(0), 300), "warm-up (untimed steps)");
  EXPECT_FALSE(TrainingSecondsLeft(Running(0), 300).has_value());
  v1::Experiment assigned;
  assigned.set_state("assigned");
  EXPECT_EQ(ProgressCell(assigned, 300), "starting");
}

TEST(RunEta, TimeLeftIsTheUntimedShareOfTheBudget) {
  ASSERT_TRUE(TrainingSecondsLeft(Running(0.25), 300).has_value());
  EXPECT_DOUBLE_EQ(*TrainingSecondsLeft(Running(0.25), 300), 225);
  EXPECT_EQ(ProgressCell(Running(0.25), 300, 4), "[#---]  25% ~3m45s left");
  EXPECT_EQ(ProgressCell(Running(0.25), 0, 4), "[#---]  25%");  // budget unknown: no estimate
}

TEST(RunEta, OverridenBudgetWinsOverTheCampaigns) {
  v1::Experiment e = Running(0.5);
  e.set_overrides_json(R"({"time_budget_s": 8, "matrix_lr": 0.03})");
  EXPECT_DOUBLE_EQ(ExperimentTimeBudget(e, 300), 8);
  e.set_overrides_json(R"({"matrix_lr": 0.03})");
  EXPECT_DOUBLE_EQ(ExperimentTimeBudget(e, 300), 300);
}

TEST(RunEta, AllFinishedSpreadsTheQueueOverTheActiveRuns) {
  v1::Experiment done;
  done.set_state("succeeded");
  done.mutable_result()->set_total_seconds(40);
  done.mutable_result()->set_training_seconds(30);
  v1::Experiment queued;
  queued.set_state("queued");
  auto budget = [](const v1::Experiment&) { return 30.0; };
  // Running: 15 s of training + 10 s overhead; two queued runs of 40 s each; 1 active run.
  auto left = SecondsUntilAllFinished({done, Running(0.5), queued, queued}, budget);
  ASSERT_TRUE(left.has_value());
  EXPECT_DOUBLE_EQ(*left, 15 + 10 + 40 + 40);
  EXPECT_DOUBLE_EQ(*SecondsUntilAllFinished({done}, budget), 0);
  // Nothing finished and no budget: no estimate rather than a wrong one.
  EXPECT_FALSE(SecondsUntilAllFinished({queued}, [](const v1::Experiment&) { return 0.0; }));
}

TEST(WatchEventLine, StepLinesCarryProgressAndTimeLeftOrWarmUp) {
  v1::WatchEvent ev;
  ev.set_time("2026-12-01T10:00:00.000Z");
  ev.set_kind("step");
  ev.set_experiment_id(4);
  ev.set_name("head");
  ev.set_step(120);
  ev.set_loss(3.25);
  ev.set_tok_per_sec(1000);
  ev.set_json(R"({"type":"step","progress":0.4,"remaining_s":180})");
  EXPECT_EQ(WatchEventLine(ev),
            "10:00:00.000  #4 head  step 120  loss 3.2500  tok/s 1,000  40%  ~3m00s left");
  ev.set_json(R"({"type":"step","progress":0,"remaining_s":300})");
  EXPECT_EQ(WatchEventLine(ev),
            "10:00:00.000  #4 head  step 120  loss 3.2500  tok/s 1,000  warm-up");
}

}  // namespace
}  // namespace xv::client
