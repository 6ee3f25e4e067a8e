// MuonAdamW against upstream: parameter groups, two optimizer steps, polar express.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/model/gpt.h"
#include "trainer/optim/muon_adamw.h"
#include "trainer/torch_compat.h"
#include "trainer/verify/verify_command.h"

namespace xv::trainer {
namespace {

using testing::LoadManifest;
using testing::LoadReferenceTensors;
using testing::RelativeError;

class OptimizerReferenceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    testing::UseAllCores();
    manifest_ = LoadManifest()["cases"][GetParam()];
    ASSERT_TRUE(manifest_.is_object());
    ref_ = LoadReferenceTensors(GetParam() + ".safetensors");
    model_ = GPT(GPTConfigFromJson(manifest_["config"]));
    ASSERT_TRUE(model_->LoadParameters(ref_, "param/").ok());
  }
  // Worst relative error of the model's parameters against `prefix`/<name>, split into Muon
  // matrices (transformer.h.*), AdamW embedding tables (transformer.wte, value_embeds.*) and the
  // other AdamW parameters (lm_head, resid_lambdas, x0_lambdas). Muon matrices are held to
  // `muon_tolerance`, AdamW parameters to `adamw_tolerance`; with `exact` (the case computed in
  // fp64 by `xv-train verify --precision fp64`), an AdamW parameter whose exact value is itself
  // further than that from the reference (the reference's own fp32 rounding) is held to that
  // distance instead, never to more than kReferenceFloorCap.
  void ExpectParams(const std::string& prefix, double muon_tolerance, double adamw_tolerance,
                    const std::map<std::string, torch::Tensor>* exact = nullptr) {
    double worst_muon = 0, worst_adam = 0, worst_embedding = 0, worst_floor = 0;
    for (auto& [name, p] : model_->NamedParameters()) {
      auto it = ref_.find(prefix + name);
      ASSERT_NE(it, ref_.end()) << prefix << name;
      double rel = RelativeError(p, it->second);
      const bool muon = name.rfind("transformer.h.", 0) == 0;
      const bool embedding =
          name == "transformer.wte.weight" || name.rfind("value_embeds.", 0) == 0;
      double tolerance = muon ? muon_tolerance : adamw_tolerance;
      if (exact && !muon) {
        const double floor = RelativeError(exact->at(prefix + name), it->second);
        EXPECT_LE(floor, kReferenceFloorCap) << "fp64 " << prefix << name;
        tolerance = std::min(kReferenceFloorCap, std::max(tolerance, floor));
        worst_floor = std::max(worst_floor, floor);
      }
      EXPECT_LE(rel, tolerance) << prefix << name;
      double& worst = muon ? worst_muon : embedding ? worst_embedding : worst_adam;
      worst = std::max(worst, rel);
    }
    std::printf(
        "[%s] %s worst relative error: muon matrices %.3e, adamw embedding tables %.3e, other "
        "adamw params %.3e\n",
        GetParam().c_str(), prefix.c_str(), worst_muon, worst_embedding, worst_adam);
    if (exact) {
      std::printf("[%s] %s the fp64 computation's worst adamw relative error (the floor): %.3e\n",
                  GetParam().c_str(), prefix.c_str(), worst_floor);
    }
  }
  // The case in exact arithmetic (verify's fp64 mode, math attention, step 2 from step1/*).
  std::map<std::string, torch::Tensor> ExactCase() {
    VerifyRunOptions options;
    options.precision = "fp64";
    options.attention_backend = "math";
    std::map<std::string, torch::Tensor> exact;
    xv::Status st = RunVerifyCase(ref_, manifest_, options, &exact);
    EXPECT_TRUE(st.ok()) << st.ToString();
    return exact;
  }
  // See TwoStepsAndLossAfterStep1.
  static constexpr double kReferenceFloorCap = 2e-5;
  nlohmann::json manifest_;
  std::map<std::string, torch::Tensor> ref_;
  GPT model_{nullptr};
};

