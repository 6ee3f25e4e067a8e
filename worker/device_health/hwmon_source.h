// HwmonSource: AMD device health from the amdgpu driver's sysfs files under a root (the worker's
// --sysfs-root, "/sys" by default; tests point it at a fixture tree). Files read, each under
// <root>/class/drm/cardN/device/:
//   vendor                      "0x1002" for AMD
//   hwmon/hwmon*/power1_average µW (older kernels), else power1_input
//   hwmon/hwmon*/temp2_input    m°C junction, else temp1_input (edge)
//   hwmon/hwmon*/freq1_input    Hz, the graphics clock (sclk)
//   hwmon/hwmon*/energy1_input  µJ counter, when the kernel has it
//   gpu_busy_percent            %
//   mem_info_vram_used          bytes
// A missing or unreadable file leaves that figure unset. amdgpu's hwmon has no throttle reasons,
// so this source never sets throttle_known. The worker's device N is the N-th card whose vendor is
// 0x1002, in ascending K of cardK (probe order, normally PCI order, HIP's default order);
// HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES in the worker's own environment are not followed.
// Thread-safety: see HealthSource.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "worker/device_health/health_source.h"

namespace xv::worker::device_health {

// The device directories (<root>/class/drm/cardK/device) of the AMD cards under `sysfs_root`, in
// the order that maps device indices.
std::vector<std::string> ListAmdCardDevices(const std::string& sysfs_root);

// Opens the hwmon source of AMD device `index`. Fails (NotFound) when there is no such card or it
// has no hwmon directory.
Status OpenHwmonSource(const std::string& sysfs_root, int index,
                       std::unique_ptr<HealthSource>* out);

}  // namespace xv::worker::device_health
