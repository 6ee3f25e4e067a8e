// ReconnectBackoff: jittered delays in [d/2, d], d doubling from the initial delay to the cap, and
// back to the start after a registration.
#include "worker/reconnect_backoff.h"

#include <gtest/gtest.h>

#include <set>

namespace xv::worker {
namespace {

TEST(ReconnectBackoff, DoublesWithJitterUpToTheCapAndResets) {
  ReconnectBackoff b(0.1, 5.0, /*seed=*/42);
  double base = 0.1;
  for (int i = 0; i < 12; ++i) {
    const double d = b.NextDelaySeconds();
    EXPECT_GE(d, base / 2) << "attempt " << i;
    EXPECT_LE(d, base) << "attempt " << i;
    base = std::min(base * 2, 5.0);
  }
  EXPECT_DOUBLE_EQ(b.base_seconds(), 5.0);
  b.Reset();
  EXPECT_DOUBLE_EQ(b.base_seconds(), 0.1);
  EXPECT_LE(b.NextDelaySeconds(), 0.1);
}

TEST(ReconnectBackoff, WorkersDoNotRetryInLockstep) {
  std::set<double> first_delays;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    ReconnectBackoff b(1.0, 5.0, seed);
    first_delays.insert(b.NextDelaySeconds());
  }
  EXPECT_EQ(first_delays.size(), 8u);
}

}  // namespace
}  // namespace xv::worker
