#include "trainer/device/peak_flops_table.h"

#include <gtest/gtest.h>

#include <cstdlib>

namespace xv::trainer {
namespace {

class PeakFlopsTableTest : public ::testing::Test {
 protected:
  void SetUp() override { unsetenv("XV_PEAK_FLOPS"); }
  void TearDown() override { unsetenv("XV_PEAK_FLOPS"); }
};

TEST_F(PeakFlopsTableTest, KnownDevicesByTheNamesLibTorchReports) {
  struct Case {
    const char* name;
    double flops;
  } cases[] = {{"NVIDIA H100 80GB HBM3", 989.5e12},
               {"NVIDIA H100 PCIe", 756.0e12},
               {"NVIDIA H200", 989.5e12},
               {"NVIDIA A100-SXM4-80GB", 312.0e12},
               {"NVIDIA B200", 2250.0e12},
               {"NVIDIA GeForce RTX 4090", 165.2e12},
               {"NVIDIA GeForce RTX 3090", 71.0e12},
               {"AMD Instinct MI300X", 1307.4e12},
               {"AMD Instinct MI308X", 344.1e12},
               {"AMD Instinct MI355X", 2516.6e12},
               {"AMD Radeon RX 9070 XT", 194.6e12},
               {"AMD Radeon 8060S Graphics", 59.4e12}};
  for (const auto& c : cases) {
    PeakFlops p;
    ASSERT_TRUE(LookupPeakFlops(c.name, false, &p).ok());
    ASSERT_TRUE(p.flops.has_value()) << c.name;
    EXPECT_DOUBLE_EQ(*p.flops, c.flops) << c.name;
    EXPECT_FALSE(p.source.empty());
    EXPECT_NE(p.source, "unknown");
  }
}

TEST_F(PeakFlopsTableTest, UnknownDeviceAndCpuAreUnknownNotGuessed) {
  PeakFlops p;
  ASSERT_TRUE(LookupPeakFlops("NVIDIA Tesla K80", false, &p).ok());
  EXPECT_FALSE(p.flops.has_value());
  EXPECT_EQ(p.source, "unknown");
  EXPECT_FALSE(MfuPercent(1e9, 1e5, p).has_value());
  ASSERT_TRUE(LookupPeakFlops("AMD EPYC 9654 H100-like name", true, &p).ok());
  EXPECT_FALSE(p.flops.has_value());
}

TEST_F(PeakFlopsTableTest, EnvironmentOverridesAndIsValidated) {
  setenv("XV_PEAK_FLOPS", "1.5e14", 1);
  PeakFlops p;
  ASSERT_TRUE(LookupPeakFlops("NVIDIA H100 80GB HBM3", false, &p).ok());
  EXPECT_DOUBLE_EQ(*p.flops, 1.5e14);
  EXPECT_EQ(p.source, "env");
  ASSERT_TRUE(LookupPeakFlops("cpu", true, &p).ok());
  EXPECT_DOUBLE_EQ(*p.flops, 1.5e14);
  // 100 * 6e8 flops/token * 1e5 tok/s / 1.5e14 = 40 %
  EXPECT_NEAR(*MfuPercent(6e8, 1e5, p), 40.0, 1e-9);
  setenv("XV_PEAK_FLOPS", "fast", 1);
  Status s = LookupPeakFlops("NVIDIA H100", false, &p);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("XV_PEAK_FLOPS"), std::string::npos);
}

}  // namespace
}  // namespace xv::trainer
