#include "daemon/sched/lease_table.h"

namespace xv::sched {

LeaseTable::LeaseTable(std::chrono::milliseconds lease, Clock::time_point baseline)
    : lease_(lease), baseline_(baseline) {}

void LeaseTable::Touch(int64_t worker_id, Clock::time_point now) {
  std::lock_guard<std::mutex> lock(mu_);
  auto& t = last_contact_[worker_id];
  if (now > t) t = now;
}

bool LeaseTable::Expired(int64_t worker_id, Clock::time_point now) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = last_contact_.find(worker_id);
  Clock::time_point last = it == last_contact_.end() ? baseline_ : it->second;
  return now - last > lease_;
}

}  // namespace xv::sched
