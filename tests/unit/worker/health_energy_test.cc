// Energy and the run summary: the trapezoid rule over timestamped power samples, counter-based
// energy with wrap and reset handling, throttle seconds/events and the `throttled` flag, and the
// sampler thread and thermal guard over a fixture sysfs tree (hwmon_fixture_health.h).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include "tests/unit/worker/hwmon_fixture_health.h"
#include "worker/device_health/device_health_monitor.h"
#include "worker/device_health/energy_meter.h"
#include "worker/device_health/health_accumulator.h"
#include "worker/device_health/health_report.h"
#include "worker/device_health/hwmon_source.h"

namespace xv::worker::device_health {
namespace {

TEST(EnergyMeter, TrapezoidOverUnevenSamples) {
  EnergyMeter m;
  m.Add(10.0, 100.0, std::nullopt);
  m.Add(11.0, 200.0, std::nullopt);
  m.Add(13.0, 200.0, std::nullopt);
  // 0.5 * (100 + 200) * 1 + 0.5 * (200 + 200) * 2 = 150 + 400
  ASSERT_TRUE(m.energy_j());
  EXPECT_DOUBLE_EQ(*m.energy_j(), 550.0);
  EXPECT_EQ(m.method(), "integrated");
  EXPECT_DOUBLE_EQ(m.covered_seconds(), 3.0);
  EXPECT_DOUBLE_EQ(m.average_power_w().value_or(-1), 550.0 / 3.0);
}

TEST(EnergyMeter, SampleWithoutPowerIsBridged) {
  EnergyMeter m;
  m.Add(0.0, 100.0, std::nullopt);
  m.Add(1.0, std::nullopt, std::nullopt);  // power unreadable this time
  m.Add(2.0, 300.0, std::nullopt);
  EXPECT_DOUBLE_EQ(m.energy_j().value_or(-1), 400.0);  // 0.5 * (100 + 300) * 2
}

TEST(EnergyMeter, NothingOrOneSampleIsNotAnEnergy) {
  EnergyMeter none;
  EXPECT_FALSE(none.energy_j());
  EXPECT_EQ(none.method(), "");
  EXPECT_FALSE(none.average_power_w());
  EnergyMeter one;
  one.Add(5.0, 42.0, std::nullopt);
  EXPECT_FALSE(one.energy_j()) << "one reading spans no time";
  EXPECT_DOUBLE_EQ(one.average_power_w().value_or(-1), 42.0);
}

TEST(EnergyMeter, CounterWinsOverPower) {
  EnergyMeter m;
  m.Add(0.0, 999.0, 1000.0);
  m.Add(1.0, 999.0, 1250.0);
  m.Add(2.0, 999.0, 1500.0);
  EXPECT_DOUBLE_EQ(m.energy_j().value_or(-1), 500.0);
  EXPECT_EQ(m.method(), "counter");
  EXPECT_DOUBLE_EQ(m.average_power_w().value_or(-1), 250.0);
}

TEST(EnergyMeter, CounterWrapAtItsRange) {
  EnergyMeter m(/*counter_range_j=*/1000.0);
  m.Add(0.0, std::nullopt, 900.0);
  m.Add(1.0, std::nullopt, 100.0);  // wrapped: 100 + 1000 - 900 = 200
  m.Add(2.0, std::nullopt, 250.0);  // +150
  EXPECT_DOUBLE_EQ(m.energy_j().value_or(-1), 350.0);
  EXPECT_EQ(m.counter_wraps(), 1);
  EXPECT_EQ(m.counter_resets(), 0);
}

TEST(EnergyMeter, CounterResetUsesPowerForThatInterval) {
  EnergyMeter m;  // range unknown: a decrease is a reset
  m.Add(0.0, 100.0, 5000.0);
  m.Add(2.0, 100.0, 10.0);   // reset: 0.5 * (100 + 100) * 2 = 200 from power
  m.Add(3.0, 100.0, 110.0);  // +100 from the counter
  EXPECT_DOUBLE_EQ(m.energy_j().value_or(-1), 300.0);
  EXPECT_EQ(m.counter_resets(), 1);
  EXPECT_EQ(m.method(), "counter");
  // Without power readings the reset interval counts as 0 (not a negative or a huge number).
  EnergyMeter bare;
  bare.Add(0.0, std::nullopt, 5000.0);
  bare.Add(1.0, std::nullopt, 10.0);
  bare.Add(2.0, std::nullopt, 60.0);
  EXPECT_DOUBLE_EQ(bare.energy_j().value_or(-1), 50.0);
  // A decrease too big to be a wrap is a reset even when the range is known.
  EnergyMeter ranged(1000.0);
  ranged.Add(0.0, std::nullopt, 400.0);
  ranged.Add(1.0, std::nullopt, 50.0);  // 50 + 1000 - 400 = 650 >= range / 2: reset
  EXPECT_EQ(ranged.counter_resets(), 1);
  EXPECT_DOUBLE_EQ(ranged.energy_j().value_or(-1), 0.0);
}

HealthSample At(double t, std::optional<double> power, std::optional<double> temp,
                uint32_t throttle, bool known = true) {
  HealthSample s;
  s.t_s = t;
  s.power_w = power;
  s.temp_c = temp;
  s.throttle = throttle;
  s.throttle_known = known;
  return s;
}

TEST(HealthAccumulator, ThrottleSecondsEventsAndFlag) {
  HealthAccumulator acc("nvml");
  acc.Add(At(0, 300, 60, kThrottlePowerCap));  // power cap: counted, not flagged
  acc.Add(At(1, 300, 83, kThrottleThermal));   // throttling starts (event 1)
  acc.Add(At(2, 300, 88, kThrottleThermal));
  acc.Add(At(3, 300, 80, 0));
  acc.Add(At(4, 300, 79, kThrottleHwSlowdown));  // event 2
  acc.Add(At(5, 300, 70, 0));
  acc.AddError();
  HealthSummary h = acc.Summary();
  EXPECT_EQ(h.source, "nvml");
  EXPECT_EQ(h.samples, 6);
  EXPECT_EQ(h.read_errors, 1);
  EXPECT_DOUBLE_EQ(h.sampled_seconds, 5.0);
  EXPECT_EQ(h.throttle_events, 2);
  EXPECT_DOUBLE_EQ(h.throttled_seconds, 3.0);  // [1,2] [2,3] [4,5]
  EXPECT_DOUBLE_EQ(h.power_capped_seconds, 1.0);
  EXPECT_TRUE(h.throttled);
  EXPECT_TRUE(h.throttle_known);
  EXPECT_EQ(ThrottleBitsText(h.throttle_bits_seen), "power_cap,thermal,hw_slowdown");
  EXPECT_DOUBLE_EQ(h.peak_temp_c.value_or(-1), 88.0);
  EXPECT_DOUBLE_EQ(h.energy_j.value_or(-1), 1500.0);
  EXPECT_DOUBLE_EQ(h.avg_power_w.value_or(-1), 300.0);
  EXPECT_EQ(h.energy_method, "integrated");
}

TEST(HealthAccumulator, PowerCapAloneDoesNotFlag) {
  HealthAccumulator acc("nvml");
  for (int i = 0; i < 4; ++i) acc.Add(At(i, 700, 70, kThrottlePowerCap));
  HealthSummary h = acc.Summary();
  EXPECT_FALSE(h.throttled);
  EXPECT_EQ(h.throttle_events, 0);
  EXPECT_DOUBLE_EQ(h.power_capped_seconds, 3.0);
}

TEST(HealthAccumulator, SourceWithoutThrottleReasonsReportsNoneOfThem) {
  HealthAccumulator acc("hwmon");
  acc.Add(At(0, 100, 50, 0, /*known=*/false));
  acc.Add(At(1, 100, 50, 0, /*known=*/false));
  HealthSummary h = acc.Summary();
  EXPECT_FALSE(h.throttle_known);
  EXPECT_FALSE(h.throttled);
  v1::DeviceHealth p;
  HealthSummaryToProto(h, &p);
  EXPECT_EQ(p.source(), "hwmon");
  EXPECT_FALSE(p.throttle_known());
  EXPECT_TRUE(p.has_energy_j());
  EXPECT_FALSE(p.has_mean_sm_clock_mhz()) << "no clock was read: unset, not 0";
  EXPECT_FALSE(p.has_peak_mem_used_mib());
}

TEST(HealthReport, NothingMeasuredStaysUnset) {
  HealthAccumulator acc("none");
  v1::DeviceHealth p;
  HealthSummaryToProto(acc.Summary(), &p);
  EXPECT_EQ(p.source(), "none");
  EXPECT_EQ(p.sample_count(), 0);
  EXPECT_FALSE(p.has_energy_j());
  EXPECT_FALSE(p.has_avg_power_w());
  EXPECT_FALSE(p.has_peak_temp_c());
  EXPECT_FALSE(p.has_start_temp_c());
  EXPECT_FALSE(p.throttled());
}

class MonitorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dev_ = fx_.AddCard(0);
    hw_ = SysfsFixture::Hwmon(dev_);
    SysfsFixture::Write(hw_ + "/power1_average", "100000000");  // 100 W, constant
    SysfsFixture::Write(hw_ + "/temp1_input", "50000");
  }
  std::unique_ptr<DeviceHealthMonitor> Monitor(MonitorOptions o) {
    std::unique_ptr<HealthSource> src;
    EXPECT_TRUE(OpenHwmonSource(fx_.root(), 0, &src).ok());
    return std::make_unique<DeviceHealthMonitor>(std::move(src), o);
  }
  SysfsFixture fx_;
  std::string dev_, hw_;
};

