// Schedules against values worked out by hand from upstream train.py's get_lr_multiplier,
// get_muon_momentum and get_weight_decay.
#include "trainer/train/schedules.h"

#include <gtest/gtest.h>

namespace xv::trainer {
namespace {

TEST(LrMultiplier, UpstreamDefaultsFlatThenLinearWarmdownToZero) {
  ScheduleOptions o;  // warmup 0, warmdown 0.5, final 0
  EXPECT_DOUBLE_EQ(LrMultiplier(0.0, o), 1.0);
  EXPECT_DOUBLE_EQ(LrMultiplier(0.49, o), 1.0);
  EXPECT_DOUBLE_EQ(LrMultiplier(0.5, o), 1.0);   // cooldown = 0.5/0.5 = 1
  EXPECT_DOUBLE_EQ(LrMultiplier(0.75, o), 0.5);  // cooldown = 0.25/0.5
  EXPECT_DOUBLE_EQ(LrMultiplier(0.9, o), 0.2);
  EXPECT_DOUBLE_EQ(LrMultiplier(1.0, o), 0.0);
}

TEST(LrMultiplier, WarmupAndFinalFraction) {
  ScheduleOptions o;
  o.warmup_ratio = 0.1;
  o.warmdown_ratio = 0.5;
  o.final_lr_frac = 0.1;
  EXPECT_DOUBLE_EQ(LrMultiplier(0.0, o), 0.0);
  EXPECT_DOUBLE_EQ(LrMultiplier(0.05, o), 0.5);
  EXPECT_DOUBLE_EQ(LrMultiplier(0.3, o), 1.0);
  // cooldown = 0.25 / 0.5 = 0.5 -> 0.5 * 1 + 0.5 * 0.1
  EXPECT_DOUBLE_EQ(LrMultiplier(0.75, o), 0.55);
  EXPECT_DOUBLE_EQ(LrMultiplier(1.0, o), 0.1);
}

TEST(LrMultiplier, AmdsenseRound5Warmdown) {
  ScheduleOptions o;
  o.warmdown_ratio = 0.75;
  o.final_lr_frac = 0.07;
  EXPECT_DOUBLE_EQ(LrMultiplier(0.2, o), 1.0);
  EXPECT_NEAR(LrMultiplier(0.25, o), 1.0, 1e-15);
  // cooldown = 0.375 / 0.75 = 0.5 -> 0.5 + 0.5 * 0.07 = 0.535
  EXPECT_NEAR(LrMultiplier(0.625, o), 0.535, 1e-15);
  EXPECT_NEAR(LrMultiplier(1.0, o), 0.07, 1e-15);
}

TEST(LrMultiplier, ZeroWarmdownStaysFlat) {
  ScheduleOptions o;
  o.warmdown_ratio = 0.0;
  EXPECT_DOUBLE_EQ(LrMultiplier(0.99, o), 1.0);
  EXPECT_DOUBLE_EQ(LrMultiplier(1.0, o), 1.0);
}

TEST(MuonMomentum, RampsFrom085To095Over300Steps) {
  ScheduleOptions o;
  EXPECT_DOUBLE_EQ(MuonMomentum(0, o), 0.85);
  EXPECT_NEAR(MuonMomentum(150, o), 0.90, 1e-15);
  EXPECT_NEAR(MuonMomentum(30, o), 0.86, 1e-15);
  EXPECT_NEAR(MuonMomentum(300, o), 0.95, 1e-15);
  EXPECT_NEAR(MuonMomentum(5000, o), 0.95, 1e-15);
}

TEST(MuonWeightDecay, ScalesWithRemainingProgress) {
  ScheduleOptions o;
  o.weight_decay = 0.2;
  EXPECT_DOUBLE_EQ(MuonWeightDecay(0.0, o), 0.2);
  EXPECT_DOUBLE_EQ(MuonWeightDecay(0.25, o), 0.15000000000000002);
  EXPECT_DOUBLE_EQ(MuonWeightDecay(1.0, o), 0.0);
}

}  // namespace
}  // namespace xv::trainer
