// `xv-train verify` end to end through RunVerifyCommand: the shipped cases pass, a perturbed
// reference fails, bad arguments are refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/verify/verify_command.h"

namespace xv::trainer {
namespace {

int RunVerify(std::vector<std::string> args) {
  args.insert(args.begin(), "verify");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  return RunVerifyCommand(static_cast<int>(argv.size()), argv.data());
}

std::string CasesDir() {
  const char* src = std::getenv("XV_SOURCE_DIR");
  return std::string(src ? src : "/work/main") + "/trainer/verify/cases";
}

class VerifyCommandTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { testing::UseAllCores(); }
};

TEST_P(VerifyCommandTest, ShippedCasePassesAgainstTheReference) {
  const std::string out =
      (std::filesystem::temp_directory_path() / ("verify_" + GetParam() + ".safetensors")).string();
  const std::string ref = testing::ReferenceDir() + "/" + GetParam() + ".safetensors";
  EXPECT_EQ(RunVerify({"--case", CasesDir() + "/" + GetParam() + ".safetensors", "--config",
                       CasesDir() + "/" + GetParam() + ".json", "--out", out, "--against", ref}),
            0);
  // The written outputs are fp32 and hold every family.
  std::map<std::string, torch::Tensor> written;
  ASSERT_TRUE(LoadSafetensors(out, &written).ok());
  for (const char* key :
       {"output/logits", "output/loss", "output/loss_none", "output/loss_after_step1",
        "grad/lm_head.weight", "step1/x0_lambdas", "step2/transformer.wte.weight"}) {
    ASSERT_TRUE(written.count(key)) << key;
    EXPECT_EQ(written[key].scalar_type(), torch::kFloat32) << key;
  }
  // Comparing the file alone (--against/--out) passes too; a perturbed gradient fails.
  EXPECT_EQ(RunVerify({"--against", ref, "--out", out}), 0);
  written["grad/lm_head.weight"] = written["grad/lm_head.weight"] * 1.01;
  ASSERT_TRUE(SaveSafetensors(out, written).ok());
  EXPECT_EQ(RunVerify({"--against", ref, "--out", out}), 1);
  auto rows = CompareAgainstReference(written, [&] {
    std::map<std::string, torch::Tensor> r;
    EXPECT_TRUE(LoadSafetensors(ref, &r).ok());
    return r;
  }());
  bool grad_failed = false;
  for (const auto& r : rows) {
    if (r.family == "grad") grad_failed = !r.pass && r.worst_name == "grad/lm_head.weight";
  }
  EXPECT_TRUE(grad_failed);
  std::remove(out.c_str());
}

INSTANTIATE_TEST_SUITE_P(Cases, VerifyCommandTest,
                         ::testing::Values("gpt_tiny_sl", "gpt_tiny_gqa"));

TEST(VerifyCommandBuiltinTest, ShippedCasesPass) {
  testing::UseAllCores();
  ::setenv("XV_VERIFY_CASES", CasesDir().c_str(), 1);
  EXPECT_EQ(RunVerify({"--builtin"}), 0);
  ::setenv("XV_VERIFY_CASES", "/nonexistent-verify-cases", 1);
  EXPECT_EQ(RunVerify({"--builtin"}), 2);
  ::unsetenv("XV_VERIFY_CASES");
}

TEST(VerifyCommandArgsTest, MissingConfigIsRefused) {
  EXPECT_EQ(
      RunVerify({"--case", CasesDir() + "/gpt_tiny_sl.safetensors", "--out", "/tmp/x.safetensors"}),
      2);
  EXPECT_EQ(RunVerify({"--case", "/nonexistent.safetensors", "--config", "/nonexistent.json",
                       "--out", "/tmp/x.safetensors"}),
            2);
  EXPECT_EQ(RunVerify({"--case", CasesDir() + "/gpt_tiny_sl.safetensors", "--config",
                       CasesDir() + "/gpt_tiny_sl.json", "--out", "/tmp/x.safetensors",
                       "--precision", "fp16"}),
            2);
}

// --precision fp64 computes the fp32 reference's function in exact arithmetic: it lands on the
// reference within fp32 rounding, and CompareAgainstReference reports its distance as each
// family's floor.
TEST(VerifyCommandPrecisionTest, Fp64RunGivesTheReferenceFloor) {
  testing::UseAllCores();
  auto ref = testing::LoadReferenceTensors("gpt_tiny_sl.safetensors");
  nlohmann::json config = testing::LoadManifest()["cases"]["gpt_tiny_sl"];
  VerifyRunOptions fp32, fp64;
  fp64.precision = "fp64";
  fp64.attention_backend = "math";
  std::map<std::string, torch::Tensor> ours, exact;
  ASSERT_TRUE(RunVerifyCase(ref, config, fp32, &ours).ok());
  ASSERT_TRUE(RunVerifyCase(ref, config, fp64, &exact).ok());
  for (const auto& [name, t] : exact) EXPECT_EQ(t.scalar_type(), torch::kFloat32) << name;
  // fp32 rounding of the logits, loss and gradients is ~1e-7..1e-6 of their scale; fp64's own
  // RMSNorm epsilon instead of the fp32 model's would move every gradient by 1.3e-5..2.3e-5.
  EXPECT_LE(RelativeError(exact.at("output/logits"), ref.at("output/logits")), 2e-6);
  EXPECT_LE(RelativeError(exact.at("output/loss_none"), ref.at("output/loss_none")), 2e-6);
  int with_floor = 0;
  for (const auto& row : CompareAgainstReference(ours, ref, &exact)) {
    EXPECT_GE(row.floor, 0) << row.family;
    if (row.family == "grad") EXPECT_LE(row.floor, 5e-6);
    if (row.family == "step2/adamw") EXPECT_LE(row.floor, 2e-5);
    ++with_floor;
  }
  EXPECT_GE(with_floor, 8);
  for (const auto& row : CompareAgainstReference(ours, ref)) EXPECT_EQ(row.floor, -1) << row.family;
}

}  // namespace
}  // namespace xv::trainer
