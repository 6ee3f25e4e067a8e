#include "worker/device_discovery.h"

#include <gtest/gtest.h>
#include <stdlib.h>

namespace xv::worker {
namespace {

std::string FakeTrainer() {
  const char* src = getenv("XV_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/fake_trainer.sh";
}

TEST(DeviceFromFingerprintJson, MapsFieldsAndKeepsTheTextVerbatim) {
  const std::string text =
      R"({"name":"NVIDIA H200","vendor":"nvidia","backend":"cuda","index":2,)"
      R"("memory_bytes":150000000000,"driver":"550.54","runtime":"12.4","torch_version":"2.4.0",)"
      R"("os":"Linux 6.1","hostname":"box","env_knobs":{"TF32":"1","threads":8},)"
      R"("peak_flops":989e12,"peak_flops_source":"datasheet","extra":true})";
  v1::Device d;
  ASSERT_TRUE(DeviceFromFingerprintJson(text, &d).ok());
  EXPECT_EQ(d.name(), "NVIDIA H200");
  EXPECT_EQ(d.vendor(), "nvidia");
  EXPECT_EQ(d.backend(), "cuda");
  EXPECT_EQ(d.index(), 2);
  EXPECT_EQ(d.memory_bytes(), 150000000000);
  EXPECT_EQ(d.env_knobs().at("TF32"), "1");
  EXPECT_EQ(d.env_knobs().at("threads"), "8");
  EXPECT_DOUBLE_EQ(d.peak_flops(), 989e12);
  EXPECT_EQ(d.fingerprint_json(), text);
}

TEST(DeviceFromFingerprintJson, ReadsXvTrainsOwnFieldNames) {
  // The shape `xv-train fingerprint --device cpu` prints.
  const std::string text =
      R"({"backend":"cpu","compute_capability":null,"cpu_count":2,"cpu_model":"AMD EPYC",)"
      R"("device":"cpu","driver_version":null,"env":{"CUDA_VISIBLE_DEVICES":null,)"
      R"("OMP_NUM_THREADS":"2"},"host_memory_bytes":25276059648,"intraop_threads":1,)"
      R"("libtorch_build":"cpu","libtorch_version":"1.13.0","memory_bytes":25276059648,)"
      R"("name":"AMD EPYC","os":"Linux 6.1 x86_64","peak_flops":null,)"
      R"("peak_flops_source":"unknown","runtime_version":null,"vendor":"AuthenticAMD"})";
  v1::Device d;
  ASSERT_TRUE(DeviceFromFingerprintJson(text, &d).ok());
  EXPECT_EQ(d.name(), "AMD EPYC");
  EXPECT_EQ(d.vendor(), "cpu");
  EXPECT_EQ(d.backend(), "cpu");
  EXPECT_EQ(d.index(), -1);
  EXPECT_EQ(d.torch_version(), "1.13.0");
  EXPECT_EQ(d.driver(), "");
  EXPECT_EQ(d.memory_bytes(), 25276059648);
  EXPECT_EQ(d.env_knobs().size(), 1u);
  EXPECT_EQ(d.env_knobs().at("OMP_NUM_THREADS"), "2");
  EXPECT_EQ(d.peak_flops(), 0);
  EXPECT_EQ(d.peak_flops_source(), "unknown");
  EXPECT_FALSE(d.hostname().empty());
}

TEST(DeviceFromFingerprintJson, VendorFollowsTheGpuBackend) {
  v1::Device d;
  ASSERT_TRUE(DeviceFromFingerprintJson(
                  R"({"name":"AMD Instinct MI300X","backend":"rocm","vendor":"AMD"})", &d)
                  .ok());
  EXPECT_EQ(d.vendor(), "amd");
  EXPECT_EQ(d.index(), 0);
  ASSERT_TRUE(
      DeviceFromFingerprintJson(R"({"name":"NVIDIA H200","backend":"cuda","index":3})", &d).ok());
  EXPECT_EQ(d.vendor(), "nvidia");
  EXPECT_EQ(d.index(), 3);
}

TEST(DeviceFromFingerprintJson, RejectsNonObjectsAndNamelessDevices) {
  v1::Device d;
  EXPECT_FALSE(DeviceFromFingerprintJson("[1,2]", &d).ok());
  EXPECT_FALSE(DeviceFromFingerprintJson("not json", &d).ok());
  Status st = DeviceFromFingerprintJson(R"({"vendor":"cpu"})", &d);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("name"), std::string::npos);
}

TEST(DiscoverDevice, AsksTheTrainer) {
  TrainerInvocation inv;
  inv.trainer_bin = FakeTrainer();
  inv.device_flag = "cpu";
  auto launcher = NewPosixProcessLauncher();
  v1::Device d = DiscoverDevice(inv, launcher.get(), 30);
  EXPECT_EQ(d.name(), "fake-device (cpu)");
  EXPECT_EQ(d.torch_version(), "fake");
  EXPECT_FALSE(d.fingerprint_json().empty());
}

TEST(DiscoverDevice, FallsBackToAMinimalCpuFingerprint) {
  TrainerInvocation inv;
  inv.device_flag = "cpu";
  auto launcher = NewPosixProcessLauncher();
  for (bool missing : {true, false}) {
    inv.trainer_bin = missing ? "/nonexistent/xv-train" : FakeTrainer();
    if (!missing) setenv("XV_FAKE_FINGERPRINT_FAIL", "1", 1);
    v1::Device d = DiscoverDevice(inv, launcher.get(), 30);
    unsetenv("XV_FAKE_FINGERPRINT_FAIL");
    EXPECT_EQ(d.name().rfind("cpu: ", 0), 0u) << d.name();
    EXPECT_EQ(d.vendor(), "cpu");
    EXPECT_EQ(d.backend(), "cpu");
    EXPECT_EQ(d.index(), -1);
    EXPECT_FALSE(d.hostname().empty());
  }
}

}  // namespace
}  // namespace xv::worker
