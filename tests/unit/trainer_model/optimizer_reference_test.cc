// MuonAdamW against upstream: parameter groups, two optimizer steps, polar express.
#include <gtest/gtest.h>
#include <torch/version.h>

#include "tests/unit/trainer_model/reference_fixture.h"
#include "trainer/model/gpt.h"
#include "trainer/optim/muon_adamw.h"

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
  // other AdamW parameters (lm_head, resid_lambdas, x0_lambdas); expects the given tolerances.
  void ExpectParams(const std::string& prefix, double muon_tolerance, double adamw_tolerance,
                    double embedding_tolerance) {
    double worst_muon = 0, worst_adam = 0, worst_embedding = 0;
    for (auto& [name, p] : model_->NamedParameters()) {
      auto it = ref_.find(prefix + name);
      ASSERT_NE(it, ref_.end()) << prefix << name;
      double rel = RelativeError(p, it->second);
      const bool muon = name.rfind("transformer.h.", 0) == 0;
      const bool embedding =
          name == "transformer.wte.weight" || name.rfind("value_embeds.", 0) == 0;
      double& worst = muon ? worst_muon : embedding ? worst_embedding : worst_adam;
      EXPECT_LE(rel, muon        ? muon_tolerance
                     : embedding ? embedding_tolerance
                                 : adamw_tolerance)
          << prefix << name;
      worst = std::max(worst, rel);
    }
    std::printf(
        "[%s] %s worst relative error: muon matrices %.3e, adamw embedding tables %.3e, other "
        "adamw params %.3e\n",
        GetParam().c_str(), prefix.c_str(), worst_muon, worst_embedding, worst_adam);
  }
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
  ExpectParams("step1/", 1e-2, 1e-5, 1e-5);
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
  // parameters. Gradients agree to <= 6.4e-7 (max-normalised; x0_lambdas 2.2e-6): fp32 summation
  // order, LibTorch 1.13 against PyTorch 2.11. AdamW's second step divides each element's first
  // moment by the RMS of its two gradients, so an element whose gradients are ~1% of the tensor's
  // largest turns their few-% relative noise into an lr-sized error, and the embedding tables run
  // at lr 0.69. Measured on the CPU (max|a-b| / max|b|): gpt_tiny_sl value_embeds.0.weight
  // 1.015e-5 (element 4431: g1 = -1.46e-5, g2 = 6.05e-6 against max|g| 1.5e-3; |dp| = 1.6e-5 on
  // max|p| = 1.59), transformer.wte.weight 5.4e-6, value_embeds.2.weight 4.0e-6; gpt_tiny_gqa
  // <= 2.0e-6; lm_head and the scalars <= 1.9e-6. The optimizer's arithmetic is not the source:
  // step 1 fed the reference's own gradients agrees to 2.0e-7, and step 2 after it still gives
  // 9.85e-6 for value_embeds.0.weight. Built against LibTorch 2.11 (the reference's version; its
  // CPU SDPA kernel gives gradients within 8e-8) the same test gives 7.2e-7 for the embedding
  // tables and 1.8e-6 for the rest on the CPU, and `xv-train verify --device cuda` 2.3e-5 for
  // value_embeds.0.weight. So on LibTorch 2.x every non-Muon parameter is held to the issue's
  // 1e-5; on 1.13 the embedding tables get 5e-5 (as `xv-train verify`), the rest 1e-5.
  const double embedding_tolerance = TORCH_VERSION_MAJOR >= 2 ? 1e-5 : 5e-5;
  ExpectParams("step2/", 1e-2, 1e-5, embedding_tolerance);
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
  ExpectParams("step2/", 5e-2, 1e-1, 1e-1);
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