TEST_F(MonitorTest, SamplingSummarisesTheRun) {
  MonitorOptions o;
  o.interval_s = 0.02;
  auto mon = Monitor(o);
  auto sampling = mon->StartSampling();
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  SysfsFixture::Write(hw_ + "/temp1_input", "71000");
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  HealthSummary h = sampling->Stop();
  EXPECT_EQ(h.source, "hwmon");
  EXPECT_GE(h.samples, 5);
  EXPECT_EQ(h.read_errors, 0);
  EXPECT_GE(h.sampled_seconds, 0.25);
  EXPECT_DOUBLE_EQ(h.peak_temp_c.value_or(-1), 71.0);
  ASSERT_TRUE(h.energy_j);
  EXPECT_NEAR(*h.energy_j, 100.0 * h.sampled_seconds, 1e-9);
  EXPECT_NEAR(h.avg_power_w.value_or(-1), 100.0, 1e-9);
  EXPECT_EQ(h.energy_method, "integrated");
}

TEST_F(MonitorTest, NoneSourceSamplesNothing) {
  DeviceHealthMonitor mon(NewNoHealthSource("a cpu device"), MonitorOptions{});
  auto sampling = mon.StartSampling();
  HealthSummary h = sampling->Stop();
  EXPECT_EQ(h.source, "none");
  EXPECT_EQ(h.samples, 0);
  EXPECT_FALSE(h.energy_j);
  auto g = mon.WaitUntilCool([] { return false; }, "test");
  EXPECT_FALSE(g.start_temp_c);
  EXPECT_DOUBLE_EQ(g.waited_s, 0.0);
}

