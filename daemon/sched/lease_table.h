// LeaseTable: when each worker was last heard from, and whether its lease has lapsed.
//
// A worker holds its attempts while it keeps contact (any message on its session counts). A worker
// never heard from since the daemon started counts as last heard at the table's baseline (daemon
// start), so attempts left assigned/running by a previous daemon get one full lease to be reclaimed
// by a reconnecting worker. The clock is passed in, so tests drive time. Thread-safety: all methods
// are safe to call concurrently (mu_).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>

namespace xv::sched {

class LeaseTable {
 public:
  using Clock = std::chrono::steady_clock;

  LeaseTable(std::chrono::milliseconds lease, Clock::time_point baseline);

  std::chrono::milliseconds lease() const { return lease_; }
  // Records contact with `worker_id` at `now`.
  void Touch(int64_t worker_id, Clock::time_point now);
  // True when the worker's last contact (or the baseline) is more than one lease before `now`.
  bool Expired(int64_t worker_id, Clock::time_point now) const;

 private:
  const std::chrono::milliseconds lease_;
  const Clock::time_point baseline_;
  mutable std::mutex mu_;
  std::map<int64_t, Clock::time_point> last_contact_;  // guarded by mu_
};

}  // namespace xv::sched
