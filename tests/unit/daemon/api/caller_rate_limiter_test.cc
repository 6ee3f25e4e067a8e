// CallerRateLimiter: one token bucket per caller, refilled with time (an injected clock); the
// refusal says the limit, the flags and when to retry; callers are keyed without their port.
#include "daemon/api/caller_rate_limiter.h"

#include <gtest/gtest.h>

namespace xv::daemon {
namespace {

using Clock = std::chrono::steady_clock;

TEST(CallerRateLimiterTest, ABurstThenTheRefillRate) {
  Clock::time_point now = Clock::now();
  CallerRateLimiter limiter({/*per_second=*/2, /*burst=*/5}, [&] { return now; });
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Admit("unix:", "Submit").ok()) << i;
  Status refused = limiter.Admit("unix:", "Submit");
  EXPECT_EQ(refused.code(), Status::Code::kResourceExhausted);
  EXPECT_NE(refused.message().find("Submit: rate limit"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("--rate-limit"), std::string::npos) << refused.message();
  EXPECT_NE(refused.message().find("retry in 0.5 s"), std::string::npos) << refused.message();
  // Another caller has its own bucket.
  EXPECT_TRUE(limiter.Admit("ipv4:127.0.0.2:4000", "Submit").ok());
  // Half a second brings one token back, not two.
  now += std::chrono::milliseconds(500);
  EXPECT_TRUE(limiter.Admit("unix:", "Cancel").ok());
  EXPECT_FALSE(limiter.Admit("unix:", "Cancel").ok());
  // A long quiet spell refills up to the burst, not beyond.
  now += std::chrono::hours(1);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(limiter.Admit("unix:", "Submit").ok()) << i;
  EXPECT_FALSE(limiter.Admit("unix:", "Submit").ok());
}

TEST(CallerRateLimiterTest, ReconnectingDoesNotMakeANewCaller) {
  Clock::time_point now = Clock::now();
  CallerRateLimiter limiter({1, 2}, [&] { return now; });
  EXPECT_TRUE(limiter.Admit("ipv4:127.0.0.1:50001", "Submit").ok());
  EXPECT_TRUE(limiter.Admit("ipv4:127.0.0.1:50002", "Submit").ok());
  EXPECT_FALSE(limiter.Admit("ipv4:127.0.0.1:50003", "Submit").ok());
  EXPECT_EQ(CallerRateLimiter::CallerKey("ipv6:[::1]:7000"), "ipv6:[::1]");
  EXPECT_EQ(CallerRateLimiter::CallerKey("unix:/var/lib/xv/xvd.sock"), "unix");
  EXPECT_EQ(CallerRateLimiter::CallerKey("unix:"), "unix");
  EXPECT_EQ(CallerRateLimiter::CallerKey("something-else"), "something-else");
}

TEST(CallerRateLimiterTest, ZeroPerSecondTurnsItOff) {
  CallerRateLimiter limiter({0, 1});
  for (int i = 0; i < 1000; ++i) ASSERT_TRUE(limiter.Admit("unix:", "Submit").ok());
}

}  // namespace
}  // namespace xv::daemon
