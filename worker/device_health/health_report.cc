#include "worker/device_health/health_report.h"

namespace xv::worker::device_health {

void HealthSummaryToProto(const HealthSummary& h, v1::DeviceHealth* out) {
  out->Clear();
  out->set_source(h.source);
  out->set_sample_count(h.samples);
  out->set_sampled_seconds(h.sampled_seconds);
  if (h.avg_power_w) out->set_avg_power_w(*h.avg_power_w);
  if (h.energy_j) out->set_energy_j(*h.energy_j);
  out->set_energy_method(h.energy_method);
  if (h.peak_temp_c) out->set_peak_temp_c(*h.peak_temp_c);
  if (h.mean_sm_clock_mhz) out->set_mean_sm_clock_mhz(*h.mean_sm_clock_mhz);
  if (h.min_sm_clock_mhz) out->set_min_sm_clock_mhz(*h.min_sm_clock_mhz);
  if (h.peak_mem_used_mib) out->set_peak_mem_used_mib(*h.peak_mem_used_mib);
  out->set_throttle_known(h.throttle_known);
  out->set_throttle_events(h.throttle_events);
  out->set_throttled_seconds(h.throttled_seconds);
  out->set_power_capped_seconds(h.power_capped_seconds);
  out->set_throttle_reasons(ThrottleBitsText(h.throttle_bits_seen));
  out->set_throttled(h.throttled);
  if (h.start_temp_c) out->set_start_temp_c(*h.start_temp_c);
  out->set_start_wait_s(h.start_wait_s);
}

}  // namespace xv::worker::device_health
