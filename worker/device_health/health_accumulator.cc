#include "worker/device_health/health_accumulator.h"

#include <algorithm>

namespace xv::worker::device_health {

std::string ThrottleBitsText(uint32_t bits) {
  std::string out;
  auto add = [&](uint32_t bit, const char* name) {
    if (!(bits & bit)) return;
    if (!out.empty()) out += ",";
    out += name;
  };
  add(kThrottlePowerCap, "power_cap");
  add(kThrottleThermal, "thermal");
  add(kThrottleHwSlowdown, "hw_slowdown");
  add(kThrottlePowerBrake, "power_brake");
  return out;
}

HealthAccumulator::HealthAccumulator(std::string source, std::optional<double> counter_range_j)
    : energy_(counter_range_j) {
  summary_.source = std::move(source);
}

void HealthAccumulator::Add(const HealthSample& s) {
  HealthSummary& h = summary_;
  ++h.samples;
  if (last_t_) {
    // The previous sample's throttle state held until this one.
    const double dt = std::max(0.0, s.t_s - *last_t_);
    if (last_throttle_ & kThrottleFlagMask) h.throttled_seconds += dt;
    if (last_throttle_ & kThrottlePowerCap) h.power_capped_seconds += dt;
  }
  if (!first_t_) first_t_ = s.t_s;
  last_t_ = s.t_s;
  energy_.Add(s.t_s, s.power_w, s.energy_counter_j);
  if (s.temp_c) h.peak_temp_c = std::max(h.peak_temp_c.value_or(*s.temp_c), *s.temp_c);
  if (s.sm_clock_mhz) {
    clock_sum_ += *s.sm_clock_mhz;
    ++clock_n_;
    h.min_sm_clock_mhz = std::min(h.min_sm_clock_mhz.value_or(*s.sm_clock_mhz), *s.sm_clock_mhz);
  }
  if (s.mem_used_mib) {
    h.peak_mem_used_mib = std::max(h.peak_mem_used_mib.value_or(*s.mem_used_mib), *s.mem_used_mib);
  }
  if (s.throttle_known) {
    h.throttle_known = true;
    const uint32_t flagged = s.throttle & kThrottleFlagMask;
    if (flagged && !(last_throttle_ & kThrottleFlagMask)) ++h.throttle_events;
    h.throttle_bits_seen |= s.throttle;
    if (flagged) h.throttled = true;
    last_throttle_ = s.throttle;
  } else {
    last_throttle_ = 0;
  }
}

HealthSummary HealthAccumulator::Summary() const {
  HealthSummary h = summary_;
  h.sampled_seconds = (first_t_ && last_t_) ? *last_t_ - *first_t_ : 0.0;
  h.energy_j = energy_.energy_j();
  h.energy_method = energy_.method();
  h.avg_power_w = energy_.average_power_w();
  if (clock_n_ > 0) h.mean_sm_clock_mhz = clock_sum_ / clock_n_;
  return h;
}

}  // namespace xv::worker::device_health
