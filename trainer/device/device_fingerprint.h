// DeviceFingerprint: the JSON object that says what ran an experiment (the `device` of the start
// event, `xv-train fingerprint`, the worker's registration): name, vendor, backend, memory, driver
// and runtime versions, LibTorch version, OS, CPU model, and the environment knobs that change
// numerics or speed (CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES, PYTORCH_CUDA_ALLOC_CONF,
// PYTORCH_TUNABLEOP_ENABLED, TF32, OMP_NUM_THREADS and LibTorch's intra-op thread count), plus the
// peak-FLOPS entry used for MFU. Thread-safety: reads the runtime and environment; call from the
// main thread.
#pragma once

#include <nlohmann/json.hpp>

#include "trainer/device/compute_device.h"

namespace xv::trainer {

nlohmann::json DeviceFingerprint(const ComputeDevice& device);

}  // namespace xv::trainer