TEST_F(MonitorTest, ThermalGuardWaitsUntilTheDeviceCools) {
  SysfsFixture::Write(hw_ + "/temp1_input", "91000");
  MonitorOptions o;
  o.max_start_temp_c = 85;
  o.max_start_wait_s = 10;
  o.poll_s = 0.05;
  auto mon = Monitor(o);
  std::thread cooler([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    SysfsFixture::Write(hw_ + "/temp1_input", "80000");
  });
  auto g = mon->WaitUntilCool([] { return false; }, "test");
  cooler.join();
  EXPECT_FALSE(g.gave_up);
  EXPECT_FALSE(g.cancelled);
  EXPECT_GE(g.waited_s, 0.25);
  EXPECT_LT(g.waited_s, 5.0);
  EXPECT_DOUBLE_EQ(g.start_temp_c.value_or(-1), 80.0);
}

TEST_F(MonitorTest, ThermalGuardGivesUpAndCanBeCancelled) {
  SysfsFixture::Write(hw_ + "/temp1_input", "95000");
  MonitorOptions o;
  o.max_start_temp_c = 85;
  o.max_start_wait_s = 0.3;
  o.poll_s = 0.05;
  auto mon = Monitor(o);
  auto g = mon->WaitUntilCool([] { return false; }, "test");
  EXPECT_TRUE(g.gave_up);
  EXPECT_GE(g.waited_s, 0.3);
  EXPECT_DOUBLE_EQ(g.start_temp_c.value_or(-1), 95.0);

  o.max_start_wait_s = 30;
  auto mon2 = Monitor(o);
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    cancel = true;
  });
  auto c = mon2->WaitUntilCool([&] { return cancel.load(); }, "test");
  canceller.join();
  EXPECT_TRUE(c.cancelled);
  EXPECT_LT(c.waited_s, 5.0);

  // Off (threshold 0): no wait, but the start temperature is still recorded.
  o.max_start_temp_c = 0;
  auto off = Monitor(o)->WaitUntilCool([] { return false; }, "test");
  EXPECT_FALSE(off.gave_up);
  EXPECT_LT(off.waited_s, 0.5);
  EXPECT_DOUBLE_EQ(off.start_temp_c.value_or(-1), 95.0);
}

}  // namespace
}  // namespace xv::worker::device_health
