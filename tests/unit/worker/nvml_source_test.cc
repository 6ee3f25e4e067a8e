// The NVML loader: when libnvidia-ml cannot be loaded (this CI machine has no NVIDIA driver) or
// the library is not NVML, opening fails with a message naming the library, and a worker's source
// falls back to "none" without crashing. Where a real NVML is present (a GPU machine), one sample
// of device 0 must carry a power and a temperature.
#include "worker/device_health/nvml_source.h"

#include <gtest/gtest.h>

namespace xv::worker::device_health {
namespace {

TEST(NvmlSource, MissingLibraryIsUnavailable) {
  std::unique_ptr<HealthSource> src;
  Status st = OpenNvmlSource("libxv-no-such-nvml.so.1", 0, "", &src);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("cannot load libxv-no-such-nvml.so.1"), std::string::npos)
      << st.message();
  EXPECT_EQ(src, nullptr);
}

TEST(NvmlSource, ALibraryWithoutNvmlSymbolsIsRefused) {
  std::unique_ptr<HealthSource> src;
  Status st = OpenNvmlSource("libc.so.6", 0, "", &src);
  EXPECT_EQ(st.code(), Status::Code::kUnavailable);
  EXPECT_NE(st.message().find("not an NVML library"), std::string::npos) << st.message();
}

TEST(NvmlSource, NvidiaWorkerWithoutNvmlFallsBackToNone) {
  HealthSourceOptions o;
  o.vendor = "nvidia";
  o.device_index = 0;
  o.nvml_library = "libxv-no-such-nvml.so.1";
  std::string why;
  auto src = OpenHealthSource(o, &why);
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->kind(), "none");
  EXPECT_NE(why.find("cannot load"), std::string::npos) << why;
  HealthSample s;
  EXPECT_FALSE(src->Read(&s).ok());
  EXPECT_FALSE(s.power_w.has_value());
}

TEST(NvmlSource, RealNvmlWhenPresent) {
  std::unique_ptr<HealthSource> src;
  Status st = OpenNvmlSource("libnvidia-ml.so.1", 0, "", &src);
  if (!st.ok()) GTEST_SKIP() << "no NVML here: " << st.message();
  HealthSample s;
  ASSERT_TRUE(src->Read(&s).ok());
  ASSERT_TRUE(s.power_w.has_value());
  ASSERT_TRUE(s.temp_c.has_value());
  EXPECT_GT(*s.power_w, 1.0);
  EXPECT_LT(*s.power_w, 2000.0);
  EXPECT_GT(*s.temp_c, 5.0);
  EXPECT_LT(*s.temp_c, 120.0);
  EXPECT_TRUE(s.throttle_known);
  std::printf("NVML %s: %.1f W, %.0f C, SM %.0f MHz, %.0f MiB used, energy counter %s J\n",
              src->description().c_str(), *s.power_w, *s.temp_c, s.sm_clock_mhz.value_or(-1),
              s.mem_used_mib.value_or(-1),
              s.energy_counter_j ? std::to_string(*s.energy_counter_j).c_str() : "n/a");
}

}  // namespace
}  // namespace xv::worker::device_health