TEST_P(OptimizerReferenceTest, GroupsMatchManifest) {
  MuonAdamW opt(model_, MuonAdamWOptionsFromJson(manifest_["optimizer_kwargs"]));
  nlohmann::json groups = opt.DescribeGroups();
  const auto& expected = manifest_["param_groups"];
  ASSERT_EQ(groups.size(), expected.size());
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_EQ(groups[i]["kind"], expected[i]["kind"]) << "group " << i;
    EXPECT_NEAR(groups[i]["lr"].get<double>(), expected[i]["lr"].get<double>(), 1e-12) << i;
    EXPECT_NEAR(groups[i]["initial_lr"].get<double>(), expected[i]["initial_lr"].get<double>(),
                1e-12);
    EXPECT_EQ(groups[i]["weight_decay"].get<double>(), expected[i]["weight_decay"].get<double>());
    EXPECT_EQ(groups[i]["params"], expected[i]["params"]) << "group " << i;
    if (expected[i]["kind"] == "adamw") {
      EXPECT_EQ(groups[i]["betas"], expected[i]["betas"]) << i;
      EXPECT_EQ(groups[i]["eps"].get<double>(), expected[i]["eps"].get<double>());
    } else {
      EXPECT_EQ(groups[i]["momentum"].get<double>(), expected[i]["momentum"].get<double>());
      EXPECT_EQ(groups[i]["ns_steps"].get<int>(), expected[i]["ns_steps"].get<int>());
      EXPECT_EQ(groups[i]["beta2"].get<double>(), expected[i]["beta2"].get<double>());
    }
  }
  // The loop's schedule scales every lr and the Muon weight decay.
  opt.SetSchedule(0.5, 0.9, 0.25);
  groups = opt.DescribeGroups();
  for (size_t i = 0; i < groups.size(); ++i) {
    EXPECT_NEAR(groups[i]["lr"].get<double>(), 0.5 * expected[i]["lr"].get<double>(), 1e-12);
    if (expected[i]["kind"] == "muon") {
      EXPECT_EQ(groups[i]["momentum"].get<double>(), 0.9);
      EXPECT_NEAR(groups[i]["weight_decay"].get<double>(),
                  0.25 * expected[i]["weight_decay"].get<double>(), 1e-12);
    }
  }
}

// Step 1 from the reference parameters; step 2 from the reference's own step-1 parameters (with
// this optimizer's state), so each step is checked on its own: Muon's bf16 orthogonalisation turns
// ~1e-6 gradient differences into ~1e-2 differences of a few matrices, which a free-running second
// step would carry into every parameter.
TEST_P(OptimizerReferenceTest, TwoStepsAndLossAfterStep1) {
  const auto& idx = ref_.at("input/idx");
  const auto& targets = ref_.at("input/targets");
  MuonAdamW opt(model_, MuonAdamWOptionsFromJson(manifest_["optimizer_kwargs"]));
  model_->forward(idx, targets).backward();
  opt.Step();
  const std::map<std::string, torch::Tensor> exact = ExactCase();
  ExpectParams("step1/", 1e-2, 1e-5, &exact);
  opt.ZeroGrad();
  for (auto& [name, p] : model_->NamedParameters()) EXPECT_FALSE(p.grad().defined()) << name;
  ASSERT_TRUE(model_->LoadParameters(ref_, "step1/").ok());
  torch::Tensor loss1 = model_->forward(idx, targets);
  double rel = RelativeError(loss1.detach().reshape({1}), ref_.at("output/loss_after_step1"));
  std::printf("[%s] loss_after_step1 %.6f (reference %.6f), relative error %.3e\n",
              GetParam().c_str(), loss1.item<double>(), manifest_["loss_after_step1"].get<double>(),
              rel);
  EXPECT_LE(rel, 1e-5);
  loss1.backward();
  opt.Step();
  // Step 2 runs on the reference's own step-1 parameters, so its gradient is ours at those
  // parameters. Gradients agree to <= 6.4e-7 (max-normalised; x0_lambdas 2.2e-6) on LibTorch 1.13,
  // and each fp32 computation, the reference's included, is 3e-7..9e-7 from the fp64 one: both
  // are fp32 rounding, in different summation orders. AdamW's second step divides each element's
  // first moment by the RMS of its two gradients, so an element whose gradients are ~1% of the
  // tensor's largest turns that rounding into an lr-sized error, and the embedding tables run at
  // lr 0.69. On gpt_tiny_sl the exact (fp64) step 2 of value_embeds.0.weight is 1.15e-5 from the
  // reference's step2/ tensor: the reference itself is no closer than that to exact arithmetic
  // there, and no fp32 implementation can be held to the 1e-5 on that tensor unless it
  // repeats PyTorch 2.11's summation order (LibTorch 2.11 builds do: 7.2e-7). So each AdamW
  // parameter is held to 1e-5, or to its fp64 value's own distance from the reference where that
  // is larger, capped at kReferenceFloorCap so an error of ours can never widen its own bound (the
  // fp64 values must be within the cap too). Measured here on 1.13: value_embeds.0.weight 1.015e-5
  // against a floor of 1.150e-5; every other AdamW parameter is below 1e-5.
  ExpectParams("step2/", 1e-2, 1e-5, &exact);
}

