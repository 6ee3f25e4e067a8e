#include "trainer/device/peak_memory.h"

#include "trainer/device/host_info.h"

#ifdef XV_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace xv::trainer {

void ResetPeakMemory(const ComputeDevice& device) {
#ifdef XV_TORCH_CUDA
  if (!device.is_cpu()) c10::cuda::CUDACachingAllocator::resetPeakStats(device.device.index());
#else
  (void)device;
#endif
}

PeakMemory ReadPeakMemory(const ComputeDevice& device) {
  PeakMemory m;
  constexpr double kMiB = 1024.0 * 1024.0;
#ifdef XV_TORCH_CUDA
  if (!device.is_cpu()) {
    auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.device.index());
    m.allocated_mb = static_cast<double>(stats.allocated_bytes[0].peak) / kMiB;  // 0: aggregate
    m.reserved_mb = static_cast<double>(stats.reserved_bytes[0].peak) / kMiB;
    m.kind = "device_allocator";
    return m;
  }
#else
  (void)device;
#endif
  m.allocated_mb = m.reserved_mb = static_cast<double>(PeakResidentBytes()) / kMiB;
  m.kind = "host_rss";
  return m;
}

}  // namespace xv::trainer
