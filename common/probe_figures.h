// ProbeFigures: the headline numbers of an `xv-train probe` JSON (trainer/device/device_probe.h):
// the best matmul TFLOP/s over its sizes (bf16 on GPUs, fp32 on the CPU) and the device memory
// bandwidth. Read by the worker (log), the daemon (workers table) and xvctl.
// Thread-safety: pure function.
#pragma once

#include <string>

namespace xv {

struct ProbeFigures {
  double matmul_tflops = 0;       // 0 when the probe has no matmul figure
  std::string matmul_dtype;       // "bfloat16" | "float32" | ""
  double bandwidth_gb_per_s = 0;  // 0 when absent
};

// Parses `probe_json`; false (and *out zeroed) when it is not a JSON object.
bool ParseProbeFigures(const std::string& probe_json, ProbeFigures* out);

}  // namespace xv
