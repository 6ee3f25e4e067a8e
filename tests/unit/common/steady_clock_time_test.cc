// SecondsBetween and SecondsSince on the steady clock: exact differences of given time points
// (sign included) and a real elapsed wait.
#include "common/steady_clock_time.h"

#include <gtest/gtest.h>

#include <thread>

namespace xv {
namespace {

TEST(SteadyClockTimeTest, SecondsBetweenIsTheSignedDifference) {
  const SteadyClock::time_point t0 = SteadyClock::now();
  EXPECT_DOUBLE_EQ(SecondsBetween(t0, t0), 0.0);
  EXPECT_DOUBLE_EQ(SecondsBetween(t0, t0 + std::chrono::milliseconds(1500)), 1.5);
  EXPECT_DOUBLE_EQ(SecondsBetween(t0 + std::chrono::seconds(2), t0), -2.0);
  EXPECT_DOUBLE_EQ(SecondsBetween(t0, t0 + std::chrono::nanoseconds(250)), 250e-9);
}

TEST(SteadyClockTimeTest, SecondsSinceCountsARealWait) {
  const SteadyClock::time_point t0 = SteadyClock::now();
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const double waited = SecondsSince(t0);
  EXPECT_GE(waited, 0.05);
  EXPECT_LT(waited, 5.0);
  EXPECT_LT(SecondsSince(SteadyClock::now() + std::chrono::hours(1)), 0.0);
}

}  // namespace
}  // namespace xv
