// `xv-train probe`: measured ceilings of a device, so MFU can be read against what the device
// really does as well as its datasheet peak: matmul TFLOP/s (bf16 4096^2 and 8192^2 on GPUs; fp32
// 512^2 and 1024^2 on the CPU, where bf16 GEMMs are not representative), attention forward+backward
// time per available backend at the recipe's shapes (on the CPU, batch 1 and at most 256 positions,
// said in the output), and memory bandwidth from a large device copy. Thread-safety: runs on the
// calling thread.
#pragma once

#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "trainer/device/compute_device.h"

namespace xv::trainer {

// REQUIRES: `sizes` resolved from `recipe`.
nlohmann::json RunDeviceProbe(const ComputeDevice& device, const Recipe& recipe,
                              const ResolvedSizes& sizes);

}  // namespace xv::trainer
