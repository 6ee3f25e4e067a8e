#include "worker/reconnect_backoff.h"

#include <algorithm>

namespace xv::worker {

ReconnectBackoff::ReconnectBackoff(double initial_s, double max_s, uint64_t seed)
    : initial_s_(std::max(initial_s, 0.001)),
      max_s_(std::max(max_s, std::max(initial_s, 0.001))),
      base_s_(initial_s_),
      rng_(seed) {}

double ReconnectBackoff::NextDelaySeconds() {
  std::uniform_real_distribution<double> jitter(0.5, 1.0);
  const double delay = base_s_ * jitter(rng_);
  base_s_ = std::min(base_s_ * 2, max_s_);
  return delay;
}

}  // namespace xv::worker
