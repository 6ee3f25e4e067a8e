#include "trainer/train/divergence_check.h"

#include <gtest/gtest.h>

#include <limits>

namespace xv::trainer {
namespace {

TEST(FirstDivergedLoss, FiniteLossesBelowThresholdPass) {
  EXPECT_FALSE(FirstDivergedLoss({5.5f, 3.2f, 100.0f}).has_value());
  EXPECT_FALSE(FirstDivergedLoss({}).has_value());
}

TEST(FirstDivergedLoss, ReportsFirstBadMicroStep) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto d = FirstDivergedLoss({4.0f, nan, inf});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->micro_step, 1);
  EXPECT_EQ(d->value_text, "nan");
  d = FirstDivergedLoss({4.0f, 3.0f, -inf});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->micro_step, 2);
  EXPECT_EQ(d->value_text, "-inf");
  d = FirstDivergedLoss({100.5f});
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->micro_step, 0);
  EXPECT_EQ(d->value_text, "100.5");
}

TEST(FirstDivergence, HealthyStepPasses) {
  StepHealth h{{3.0f, 2.5f}, 1.25f, {1.0f, 40.0f}};
  EXPECT_FALSE(FirstDivergence(h, {"a", "b"}).has_value());
}

TEST(FirstDivergence, LossComesFirstThenGradNormThenParameter) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<std::string> names = {"resid_lambdas", "transformer.wte.weight",
                                          "lm_head.weight"};
  auto d = FirstDivergence({{3.0f, 101.0f}, nan, {1.0f, inf, nan}}, names);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->what, "loss");
  EXPECT_EQ(d->micro_step, 1);
  EXPECT_EQ(d->value_text, "101");
  EXPECT_EQ(DescribeDivergence(*d, 12), "loss 101 at step 12, micro-step 1 (non-finite or > 100)");

  d = FirstDivergence({{3.0f}, inf, {1.0f, inf, nan}}, names);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->what, "grad_norm");
  EXPECT_EQ(d->micro_step, -1);
  EXPECT_EQ(d->value_text, "inf");
  EXPECT_TRUE(d->parameter.empty());

  d = FirstDivergence({{3.0f}, 2.0f, {1.0f, nan, inf}}, names);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->what, "parameter");
  EXPECT_EQ(d->parameter, "transformer.wte.weight");  // the first in state-dict order
  EXPECT_EQ(d->value_text, "nan");
  EXPECT_EQ(DescribeDivergence(*d, 0),
            "parameter transformer.wte.weight: norm nan after the update of step 0 (non-finite "
            "parameter)");
  // A loss of exactly 100 and huge finite norms are not divergence by this rule.
  EXPECT_FALSE(FirstDivergence({{100.0f}, 3e38f, {3e38f}}, {"x"}).has_value());
}

}  // namespace
}  // namespace xv::trainer
