// Peak memory of a run. On a GPU: the caching allocator's peak allocated and reserved bytes
// (upstream's torch.cuda.max_memory_allocated). On the CPU: the process's peak resident set size
// for both, with kind "host_rss" so nobody mistakes it for device memory. Thread-safety: call from
// the training thread.
#pragma once

#include <string>

#include "trainer/device/compute_device.h"

namespace xv::trainer {

struct PeakMemory {
  double allocated_mb = 0;  // MiB
  double reserved_mb = 0;   // MiB
  std::string kind;         // "device_allocator" | "host_rss"
};

// Resets the allocator's peak counters (no-op on the CPU: RSS peaks cannot be reset).
void ResetPeakMemory(const ComputeDevice& device);
PeakMemory ReadPeakMemory(const ComputeDevice& device);

}  // namespace xv::trainer
