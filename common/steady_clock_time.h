// Elapsed time on the steady clock, for timeouts, waits and durations; never wall time (a clock
// set back must not stretch a deadline).
// Thread-safety: pure functions.
#pragma once

#include <chrono>

namespace xv {

using SteadyClock = std::chrono::steady_clock;

// Seconds from `start` to `now` (negative when `now` is earlier).
inline double SecondsBetween(SteadyClock::time_point start, SteadyClock::time_point now) {
  return std::chrono::duration<double>(now - start).count();
}

// Seconds from `start` to now.
inline double SecondsSince(SteadyClock::time_point start) {
  return SecondsBetween(start, SteadyClock::now());
}

}  // namespace xv
