// Device health and the start-up probe end to end, with real processes (xvd on a unix socket,
// xv-worker, xvctl) and the scripted fake trainer:
//  - CpuWorker: a CPU worker has no health source: its results say source "none" and every
//    measurement is null (not 0); its probe (fake: 1.5 TFLOP/s, 12.5 GB/s) is stored at
//    registration and shown by `xvctl status --json` and `xvctl workers`; MFU against the measured
//    ceiling is computed; a restarted worker reads its probe cache instead of probing again; the
//    figures survive in the database (`xvctl results` with the daemon gone).
//  - HwmonFixture: a worker forced to the hwmon source over a fixture sysfs tree (150 W, 91 C)
//    with the thermal guard at 85 C: the attempt waits for the guard, and energy, average power,
//    peak temperature and tokens per joule travel worker -> daemon -> `xvctl results --json`.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class DeviceHealthE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_TRUE(sb_.StartDaemon(&xvd_));
  }
  void TearDown() override {
    worker_.Stop();
    xvd_.Stop();
  }

  void StartWorker(const std::vector<std::string>& extra, const Env& env) {
    std::vector<std::string> argv = {"--kill-grace", "1"};
    argv.insert(argv.end(), extra.begin(), extra.end());
    worker_ = sb_.StartFakeWorker("health-cpu", env, argv, "worker.log");
  }

  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    return sb_.Xvctl(std::move(args), timeout_s);
  }

  json XvctlJson(const std::vector<std::string>& args) {
    CommandResult r = Xvctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    EXPECT_TRUE(j.is_object()) << r.out;
    return j;
  }

  // Waits until the daemon lists a worker (it registers after its probe).
  json WaitForWorker(double timeout_s = 60) {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() <
           timeout_s) {
      json s = XvctlJson({"status", "--json"});
      if (s.is_object() && !s["workers"].empty() && s["workers"][0]["state"] != "offline") {
        return s;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
    ADD_FAILURE() << "no worker registered" << Logs();
    return json();
  }

  json RunOne(const std::string& candidate) {
    CommandResult sub = Xvctl({"submit", SourcePath("recipes/cpu-tiny.yaml"), "--candidate",
                               candidate, "--campaign", "health", "--json"});
    EXPECT_EQ(sub.exit_code, 0) << sub.out << sub.err << Logs();
    json ids = json::parse(sub.out, nullptr, false);
    if (!ids.is_object()) return json();
    int64_t id = ids["experiment_ids"][0].get<int64_t>();
    CommandResult w = Xvctl({"wait", "--timeout", "60"}, 90);
    EXPECT_EQ(w.exit_code, 0) << w.out << w.err << Logs();
    json res = XvctlJson({"results", "--json"});
    for (const auto& e : res["experiments"]) {
      if (e["id"] == id) return e;
    }
    ADD_FAILURE() << "experiment " << id << " is not in the results" << Logs();
    return json();
  }

  std::string Logs() {
    return "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log")) + "\n--- worker.log ---\n" +
           FileTail(sb_.Path("worker.log"));
  }

  Sandbox sb_{"health"};
  ChildGuard xvd_, worker_;
};

int CountLines(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) ++n;
  return n;
}

TEST_F(DeviceHealthE2eTest, CpuWorker) {
  const std::string probe_log = sb_.Path("probe.log");
  StartWorker({}, {{"XV_FAKE_PROBE_LOG", probe_log}});
  json status = WaitForWorker();
  ASSERT_TRUE(status.is_object());
  const json& w = status["workers"][0];
  EXPECT_DOUBLE_EQ(w["probe"]["matmul_tflops"].get<double>(), 1.5) << w.dump();
  EXPECT_DOUBLE_EQ(w["probe"]["bandwidth_gb_per_s"].get<double>(), 12.5) << w.dump();
  EXPECT_TRUE(w["probe"]["datasheet_peak_tflops"].is_null()) << w.dump();
  EXPECT_EQ(CountLines(probe_log), 1);

  json e = RunOne("matrix_lr=0.02");
  ASSERT_TRUE(e.is_object());
  EXPECT_EQ(e["state"], "succeeded") << e.dump() << Logs();
  // Nothing measured on the CPU: the source says so and every figure is null, not 0.
  EXPECT_EQ(e["health_source"], "none") << e.dump();
  EXPECT_EQ(e["health_samples"], 0) << e.dump();
  for (const char* k : {"energy_j", "avg_power_w", "tokens_per_joule", "peak_temp_c", "throttled",
                        "throttle_events", "throttled_seconds", "start_temp_c"}) {
    EXPECT_TRUE(e[k].is_null()) << k << " in " << e.dump();
  }
  // MFU against the measured ceiling: 100 * flops_per_token (1000) * tok/s (12345) / 1.5e12.
  EXPECT_DOUBLE_EQ(e["measured_peak_flops"].get<double>(), 1.5e12) << e.dump();
  EXPECT_NEAR(e["mfu_measured_percent"].get<double>(), 100.0 * 1000 * 12345 / 1.5e12, 1e-12);

  // The tables: workers with their probe, results with MFU against the measured ceiling.
  CommandResult workers = Xvctl({"workers"});
  EXPECT_EQ(workers.exit_code, 0) << workers.err;
  EXPECT_NE(workers.out.find("matmul TFLOP/s"), std::string::npos) << workers.out;
  EXPECT_NE(workers.out.find("1.50"), std::string::npos) << workers.out;
  EXPECT_NE(workers.out.find("12.5"), std::string::npos) << workers.out;
  json wj = XvctlJson({"workers", "--json"});
  ASSERT_EQ(wj["workers"].size(), 1u);
  EXPECT_TRUE(wj["workers"][0]["probe_json"]["matmul"].is_array()) << wj.dump();
  CommandResult table = Xvctl({"results", "--wide"});
  EXPECT_NE(table.out.find("MFU meas"), std::string::npos) << table.out;

  // A restarted worker registers with its cached probe: no second probe run.
  worker_.Stop();
  StartWorker({}, {{"XV_FAKE_PROBE_LOG", probe_log}});
  WaitForWorker();
  EXPECT_EQ(CountLines(probe_log), 1) << Logs();
  EXPECT_NE(FileTail(sb_.Path("worker.log")).find("cached in"), std::string::npos) << Logs();

  // --no-probe: the worker registers without one; the daemon keeps the stored probe.
  worker_.Stop();
  StartWorker({"--no-probe"}, {{"XV_FAKE_PROBE_LOG", probe_log}});
  json again = WaitForWorker();
  EXPECT_DOUBLE_EQ(again["workers"][0]["probe"]["matmul_tflops"].get<double>(), 1.5);
  EXPECT_EQ(CountLines(probe_log), 1);

  // The database holds it: read with the daemon gone.
  worker_.Stop();
  xvd_.Stop();
  json offline = XvctlJson({"results", "--json"});
  ASSERT_EQ(offline["experiments"].size(), 1u);
  EXPECT_EQ(offline["experiments"][0]["health_source"], "none");
  EXPECT_TRUE(offline["experiments"][0]["energy_j"].is_null());
}

