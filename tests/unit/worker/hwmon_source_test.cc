// The amdgpu hwmon reader on a fixture sysfs tree: units (µW -> W, m°C -> C, Hz -> MHz, bytes ->
// MiB), which files win (power1_average over power1_input, temp2 junction over temp1 edge), missing
// files (figures stay unset, never 0), card selection (AMD cards only, in card order), and the
// errors that name the path.
#include "worker/device_health/hwmon_source.h"

#include <gtest/gtest.h>

#include "tests/unit/worker/hwmon_fixture_health.h"

namespace xv::worker::device_health {
namespace {

TEST(HwmonSource, ReadsEveryFigureInItsUnit) {
  SysfsFixture fx;
  const std::string dev = fx.AddCard(1);
  const std::string hw = SysfsFixture::Hwmon(dev);
  SysfsFixture::Write(hw + "/power1_average", "245000000");    // 245 W
  SysfsFixture::Write(hw + "/power1_input", "300000000");      // ignored: average wins
  SysfsFixture::Write(hw + "/temp1_input", "61000");           // edge 61 C
  SysfsFixture::Write(hw + "/temp2_input", "78500");           // junction 78.5 C wins
  SysfsFixture::Write(hw + "/freq1_input", "2100000000");      // 2100 MHz
  SysfsFixture::Write(hw + "/energy1_input", "123456789000");  // µJ
  SysfsFixture::Write(dev + "/gpu_busy_percent", "97");
  SysfsFixture::Write(dev + "/mem_info_vram_used", "1073741824");  // 1024 MiB

  std::unique_ptr<HealthSource> src;
  ASSERT_TRUE(OpenHwmonSource(fx.root(), 0, &src).ok());
  EXPECT_EQ(src->kind(), "hwmon");
  EXPECT_EQ(src->description(), hw);
  HealthSample s;
  ASSERT_TRUE(src->Read(&s).ok());
  ASSERT_TRUE(s.power_w && s.temp_c && s.sm_clock_mhz && s.mem_used_mib && s.busy_percent);
  EXPECT_DOUBLE_EQ(*s.power_w, 245.0);
  EXPECT_DOUBLE_EQ(*s.temp_c, 78.5);
  EXPECT_DOUBLE_EQ(*s.sm_clock_mhz, 2100.0);
  EXPECT_DOUBLE_EQ(*s.mem_used_mib, 1024.0);
  EXPECT_DOUBLE_EQ(*s.busy_percent, 97.0);
  ASSERT_TRUE(s.energy_counter_j);
  EXPECT_DOUBLE_EQ(*s.energy_counter_j, 123456.789);
  EXPECT_FALSE(s.throttle_known) << "amdgpu hwmon has no throttle reasons";
}

TEST(HwmonSource, MissingFilesLeaveFiguresUnsetAndFallBack) {
  SysfsFixture fx;
  const std::string dev = fx.AddCard(0);
  const std::string hw = SysfsFixture::Hwmon(dev);
  SysfsFixture::Write(hw + "/power1_input", "54000000");  // newer kernels: input only
  SysfsFixture::Write(hw + "/temp1_input", "45000");      // edge only
  std::unique_ptr<HealthSource> src;
  ASSERT_TRUE(OpenHwmonSource(fx.root(), 0, &src).ok());
  HealthSample s;
  ASSERT_TRUE(src->Read(&s).ok());
  EXPECT_DOUBLE_EQ(s.power_w.value_or(-1), 54.0);
  EXPECT_DOUBLE_EQ(s.temp_c.value_or(-1), 45.0);
  EXPECT_FALSE(s.sm_clock_mhz.has_value());
  EXPECT_FALSE(s.mem_used_mib.has_value());
  EXPECT_FALSE(s.busy_percent.has_value());
  EXPECT_FALSE(s.energy_counter_j.has_value());

  // A garbage file is as good as a missing one; with neither power nor temperature, Read fails.
  SysfsFixture::Write(hw + "/power1_input", "n/a");
  std::filesystem::remove(hw + "/temp1_input");
  HealthSample empty;
  Status st = src->Read(&empty);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(hw), std::string::npos) << st.message();
  EXPECT_FALSE(empty.power_w.has_value());
}

TEST(HwmonSource, DeviceIndexCountsAmdCardsInCardOrder) {
  SysfsFixture fx;
  fx.AddCard(0, "0x10de");  // an NVIDIA card: skipped
  const std::string a = fx.AddCard(3);
  const std::string b = fx.AddCard(12);
  // A connector directory (card3-DP-1) is not a card.
  std::filesystem::create_directories(fx.root() + "/class/drm/card3-DP-1");
  SysfsFixture::Write(SysfsFixture::Hwmon(a) + "/power1_input", "1000000");
  SysfsFixture::Write(SysfsFixture::Hwmon(b) + "/power1_input", "2000000");
  auto cards = ListAmdCardDevices(fx.root());
  ASSERT_EQ(cards.size(), 2u);
  EXPECT_EQ(cards[0], a);
  EXPECT_EQ(cards[1], b);
  std::unique_ptr<HealthSource> src;
  ASSERT_TRUE(OpenHwmonSource(fx.root(), 1, &src).ok());
  HealthSample s;
  ASSERT_TRUE(src->Read(&s).ok());
  EXPECT_DOUBLE_EQ(s.power_w.value_or(-1), 2.0);

  Status st = OpenHwmonSource(fx.root(), 2, &src);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_NE(st.message().find("no AMD card for device 2 (found 2)"), std::string::npos)
      << st.message();
}

TEST(HwmonSource, NoTreeOrNoHwmonIsNotFound) {
  SysfsFixture fx;
  std::unique_ptr<HealthSource> src;
  EXPECT_EQ(OpenHwmonSource(fx.root(), 0, &src).code(), Status::Code::kNotFound);
  const std::string dev = fx.AddCard(0);
  std::filesystem::remove_all(dev + "/hwmon");
  Status st = OpenHwmonSource(fx.root(), 0, &src);
  EXPECT_EQ(st.code(), Status::Code::kNotFound);
  EXPECT_NE(st.message().find("no hwmon directory"), std::string::npos) << st.message();
}

TEST(OpenHealthSource, PicksHwmonForAmdAndNoneForTheCpu) {
  SysfsFixture fx;
  const std::string dev = fx.AddCard(0);
  SysfsFixture::Write(SysfsFixture::Hwmon(dev) + "/temp1_input", "40000");
  HealthSourceOptions o;
  o.vendor = "amd";
  o.device_index = 0;
  o.sysfs_root = fx.root();
  std::string why;
  EXPECT_EQ(OpenHealthSource(o, &why)->kind(), "hwmon");
  o.vendor = "cpu";
  o.device_index = -1;
  auto none = OpenHealthSource(o, &why);
  EXPECT_EQ(none->kind(), "none");
  EXPECT_NE(why.find("cpu"), std::string::npos) << why;
  HealthSample s;
  EXPECT_FALSE(none->Read(&s).ok());
  // An AMD device whose card is missing: none, with the reason.
  o.vendor = "amd";
  o.device_index = 5;
  EXPECT_EQ(OpenHealthSource(o, &why)->kind(), "none");
  EXPECT_NE(why.find("device 5"), std::string::npos) << why;
  // Forced: --health-source hwmon on a CPU worker reads the tree.
  o.vendor = "cpu";
  o.device_index = -1;
  o.source = "hwmon";
  EXPECT_EQ(OpenHealthSource(o, &why)->kind(), "hwmon");
  o.source = "bogus";
  EXPECT_EQ(OpenHealthSource(o, &why)->kind(), "none");
  EXPECT_NE(why.find("--health-source"), std::string::npos) << why;
}

}  // namespace
}  // namespace xv::worker::device_health
