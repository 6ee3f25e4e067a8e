#include "trainer/device/compute_device.h"

#include <unistd.h>

#include <fstream>
#include <string>

#include "trainer/device/host_info.h"

#ifdef XV_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif
// CUDA and ROCm LibTorch builds ship this generated header; its AT_ROCM_ENABLED() says which one
// this is (Debian's CPU LibTorch has none).
#if __has_include(<ATen/cuda/CUDAConfig.h>)
#include <ATen/cuda/CUDAConfig.h>
#endif

namespace xv::trainer {

const char* BackendName(Backend b) {
  switch (b) {
    case Backend::kCuda:
      return "cuda";
    case Backend::kRocm:
      return "rocm";
    default:
      return "cpu";
  }
}

Backend CompiledGpuBackend() {
#if defined(AT_ROCM_ENABLED)
  if (AT_ROCM_ENABLED()) return Backend::kRocm;
#endif
#if defined(USE_ROCM) || defined(__HIP_PLATFORM_AMD__) || defined(TORCH_HIP_VERSION)
  return Backend::kRocm;
#else
  if (std::string(XV_TORCH_BACKEND) == "rocm") return Backend::kRocm;
#ifdef XV_TORCH_CUDA
  return Backend::kCuda;
#else
  return Backend::kCpu;
#endif
#endif
}

namespace {

Status SelectCpu(ComputeDevice* out) {
  out->backend = Backend::kCpu;
  out->device = torch::Device(torch::kCPU);
  HostInfo host = ReadHostInfo();
  out->name = host.cpu_model;
  out->vendor = host.cpu_vendor;
  out->memory_bytes = host.memory_bytes;
  return Status::Ok();
}

}  // namespace

Status SelectComputeDevice(const std::string& requested, ComputeDevice* out) {
  *out = ComputeDevice();
  if (requested == "cpu") return SelectCpu(out);
  int index = 0;
  if (requested == "auto") {
    if (!torch::cuda::is_available()) return SelectCpu(out);
  } else if (requested == "cuda" || requested.rfind("cuda:", 0) == 0) {
    if (requested.size() > 5) {
      try {
        index = std::stoi(requested.substr(5));
      } catch (const std::exception&) {
        return Status::InvalidArgument("device: bad device index in '" + requested + "'");
      }
    }
    if (!torch::cuda::is_available()) {
      return Status::FailedPrecondition(
          "device: '" + requested +
          "' asked for, but no GPU is visible to this LibTorch (CPU-only build, no driver, or "
          "CUDA_VISIBLE_DEVICES/HIP_VISIBLE_DEVICES hides every GPU); use --device cpu");
    }
    if (index < 0 || index >= static_cast<int>(torch::cuda::device_count())) {
      return Status::InvalidArgument("device: index " + std::to_string(index) + " out of range, " +
                                     std::to_string(torch::cuda::device_count()) +
                                     " GPU(s) visible");
    }
  } else {
    return Status::InvalidArgument("device: must be auto, cpu, cuda or cuda:N, got '" + requested +
                                   "'");
  }
  out->device = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
  out->backend = CompiledGpuBackend() == Backend::kRocm ? Backend::kRocm : Backend::kCuda;
#ifdef XV_TORCH_CUDA
  const auto* props = at::cuda::getDeviceProperties(index);
  out->name = props->name;
  out->memory_bytes = static_cast<int64_t>(props->totalGlobalMem);
#else
  out->name = "unknown GPU";
#endif
  std::string lower = out->name;
  for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (lower.find("amd") != std::string::npos || lower.find("radeon") != std::string::npos ||
      lower.find("instinct") != std::string::npos) {
    out->backend = Backend::kRocm;
  }
  out->vendor = out->backend == Backend::kRocm ? "amd" : "nvidia";
  return Status::Ok();
}

}  // namespace xv::trainer