TEST_F(DeviceHealthE2eTest, HwmonFixture) {
  // The fixture tree: one AMD card at 150 W and 91 C (above the 85 C guard).
  const fs::path dev = sb_.dir() / "sysfs" / "class" / "drm" / "card0" / "device";
  const fs::path hw = dev / "hwmon" / "hwmon0";
  fs::create_directories(hw);
  std::ofstream(dev / "vendor") << "0x1002\n";
  std::ofstream(hw / "power1_average") << "150000000\n";
  std::ofstream(hw / "temp1_input") << "91000\n";
  StartWorker({"--no-probe", "--health-source", "hwmon", "--sysfs-root", sb_.Path("sysfs"),
               "--health-interval", "0.05", "--max-start-temp", "85", "--max-start-wait", "1"},
              {{"XV_FAKE_STEPS", "8"}, {"XV_FAKE_STEP_SECONDS", "0.05"}});
  WaitForWorker();
  json e = RunOne("matrix_lr=0.03");
  ASSERT_TRUE(e.is_object());
  EXPECT_EQ(e["state"], "succeeded") << e.dump() << Logs();
  EXPECT_EQ(e["health_source"], "hwmon") << e.dump();
  EXPECT_GE(e["health_samples"].get<int>(), 3) << e.dump();
  ASSERT_TRUE(e["energy_j"].is_number()) << e.dump();
  ASSERT_TRUE(e["avg_power_w"].is_number()) << e.dump();
  EXPECT_NEAR(e["avg_power_w"].get<double>(), 150.0, 1e-6) << e.dump();
  EXPECT_GT(e["energy_j"].get<double>(), 0.0);
  EXPECT_EQ(e["energy_method"], "integrated");
  EXPECT_DOUBLE_EQ(e["peak_temp_c"].get<double>(), 91.0);
  // tokens per joule = total tokens (fake: 100000) / energy.
  EXPECT_NEAR(e["tokens_per_joule"].get<double>(), 100000.0 / e["energy_j"].get<double>(), 1e-6);
  // The guard waited its limit, then started anyway; hwmon knows no throttle reasons.
  EXPECT_GE(e["thermal_wait_s"].get<double>(), 1.0) << e.dump();
  EXPECT_LT(e["thermal_wait_s"].get<double>(), 4.0) << "--max-start-wait 1 bounds it: " << e.dump();
  EXPECT_DOUBLE_EQ(e["start_temp_c"].get<double>(), 91.0);
  EXPECT_TRUE(e["throttled"].is_null()) << e.dump();
  EXPECT_TRUE(e["measured_peak_flops"].is_null()) << "no probe: " << e.dump();
  EXPECT_NE(FileTail(sb_.Path("worker.log")).find("starting anyway"), std::string::npos) << Logs();
  CommandResult table = Xvctl({"results", "--wide"});
  EXPECT_NE(table.out.find("energy"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("tok/J"), std::string::npos) << table.out;
  std::printf("hwmon fixture run: %.1f J over %d samples, %.1f W, %.0f tok/J, guard wait %.1f s\n",
              e["energy_j"].get<double>(), e["health_samples"].get<int>(),
              e["avg_power_w"].get<double>(), e["tokens_per_joule"].get<double>(),
              e["thermal_wait_s"].get<double>());
}

}  // namespace
}  // namespace xv::e2e
