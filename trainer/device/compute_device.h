// ComputeDevice: which accelerator xv-train runs on, and what it is. Backend detection: a CUDA or
// ROCm LibTorch with a visible GPU gives cuda/rocm (ROCm builds answer to torch::kCUDA; they are
// told apart by the build's HIP macros and the device's vendor), else cpu. Thread-safety:
// SelectComputeDevice queries the runtime; call from one thread. ComputeDevice is a value.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

#include "common/status.h"

namespace xv::trainer {

enum class Backend { kCpu, kCuda, kRocm };
const char* BackendName(Backend b);  // "cpu" | "cuda" | "rocm"

struct ComputeDevice {
  Backend backend = Backend::kCpu;
  torch::Device device = torch::Device(torch::kCPU);
  std::string name;    // "NVIDIA H200", "AMD Instinct MI300X", or the CPU model
  std::string vendor;  // "nvidia" | "amd" | CPU vendor id ("GenuineIntel", "AuthenticAMD", ...)
  int64_t memory_bytes = 0;  // device memory, or host memory for the CPU
  bool is_cpu() const { return backend == Backend::kCpu; }
};

// requested: "auto" (a GPU when one is visible, else the CPU), "cpu", "cuda" or "cuda:N".
// Fails with InvalidArgument for other strings, FailedPrecondition when a GPU is asked for and none
// is visible.
Status SelectComputeDevice(const std::string& requested, ComputeDevice* out);

// The GPU flavour this LibTorch was built for: kCuda, kRocm, or kCpu for a CPU-only build.
Backend CompiledGpuBackend();

}  // namespace xv::trainer
