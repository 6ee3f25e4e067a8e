#include "client/views/number_format.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "client/views/progress_bar.h"

namespace xv::client {
namespace {

TEST(FormatFixed, RoundsToTheGivenDecimals) {
  EXPECT_EQ(FormatFixed(0.9979876543, 6), "0.997988");
  EXPECT_EQ(FormatFixed(1.2, 6), "1.200000");
  EXPECT_EQ(FormatFixed(std::nan(""), 6), "-");
  EXPECT_EQ(FormatFixed(std::numeric_limits<double>::infinity(), 6), "inf");
}

TEST(FormatThousands, GroupsDigits) {
  EXPECT_EQ(FormatThousands(0.0), "0");
  EXPECT_EQ(FormatThousands(999.4), "999");
  EXPECT_EQ(FormatThousands(1000.0), "1,000");
  EXPECT_EQ(FormatThousands(1234567.8), "1,234,568");
  EXPECT_EQ(FormatThousands(static_cast<int64_t>(-1234567)), "-1,234,567");
  EXPECT_EQ(FormatThousands(std::numeric_limits<int64_t>::min()), "-9,223,372,036,854,775,808");
  EXPECT_EQ(FormatThousands(std::nan("")), "-");
}

TEST(FormatDuration, PicksUnits) {
  EXPECT_EQ(FormatDuration(12.34), "12.3s");
  EXPECT_EQ(FormatDuration(245), "4m05s");
  EXPECT_EQ(FormatDuration(3720), "1h02m");
  EXPECT_EQ(FormatDuration(-1), "-");
}

TEST(RenderProgressBar, FillsProportionallyAndClamps) {
  EXPECT_EQ(RenderProgressBar(0.5, 10), "[#####-----]  50%");
  EXPECT_EQ(RenderProgressBar(0.0, 4), "[----]   0%");
  EXPECT_EQ(RenderProgressBar(1.7, 4), "[####] 100%");
  EXPECT_EQ(RenderProgressBar(std::nan(""), 4), "[----]   0%");
}

}  // namespace
}  // namespace xv::client