// Teacher-forced: fed the case's own gradients (grad/*), one step from param/* lands on the case's
// step1/*. Only the bf16 GEMM's summation order is left between xv and the reference: with
// LibTorch >= 2.11 on the CPU the GEMM is the reference's own and the Muon matrices must be within
// the 1e-3 (they are exact); with the fp32-GEMM emulation of older LibTorch (CI's 1.13),
// upstream's own code lands 1.3e-4 (gpt_tiny_sl) and 2.03e-3 (gpt_tiny_gqa) from the reference with
// MKL's fp32 GEMM, and 3.0e-3 with CUDA's bf16 GEMM (measured on the H200 machine,
// bench/README.md); CI's OpenBLAS sums in yet another order, so 4e-3 there: above every GEMM's
// floor seen, below the 5.2e-3 that a wrong Nesterov weight (0.05 instead of fp32's 1 - 0.95f)
// gave.
TEST_P(OptimizerReferenceTest, TeacherForcedStep1MatchesTheReference) {
  for (auto& [name, p] : model_->NamedParameters()) {
    auto it = ref_.find("grad/" + name);
    ASSERT_NE(it, ref_.end()) << "grad/" << name;
    p.mutable_grad() = it->second.clone();
  }
  MuonAdamW opt(model_, MuonAdamWOptionsFromJson(manifest_["optimizer_kwargs"]));
  opt.Step();
#if XV_TORCH_AT_LEAST(2, 11)
  constexpr double kMuonTolerance = 1e-3;
#else
  constexpr double kMuonTolerance = 4e-3;
#endif
  ExpectParams("step1/", kMuonTolerance, 1e-5);
  // verify computes the same run and reports it beside the end-to-end step.
  std::map<std::string, torch::Tensor> outputs;
  ASSERT_TRUE(RunVerifyCase(ref_, manifest_, VerifyRunOptions{}, &outputs).ok());
  for (auto& [name, p] : model_->NamedParameters()) {
    auto it = outputs.find(std::string(kTeacherForcedPrefix) + "step1/" + name);
    ASSERT_NE(it, outputs.end()) << name;
    EXPECT_TRUE(torch::equal(it->second, p.detach())) << name;
  }
  bool muon_row = false;
  for (const auto& row : CompareAgainstReference(outputs, ref_)) {
    if (row.family != "step1/muon teacher-forced") continue;
    muon_row = true;
    EXPECT_EQ(row.tolerance, 5e-3);
    EXPECT_TRUE(row.pass) << row.worst << " " << row.worst_name;
  }
  EXPECT_TRUE(muon_row);
}

// Free-running: both steps from this optimizer. The bound is loose on purpose (see above) and only
// catches gross errors such as a wrong group, lr or sign.
TEST_P(OptimizerReferenceTest, FreeRunningTwoStepsStayClose) {
  const auto& idx = ref_.at("input/idx");
  const auto& targets = ref_.at("input/targets");
  MuonAdamW opt(model_, MuonAdamWOptionsFromJson(manifest_["optimizer_kwargs"]));
  for (int step = 0; step < 2; ++step) {
    opt.ZeroGrad();
    model_->forward(idx, targets).backward();
    opt.Step();
  }
  ExpectParams("step2/", 5e-2, 1e-1);
}

INSTANTIATE_TEST_SUITE_P(Cases, OptimizerReferenceTest,
                         ::testing::Values("gpt_tiny_sl", "gpt_tiny_gqa"));

TEST(PolarExpressTest, Fp32AndBf16MatchReference) {
  testing::UseAllCores();
  auto ref = LoadReferenceTensors("polar_express.safetensors");
  int compared = 0;
  for (auto& [key, input] : ref) {
    if (key.rfind("input/", 0) != 0) continue;
    const std::string shape = key.substr(6);
    double fp32 = RelativeError(PolarExpress(input, 5, false), ref.at("fp32/" + shape));
    double bf16 =
        RelativeError(PolarExpress(input, 5, true).to(torch::kFloat32), ref.at("bf16/" + shape));
    std::printf("polar express %s: fp32 %.3e, bf16 %.3e\n", shape.c_str(), fp32, bf16);
    EXPECT_LE(fp32, 1e-5) << shape;
    EXPECT_LE(bf16, 2e-2) << shape;
    ++compared;
  }
  EXPECT_EQ(compared, 4);
}

}  // namespace
}  // namespace xv::trainer
