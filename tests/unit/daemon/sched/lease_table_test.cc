// Tests of LeaseTable (daemon/sched/lease_table.h) with a driven clock.
#include <gtest/gtest.h>

#include "daemon/sched/lease_table.h"

namespace xv::sched {
namespace {

using std::chrono::milliseconds;

TEST(LeaseTable, ExpiresOnlyAfterALeaseWithoutContact) {
  const auto t0 = LeaseTable::Clock::time_point() + std::chrono::hours(1);
  LeaseTable leases(milliseconds(1000), t0);
  leases.Touch(7, t0 + milliseconds(500));
  EXPECT_FALSE(leases.Expired(7, t0 + milliseconds(1400)));
  EXPECT_FALSE(leases.Expired(7, t0 + milliseconds(1500)));
  EXPECT_TRUE(leases.Expired(7, t0 + milliseconds(1501)));
  leases.Touch(7, t0 + milliseconds(1600));
  EXPECT_FALSE(leases.Expired(7, t0 + milliseconds(2000)));
  // An older timestamp never moves the lease back.
  leases.Touch(7, t0);
  EXPECT_FALSE(leases.Expired(7, t0 + milliseconds(2500)));
}

TEST(LeaseTable, UnknownWorkersGetOneLeaseFromTheBaseline) {
  const auto t0 = LeaseTable::Clock::time_point() + std::chrono::hours(1);
  LeaseTable leases(milliseconds(1000), t0);
  EXPECT_FALSE(leases.Expired(42, t0 + milliseconds(999)));
  EXPECT_TRUE(leases.Expired(42, t0 + milliseconds(1001)));
}

}  // namespace
}  // namespace xv::sched
