// The start-up probe (issue 3) through real child processes: the fake trainer's `probe` runs once,
// its JSON is cached in the work dir keyed by the device fingerprint and the trainer binary, a
// restart reads the cache instead of probing again, another fingerprint probes again, and a
// failing or hanging probe yields "" (the worker registers without one) and caches nothing.
#include "worker/trainer_probe.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "common/probe_figures.h"

namespace xv::worker {
namespace {

namespace fs = std::filesystem;

int CountLines(const std::string& path) {
  std::ifstream f(path);
  std::string line;
  int n = 0;
  while (std::getline(f, line)) ++n;
  return n;
}

class TrainerProbeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("xv-probe-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const char* src = getenv("XV_SOURCE_DIR");
    inv_.trainer_bin = std::string(src ? src : ".") + "/tests/fixtures/fake_trainer.sh";
    inv_.device_flag = "cpu";
    inv_.work_dir = dir_.string();
    log_ = (dir_ / "probe.log").string();
    setenv("XV_FAKE_PROBE_LOG", log_.c_str(), 1);
    device_.set_name("fake-device (cpu)");
    device_.set_fingerprint_json(R"j({"name":"fake-device (cpu)","os":"test"})j");
  }
  void TearDown() override {
    unsetenv("XV_FAKE_PROBE_LOG");
    unsetenv("XV_FAKE_PROBE_FAIL");
    fs::remove_all(dir_);
  }
  fs::path dir_;
  std::string log_;
  TrainerInvocation inv_;
  v1::Device device_;
  std::unique_ptr<ProcessLauncher> launcher_ = NewPosixProcessLauncher();
};

TEST_F(TrainerProbeTest, ProbesOnceThenReadsTheCache) {
  bool cached = true;
  std::string first = ObtainDeviceProbe(inv_, launcher_.get(), device_, 30, &cached);
  ASSERT_FALSE(first.empty());
  EXPECT_FALSE(cached);
  EXPECT_EQ(CountLines(log_), 1);
  ProbeFigures f;
  ASSERT_TRUE(ParseProbeFigures(first, &f));
  EXPECT_DOUBLE_EQ(f.matmul_tflops, 1.5);
  EXPECT_EQ(f.matmul_dtype, "float32");
  EXPECT_DOUBLE_EQ(f.bandwidth_gb_per_s, 12.5);
  EXPECT_TRUE(fs::exists(dir_ / "probe-cache.json"));

  // A restart: same device, same trainer binary -> the cache, no second probe.
  std::string second = ObtainDeviceProbe(inv_, launcher_.get(), device_, 30, &cached);
  EXPECT_TRUE(cached);
  EXPECT_EQ(second, first);
  EXPECT_EQ(CountLines(log_), 1);

  // Another device fingerprint (a driver update, another GPU) probes again.
  device_.set_fingerprint_json(R"j({"name":"fake-device (cpu)","os":"test","driver":"2"})j");
  std::string third = ObtainDeviceProbe(inv_, launcher_.get(), device_, 30, &cached);
  EXPECT_FALSE(cached);
  EXPECT_EQ(third, first);
  EXPECT_EQ(CountLines(log_), 2);
}

TEST_F(TrainerProbeTest, AChangedTrainerBinaryProbesAgain) {
  const std::string copy = (dir_ / "trainer.sh").string();
  fs::copy_file(inv_.trainer_bin, copy);
  inv_.trainer_bin = copy;
  const std::string key1 = ProbeCacheKey(inv_, device_);
  ASSERT_FALSE(ObtainDeviceProbe(inv_, launcher_.get(), device_, 30, nullptr).empty());
  std::ofstream(copy, std::ios::app) << "# rebuilt\n";
  EXPECT_NE(ProbeCacheKey(inv_, device_), key1) << "the key must follow the binary's size";
  bool cached = true;
  ASSERT_FALSE(ObtainDeviceProbe(inv_, launcher_.get(), device_, 30, &cached).empty());
  EXPECT_FALSE(cached);
  EXPECT_EQ(CountLines(log_), 2);
}

TEST_F(TrainerProbeTest, FailureRegistersWithoutAProbeAndCachesNothing) {
  setenv("XV_FAKE_PROBE_FAIL", "1", 1);
  bool cached = true;
  EXPECT_EQ(ObtainDeviceProbe(inv_, launcher_.get(), device_, 30, &cached), "");
  EXPECT_FALSE(cached);
  EXPECT_FALSE(fs::exists(dir_ / "probe-cache.json"));
  std::string out;
  Status st = RunTrainerSubcommand(inv_, launcher_.get(), {"probe"}, 30, &out);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("exit code 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("probe failure requested"), std::string::npos) << st.message();
}

TEST_F(TrainerProbeTest, AHangingProbeIsKilledAtItsTimeout) {
  const std::string hang = (dir_ / "hang.sh").string();
  std::ofstream(hang) << "#!/bin/sh\nsleep 30\n";
  ::chmod(hang.c_str(), 0755);
  inv_.trainer_bin = hang;
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_EQ(ObtainDeviceProbe(inv_, launcher_.get(), device_, 0.5, nullptr), "");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_FALSE(fs::exists(dir_ / "probe-cache.json"));
}

}  // namespace
}  // namespace xv::worker
