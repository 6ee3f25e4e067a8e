// ReconnectBackoff: how long a worker waits before dialling the daemon again. Exponential with
// jitter: the n-th consecutive failure waits a uniformly random time in [d/2, d], where d starts at
// `initial_s` and doubles up to `max_s`; a successful registration resets it. The jitter keeps a
// box of workers from reconnecting in lockstep after a daemon restart.
//
// Thread-safety: none; one connection thread owns it.
#pragma once

#include <cstdint>
#include <random>

namespace xv::worker {

class ReconnectBackoff {
 public:
  ReconnectBackoff(double initial_s, double max_s, uint64_t seed = std::random_device{}());

  // The wait before the next attempt; each call doubles the base for the following one.
  double NextDelaySeconds();
  // The connection registered: start again from `initial_s`.
  void Reset() { base_s_ = initial_s_; }
  double base_seconds() const { return base_s_; }

 private:
  const double initial_s_;
  const double max_s_;
  double base_s_;
  std::mt19937_64 rng_;
};

}  // namespace xv::worker
