#include "trainer/device/peak_flops_table.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

namespace xv::trainer {

const std::vector<PeakFlopsEntry>& PeakFlopsEntries() {
  // Dense (no structured sparsity) bf16 with fp32 accumulate. Order: most specific first.
  static const std::vector<PeakFlopsEntry> kEntries = {
      {"H100 PCIe", 756.0e12, "NVIDIA H100 datasheet: PCIe BF16 1513 TFLOPS with sparsity / 2"},
      {"H100 NVL", 835.5e12, "NVIDIA H100 datasheet: NVL BF16 1671 TFLOPS with sparsity / 2"},
      {"H100", 989.5e12,
       "NVIDIA H100 datasheet: SXM BF16 1979 TFLOPS with sparsity / 2 (upstream train.py's "
       "H100_BF16_PEAK_FLOPS)"},
      {"H200", 989.5e12, "NVIDIA H200 datasheet: BF16 1979 TFLOPS with sparsity / 2"},
      {"H800", 989.5e12, "NVIDIA H800 SXM: same tensor cores as H100 SXM, 1979 TFLOPS sparse / 2"},
      {"A100", 312.0e12, "NVIDIA A100 datasheet: BF16 312 TFLOPS dense"},
      {"B200", 2250.0e12, "NVIDIA HGX B200 datasheet: BF16 4.5 PFLOPS with sparsity / 2"},
      {"B100", 1750.0e12, "NVIDIA HGX B100 datasheet: BF16 3.5 PFLOPS with sparsity / 2"},
      {"L40S", 362.05e12, "NVIDIA L40S datasheet: BF16 733 TFLOPS with sparsity / 2"},
      {"RTX 5090", 209.5e12,
       "NVIDIA RTX Blackwell whitepaper: RTX 5090 FP16/BF16 tensor, FP32 accumulate, dense"},
      {"RTX 4090", 165.2e12,
       "NVIDIA Ada whitepaper: RTX 4090 BF16 tensor, FP32 accumulate, dense 165.2 TFLOPS"},
      {"RTX 3090", 71.0e12,
       "NVIDIA Ampere GA102 whitepaper: RTX 3090 BF16 tensor, FP32 accumulate, dense 71 TFLOPS"},
      {"MI308X", 344.1e12,
       "derived: MI300X 1307.4 TFLOPS x 80/304 compute units (no AMD datasheet figure)"},
      {"MI300X", 1307.4e12, "AMD Instinct MI300X datasheet: BF16 1307.4 TFLOPS dense"},
      {"MI300A", 980.6e12, "AMD Instinct MI300A datasheet: BF16 980.6 TFLOPS dense"},
      {"MI325X", 1307.4e12, "AMD Instinct MI325X datasheet: BF16 1307.4 TFLOPS dense"},
      {"MI355X", 2516.6e12, "AMD Instinct MI355X datasheet: BF16 2.5 PFLOPS dense (2516.6 TFLOPS)"},
      {"MI350X", 2307.2e12, "AMD Instinct MI350X datasheet: BF16 2.3 PFLOPS dense (2307.2 TFLOPS)"},
      {"MI250X", 383.0e12, "AMD Instinct MI250X datasheet: BF16 383 TFLOPS"},
      {"RX 9070 XT", 194.6e12,
       "AMD Radeon RX 9070 XT spec: 1557 INT4 sparse TOPS / 8 = FP16/BF16 dense matrix"},
      {"8060S", 59.4e12,
       "derived, no AMD datasheet figure: 40 CU (AMD Ryzen AI Max+ 395 spec) x 512 FP16/BF16 "
       "FLOP/clk/CU (RDNA 3 dual-issue WMMA, AMD GPUOpen 'How to accelerate AI applications on "
       "RDNA 3 using WMMA') x 2.9 GHz max GPU clock = 59.39 TFLOPS, the figure the Strix Halo "
       "homelab guide computes (github.com/MichaelBui/strixhalo-homelab); never measured by xv"},
  };
  return kEntries;
}

namespace {

std::string Lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

}  // namespace

Status LookupPeakFlops(const std::string& device_name, bool is_cpu, PeakFlops* out) {
  *out = PeakFlops{std::nullopt, "unknown", ""};
  if (const char* env = std::getenv("XV_PEAK_FLOPS"); env != nullptr && *env != '\0') {
    char* end = nullptr;
    double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !std::isfinite(v) || v <= 0) {
      return Status::InvalidArgument(
          std::string("XV_PEAK_FLOPS: must be a positive number of FLOP/s, got '") + env + "'");
    }
    out->flops = v;
    out->source = "env";
    return Status::Ok();
  }
  if (is_cpu) return Status::Ok();
  std::string name = Lower(device_name);
  for (const auto& e : PeakFlopsEntries()) {
    if (name.find(Lower(e.name_pattern)) != std::string::npos) {
      out->flops = e.flops;
      out->source = e.source;
      out->matched = e.name_pattern;
      return Status::Ok();
    }
  }
  return Status::Ok();
}

std::optional<double> MfuPercent(double flops_per_token, double tokens_per_second,
                                 const PeakFlops& peak) {
  if (!peak.flops || *peak.flops <= 0) return std::nullopt;
  return 100.0 * flops_per_token * tokens_per_second / *peak.flops;
}

}  // namespace xv::trainer
