#include "trainer/device/device_fingerprint.h"

#include <cstdlib>

#include <ATen/Context.h>
#include <ATen/Parallel.h>
#include <torch/version.h>

#include "trainer/device/host_info.h"
#include "trainer/device/peak_flops_table.h"

#ifdef XV_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#endif

namespace xv::trainer {

namespace {

nlohmann::json EnvOrNull(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return nullptr;
  return std::string(v);
}

}  // namespace

nlohmann::json DeviceFingerprint(const ComputeDevice& d) {
  HostInfo host = ReadHostInfo();
  nlohmann::json j;
  j["name"] = d.name;
  j["vendor"] = d.vendor;
  j["backend"] = BackendName(d.backend);
  j["device"] = d.device.str();
  j["memory_bytes"] = d.memory_bytes;
  j["driver_version"] = nullptr;
  j["runtime_version"] = nullptr;
  j["compute_capability"] = nullptr;
#ifdef XV_TORCH_CUDA
  if (!d.is_cpu()) {
    int driver = 0, runtime = 0;
    if (cudaDriverGetVersion(&driver) == cudaSuccess) j["driver_version"] = std::to_string(driver);
    if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
      j["runtime_version"] = std::to_string(runtime);
    }
    const auto* props = at::cuda::getDeviceProperties(d.device.index());
    j["compute_capability"] = std::to_string(props->major) + "." + std::to_string(props->minor);
    j["multiprocessors"] = props->multiProcessorCount;
  }
#endif
  j["libtorch_version"] = TORCH_VERSION;
  j["libtorch_build"] = BackendName(CompiledGpuBackend());
  j["os"] = host.os;
  j["os_release"] = host.os_release;
  j["cpu_model"] = host.cpu_model;
  j["cpu_count"] = host.cpu_count;
  j["host_memory_bytes"] = host.memory_bytes;
  nlohmann::json env;
  for (const char* k : {"CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                        "PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF",
                        "PYTORCH_TUNABLEOP_ENABLED", "OMP_NUM_THREADS", "XV_PEAK_FLOPS"}) {
    env[k] = EnvOrNull(k);
  }
  j["env"] = env;
  j["tf32_matmul"] = at::globalContext().allowTF32CuBLAS();
  j["tf32_cudnn"] = at::globalContext().allowTF32CuDNN();
  j["intraop_threads"] = at::get_num_threads();
  PeakFlops peak;
  Status s = LookupPeakFlops(d.name, d.is_cpu(), &peak);
  j["peak_flops"] = peak.flops ? nlohmann::json(*peak.flops) : nlohmann::json(nullptr);
  j["peak_flops_source"] = s.ok() ? peak.source : s.message();
  return j;
}

}  // namespace xv::trainer
