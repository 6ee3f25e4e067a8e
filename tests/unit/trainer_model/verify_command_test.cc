// `xv-train verify` end to end through RunVerifyCommand: the shipped cases pass, a perturbed
// reference fails, bad arguments are refused.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>

#include "tests/unit/trainer_model/reference_fixture.h"
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
}

}  // namespace
}  // namespace xv::trainer
