// PeakFlopsTable: the dense bf16 tensor-core peak of known accelerators, keyed by a substring of
// the name LibTorch reports ("NVIDIA H100 80GB HBM3", "AMD Instinct MI300X"). Each entry carries
// the source of its figure. An unknown device (and the CPU) has no peak: MFU is then reported as
// unknown (null), never guessed. The environment variable XV_PEAK_FLOPS (FLOP/s, e.g. "989.5e12")
// overrides the table, with source "env". Thread-safety: the table is immutable; lookups read the
// environment.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace xv::trainer {

struct PeakFlopsEntry {
  std::string name_pattern;  // case-insensitive substring of the device name
  double flops;              // dense bf16 FLOP/s
  std::string source;        // where the figure comes from
};

struct PeakFlops {
  std::optional<double> flops;  // nullopt: unknown
  std::string source;           // the entry's source, "env", or "unknown"
  std::string matched;          // the matching pattern ("" when none)
};

// All entries, most specific pattern first (first match wins).
const std::vector<PeakFlopsEntry>& PeakFlopsEntries();

// Looks `device_name` up. `is_cpu` devices are always unknown unless XV_PEAK_FLOPS is set.
// Fails with InvalidArgument when XV_PEAK_FLOPS is set but not a positive number.
Status LookupPeakFlops(const std::string& device_name, bool is_cpu, PeakFlops* out);

// MFU in percent for `flops_per_token` x `tokens_per_second` against `peak`; nullopt when unknown.
std::optional<double> MfuPercent(double flops_per_token, double tokens_per_second,
                                 const PeakFlops& peak);

}  // namespace xv::trainer
