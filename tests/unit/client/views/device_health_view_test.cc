// How xvctl shows device health and the measured ceiling: tokens per joule, MFU against the probed
// matmul ceiling (both formulas), null (not 0) for what was not measured, the energy cell with the
// throttled mark, the results table's extra columns only when some row has them, and the workers
// table.
#include "client/views/device_health_view.h"

#include <gtest/gtest.h>

#include "client/views/experiment_view.h"

namespace xv::client {
namespace {

v1::Result GpuResult() {
  v1::Result r;
  r.set_val_bpb(1.0);
  r.set_total_tokens(500'000'000);
  r.set_tok_per_sec(1'000'000);
  r.set_flops_per_token(300'000'000);  // 3e14 FLOP/s achieved
  r.set_mfu_percent(30.0);             // against a 1e15 datasheet peak
  r.set_peak_flops(1e15);
  r.set_measured_peak_flops(7.5e14);
  v1::DeviceHealth* h = r.mutable_health();
  h->set_source("nvml");
  h->set_sample_count(600);
  h->set_avg_power_w(650.0);
  h->set_energy_j(195'000.0);
  h->set_peak_temp_c(71.0);
  h->set_throttle_known(true);
  h->set_throttle_reasons("power_cap");
  return r;
}

TEST(DeviceHealthView, TokensPerJouleAndMeasuredMfu) {
  v1::Result r = GpuResult();
  EXPECT_NEAR(TokensPerJoule(r).value_or(-1), 500e6 / 195e3, 1e-9);
  EXPECT_NEAR(MeasuredMfuPercent(r).value_or(-1), 30.0 * 1e15 / 7.5e14, 1e-9);  // 40 %
  // Unknown datasheet peak (CPU): from flops_per_token * tok/s, the same figure.
  r.set_mfu_percent(-1);
  r.set_peak_flops(0);
  EXPECT_NEAR(MeasuredMfuPercent(r).value_or(-1), 100.0 * 3e14 / 7.5e14, 1e-9);
  r.set_measured_peak_flops(0);
  EXPECT_FALSE(MeasuredMfuPercent(r));
  r.mutable_health()->clear_energy_j();
  EXPECT_FALSE(TokensPerJoule(r));
}

TEST(DeviceHealthView, JsonNullsWhatWasNotMeasured) {
  nlohmann::json none_result;
  AddHealthJson(nullptr, &none_result);
  EXPECT_TRUE(none_result["energy_j"].is_null());
  EXPECT_TRUE(none_result["health_source"].is_null());

  v1::Result cpu;
  cpu.set_total_tokens(1000);
  cpu.mutable_health()->set_source("none");
  nlohmann::json j;
  AddHealthJson(&cpu, &j);
  EXPECT_EQ(j["health_source"], "none");
  EXPECT_EQ(j["health_samples"], 0);
  for (const char* k : {"energy_j", "avg_power_w", "tokens_per_joule", "peak_temp_c", "throttled",
                        "throttle_events", "start_temp_c", "mfu_measured_percent"}) {
    EXPECT_TRUE(j[k].is_null()) << k;
  }

  v1::Result gpu = GpuResult();
  nlohmann::json g;
  AddHealthJson(&gpu, &g);
  EXPECT_EQ(g["health_source"], "nvml");
  EXPECT_DOUBLE_EQ(g["energy_j"].get<double>(), 195000.0);
  EXPECT_DOUBLE_EQ(g["avg_power_w"].get<double>(), 650.0);
  EXPECT_EQ(g["throttled"], false);
  EXPECT_EQ(g["throttle_events"], 0);
  EXPECT_NEAR(g["mfu_measured_percent"].get<double>(), 40.0, 1e-9);
}

TEST(DeviceHealthView, CellsAndTableColumns) {
  v1::Result r = GpuResult();
  EXPECT_EQ(EnergyCell(r), "195.0 kJ");
  EXPECT_EQ(TokensPerJouleCell(r), "2,564");
  r.mutable_health()->set_throttled(true);
  EXPECT_EQ(EnergyCell(r), "195.0 kJ throttled");
  r.mutable_health()->set_energy_j(812.4);
  EXPECT_EQ(EnergyCell(r), "812 J throttled");
  v1::Result none;
  EXPECT_EQ(EnergyCell(none), "-");
  EXPECT_EQ(TokensPerJouleCell(none), "-");

  v1::Experiment gpu;
  gpu.set_id(1);
  gpu.set_name("head");
  gpu.set_state("succeeded");
  *gpu.mutable_result() = GpuResult();
  v1::Experiment cpu;
  cpu.set_id(2);
  cpu.set_name("cpu");
  cpu.set_state("succeeded");
  cpu.mutable_result()->mutable_health()->set_source("none");
  const std::string with = RenderResultsTable({gpu, cpu});
  for (const char* h : {"MFU meas", "energy", "tok/J", "195.0 kJ", "2,564", "40.00%"}) {
    EXPECT_NE(with.find(h), std::string::npos) << h << "\n" << with;
  }
  const std::string without = RenderResultsTable({cpu});
  EXPECT_EQ(without.find("energy"), std::string::npos) << without;
  EXPECT_EQ(without.find("tok/J"), std::string::npos) << without;
}

TEST(DeviceHealthView, WorkersTable) {
  v1::WorkerInfo w;
  w.set_name("box-gpu0");
  w.set_state("idle");
  w.mutable_device()->set_name("NVIDIA H200");
  w.mutable_device()->set_backend("cuda");
  w.mutable_device()->set_peak_flops(989e12);
  w.set_probe_matmul_tflops(656.4);
  w.set_probe_bandwidth_gbs(4300.0);
  v1::WorkerInfo cpu;
  cpu.set_name("box-cpu");
  cpu.set_state("offline");
  const std::string t = RenderWorkersTable({w, cpu});
  for (const char* h : {"matmul TFLOP/s", "bandwidth GB/s", "656.40", "4300.0", "989"}) {
    EXPECT_NE(t.find(h), std::string::npos) << h << "\n" << t;
  }
  nlohmann::json j = WorkerProbeJson(cpu);
  EXPECT_TRUE(j["matmul_tflops"].is_null());
  EXPECT_TRUE(j["bandwidth_gb_per_s"].is_null());
  EXPECT_DOUBLE_EQ(WorkerProbeJson(w)["matmul_tflops"].get<double>(), 656.4);
}

}  // namespace
}  // namespace xv::client
