// NvmlSource: NVIDIA device health through NVML, loaded at run time with dlopen (no link-time
// dependency, no CUDA headers: the few functions used are declared here with NVML's documented C
// ABI). Power from nvmlDeviceGetPowerUsage (mW), energy from nvmlDeviceGetTotalEnergyConsumption
// (mJ since the driver loaded; Volta and newer), temperature (NVML_TEMPERATURE_GPU), SM clock,
// memory used, and the current clock throttle reasons.
//
// Device mapping: the worker's `--device cuda:N` is NVML index N. NVML numbers devices in PCI bus
// order; CUDA does too when CUDA_DEVICE_ORDER=PCI_BUS_ID or when all GPUs are the same model (its
// default FASTEST_FIRST ties break by PCI order). On a box of mixed models without
// CUDA_DEVICE_ORDER=PCI_BUS_ID the two can differ: OpenNvmlSource compares NVML's name with the
// trainer's and logs a warning when they disagree.
// Thread-safety: see HealthSource. NVML is initialised once per source and shut down with it.
#pragma once

#include <memory>
#include <string>

#include "worker/device_health/health_source.h"

namespace xv::worker::device_health {

// Opens NVML from `library` ("libnvidia-ml.so.1"; a path is allowed) for device `index`. Fails
// (Unavailable) when the library cannot be loaded, a required symbol is missing, nvmlInit fails
// or there is no such device; the message says which.
Status OpenNvmlSource(const std::string& library, int index, const std::string& expected_name,
                      std::unique_ptr<HealthSource>* out);

}  // namespace xv::worker::device_health
