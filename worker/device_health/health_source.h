// HealthSource: where a worker reads its device's health from. Three kinds:
//   nvml   NVIDIA, NVML loaded at run time with dlopen (worker/device_health/nvml_source.h)
//   hwmon  AMD, the amdgpu sysfs/hwmon files (worker/device_health/hwmon_source.h)
//   none   the CPU, or a GPU whose source could not be opened: no readings, and results say so
// OpenHealthSource picks one for a worker's device; it never fails: the fallback is "none" with the
// reason in *why_none.
// Thread-safety: a source is used by one thread at a time (the sampler thread while an attempt
// runs, the executor thread for the thermal guard before it).
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "worker/device_health/health_sample.h"

namespace xv::worker::device_health {

class HealthSource {
 public:
  virtual ~HealthSource() = default;
  // "nvml", "hwmon" or "none".
  virtual std::string kind() const = 0;
  // What is measured, for logs: "NVML device 0 (NVIDIA H200)", "/sys/class/drm/card1".
  virtual std::string description() const = 0;
  // Takes one sample (t_s is set by the caller). A figure the device does not report stays unset;
  // an error means nothing could be read this time.
  virtual Status Read(HealthSample* sample) = 0;
};

// The source that reads nothing.
std::unique_ptr<HealthSource> NewNoHealthSource(std::string description);

struct HealthSourceOptions {
  std::string vendor;           // nvidia | amd | cpu (v1::Device.vendor)
  int device_index = -1;        // the worker's device ordinal (cuda:N), -1 for the CPU
  std::string device_name;      // the trainer's name of the device, to check the mapping
  std::string source = "auto";  // auto | nvml | hwmon | none (worker flag --health-source)
  std::string nvml_library = "libnvidia-ml.so.1";
  std::string sysfs_root = "/sys";  // hwmon reads <sysfs_root>/class/drm/...
};

// The source for a device; "none" (with the reason in *why_none, may be null) when the vendor has
// no source or opening it failed.
std::unique_ptr<HealthSource> OpenHealthSource(const HealthSourceOptions& options,
                                               std::string* why_none);

}  // namespace xv::worker::device_health
