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

}  // namespace
}  // namespace xv::trainer
