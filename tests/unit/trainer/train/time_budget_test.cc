// The time-budget rule with a fake clock: steps 0..10 are not timed; the loop stops after the first
// later step whose timed total reaches the budget; progress = timed / budget.
#include "trainer/train/time_budget.h"

#include <gtest/gtest.h>

#include <vector>

namespace xv::trainer {
namespace {

class FakeClock : public TrainingClock {
 public:
  double NowSeconds() override { return now; }
  double now = 1000.0;
};

// Runs the loop's protocol with step durations `dt(step)`; returns the steps run.
template <typename Dt>
int64_t RunSteps(TimeBudget* budget, FakeClock* clock, Dt dt, std::vector<double>* progress) {
  for (int64_t step = 0; step < 100000; ++step) {
    if (progress) progress->push_back(budget->Progress());
    budget->BeginStep(step);
    clock->now += dt(step);
    budget->EndStep();
    if (budget->Exhausted()) return step + 1;
  }
  return -1;
}

TEST(TimeBudget, FirstElevenStepsAreNotTimed) {
  FakeClock clock;
  TimeBudget budget(1.0, &clock);
  // Slow "compile" steps 0..10 (5 s each) never count; then 0.3 s steps: 11, 12, 13 make 0.9 s,
  // step 14 makes 1.2 s >= 1 -> stop after 15 steps.
  int64_t steps = RunSteps(
      &budget, &clock, [](int64_t s) { return s <= 10 ? 5.0 : 0.3; }, nullptr);
  EXPECT_EQ(steps, 15);
  EXPECT_NEAR(budget.timed_seconds(), 1.2, 1e-12);
  EXPECT_EQ(budget.timed_steps(), 4);
  EXPECT_DOUBLE_EQ(budget.Progress(), 1.0);
  EXPECT_DOUBLE_EQ(budget.remaining_seconds(), 0.0);
}

TEST(TimeBudget, ProgressSeenByEachStepIsTimedTotalOverBudget) {
  FakeClock clock;
  TimeBudget budget(2.0, &clock);
  std::vector<double> progress;
  int64_t steps = RunSteps(
      &budget, &clock, [](int64_t) { return 0.5; }, &progress);
  // Timed: steps 11, 12, 13, 14 -> 2.0 s after step 14.
  EXPECT_EQ(steps, 15);
  for (int i = 0; i <= 11; ++i) EXPECT_DOUBLE_EQ(progress[i], 0.0) << i;
  EXPECT_DOUBLE_EQ(progress[12], 0.25);
  EXPECT_DOUBLE_EQ(progress[13], 0.5);
  EXPECT_DOUBLE_EQ(progress[14], 0.75);
}

TEST(TimeBudget, ZeroBudgetStillRunsTheUntimedSteps) {
  FakeClock clock;
  TimeBudget budget(0.0, &clock);
  // Upstream: `step > 10 and total >= budget` -> the 11th step (index 10) completes, step count 11.
  int64_t steps = RunSteps(
      &budget, &clock, [](int64_t) { return 0.1; }, nullptr);
  EXPECT_EQ(steps, 11);
  EXPECT_EQ(budget.timed_steps(), 0);
}

TEST(TimeBudget, ExactBudgetStops) {
  FakeClock clock;
  TimeBudget budget(0.5, &clock);
  int64_t steps = RunSteps(
      &budget, &clock, [](int64_t) { return 0.25; }, nullptr);
  EXPECT_EQ(steps, 13);  // steps 11 and 12: 0.25 + 0.25 = 0.5
}

}  // namespace
}  // namespace xv::trainer
