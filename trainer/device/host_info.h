// HostInfo: facts about the machine from /proc and uname (CPU model and vendor, memory, OS,
// kernel), and the process's peak resident set size. Torch-free. Thread-safety: reads files; call
// from any thread.
#pragma once

#include <cstdint>
#include <string>

namespace xv::trainer {

struct HostInfo {
  std::string cpu_model;     // /proc/cpuinfo "model name" ("unknown" when absent)
  std::string cpu_vendor;    // /proc/cpuinfo "vendor_id"
  int cpu_count = 0;         // online logical CPUs
  int64_t memory_bytes = 0;  // MemTotal
  std::string os;            // "Linux 6.1.0-18-amd64 x86_64"
  std::string os_release;    // /etc/os-release PRETTY_NAME
};

HostInfo ReadHostInfo();

// Peak resident set size of this process in bytes (getrusage ru_maxrss).
int64_t PeakResidentBytes();

}  // namespace xv::trainer
