// HealthSample: one reading of a device's power, energy counter, temperature, clock, memory and
// throttle state, as a HealthSource takes it. Every figure is optional: a source fills only what
// its device and driver report, and "not measured" is never written as 0. Thread-safety: plain
// value.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace xv::worker::device_health {

// Why the device slowed its clocks, normalised across vendors (bits of HealthSample::throttle).
enum ThrottleBit : uint32_t {
  kThrottlePowerCap = 1u << 0,    // software power cap (NVML SwPowerCap)
  kThrottleThermal = 1u << 1,     // software or hardware thermal slowdown
  kThrottleHwSlowdown = 1u << 2,  // hardware slowdown (NVML HwSlowdown: thermal or power brake)
  kThrottlePowerBrake = 1u << 3,  // external power brake (NVML HwPowerBrakeSlowdown)
};

// The bits that flag a result `throttled`: thermal and hardware slowdowns. Running at the power
// cap is how a datacenter GPU normally runs flat out, so it is counted (power_capped_seconds) but
// does not flag the result by itself (docs/worker.md § Device health).
constexpr uint32_t kThrottleFlagMask = kThrottleThermal | kThrottleHwSlowdown | kThrottlePowerBrake;

// "power_cap,thermal" for a set of ThrottleBit; "" for none.
std::string ThrottleBitsText(uint32_t bits);

struct HealthSample {
  double t_s = 0;                 // steady-clock seconds when taken
  std::optional<double> power_w;  // board power now (or averaged by the driver over ~1 s)
  std::optional<double>
      energy_counter_j;                // a monotonically growing energy counter (may wrap/reset)
  std::optional<double> temp_c;        // GPU (edge/junction as the driver names it) temperature
  std::optional<double> sm_clock_mhz;  // SM / graphics clock
  std::optional<double> mem_used_mib;  // device memory in use (all processes)
  std::optional<double> busy_percent;  // utilisation, when the driver says
  uint32_t throttle = 0;               // ThrottleBit set
  bool throttle_known = false;         // the source reports throttle reasons at all
};

}  // namespace xv::worker::device_health
