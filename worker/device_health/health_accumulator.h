// HealthAccumulator: turns the samples of one attempt into its HealthSummary: average power and
// energy (EnergyMeter), peak temperature, SM clock mean/min, peak memory, and throttling: the
// seconds spent throttled (each sample's state holds until the next sample), the number of times
// a thermal/hardware slowdown started, and the `throttled` flag (docs/worker.md § Device health).
// Thread-safety: none; one owner (the sampler thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "worker/device_health/energy_meter.h"
#include "worker/device_health/health_sample.h"

namespace xv::worker::device_health {

struct HealthSummary {
  std::string source = "none";  // nvml | hwmon | none
  int samples = 0;              // successful reads
  int read_errors = 0;
  double sampled_seconds = 0;  // first to last sample
  std::optional<double> avg_power_w;
  std::optional<double> energy_j;
  std::string energy_method;  // counter | integrated | ""
  std::optional<double> peak_temp_c;
  std::optional<double> mean_sm_clock_mhz;
  std::optional<double> min_sm_clock_mhz;
  std::optional<double> peak_mem_used_mib;
  bool throttle_known = false;
  int throttle_events = 0;
  double throttled_seconds = 0;
  double power_capped_seconds = 0;
  uint32_t throttle_bits_seen = 0;
  bool throttled = false;
  // Filled by the thermal guard, not by the accumulator.
  std::optional<double> start_temp_c;
  double start_wait_s = 0;
};

class HealthAccumulator {
 public:
  explicit HealthAccumulator(std::string source,
                             std::optional<double> counter_range_j = std::nullopt);
  // A successful read, in time order.
  void Add(const HealthSample& s);
  // A read that failed (counted, otherwise ignored).
  void AddError() { ++summary_.read_errors; }
  // The summary of everything added so far.
  HealthSummary Summary() const;

 private:
  HealthSummary summary_;
  EnergyMeter energy_;
  std::optional<double> first_t_, last_t_;
  uint32_t last_throttle_ = 0;
  double clock_sum_ = 0;
  int clock_n_ = 0;
};

}  // namespace xv::worker::device_health
