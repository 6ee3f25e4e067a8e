// GPT forward, loss and gradients against upstream's reference vectors (manifest.json cases).
#include <gtest/gtest.h>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/model/attention.h"
#include "trainer/model/gpt.h"

namespace xv::trainer {
namespace {

using testing::LoadManifest;
using testing::LoadReferenceTensors;
using testing::RelativeError;

struct CaseParam {
  std::string name;
  std::string backend;
};

class GptReferenceTest : public ::testing::TestWithParam<CaseParam> {
 protected:
  void SetUp() override {
    testing::UseAllCores();
    manifest_ = LoadManifest()["cases"][GetParam().name];
    ASSERT_TRUE(manifest_.is_object()) << "manifest.json has no case " << GetParam().name;
    ref_ = LoadReferenceTensors(GetParam().name + ".safetensors");
    GPTConfig cfg = GPTConfigFromJson(manifest_["config"]);
    cfg.attention_backend = GetParam().backend;
    model_ = GPT(cfg);
    xv::Status st = model_->LoadParameters(ref_, "param/");
    ASSERT_TRUE(st.ok()) << st.ToString();
  }
  nlohmann::json manifest_;
  std::map<std::string, torch::Tensor> ref_;
  GPT model_{nullptr};
};

TEST_P(GptReferenceTest, LogitsLossAndPerTokenLoss) {
  torch::NoGradGuard no_grad;
  const auto& idx = ref_.at("input/idx");
  const auto& targets = ref_.at("input/targets");
  double logits = RelativeError(model_->forward(idx), ref_.at("output/logits"));
  double loss = RelativeError(model_->forward(idx, targets).reshape({1}), ref_.at("output/loss"));
  double loss_none =
      RelativeError(model_->forward(idx, targets, "none"), ref_.at("output/loss_none"));
  std::printf("[%s/%s] worst relative error: logits %.3e loss %.3e loss_none %.3e\n",
              GetParam().name.c_str(), GetParam().backend.c_str(), logits, loss, loss_none);
  EXPECT_LE(logits, 1e-5);
  EXPECT_LE(loss, 1e-5);
  EXPECT_LE(loss_none, 1e-5);
  EXPECT_NEAR(model_->forward(idx, targets).item<double>(), manifest_["loss"].get<double>(),
              1e-5 * manifest_["loss"].get<double>());
  EXPECT_EQ(model_->AttentionBackend(), GetParam().backend);
}

TEST_P(GptReferenceTest, GradientsOfMeanLoss) {
  model_->forward(ref_.at("input/idx"), ref_.at("input/targets")).backward();
  double worst = 0;
  std::string worst_name;
  int compared = 0;
  for (auto& [name, p] : model_->NamedParameters()) {
    auto it = ref_.find("grad/" + name);
    ASSERT_NE(it, ref_.end()) << "reference has no grad/" << name;
    ASSERT_TRUE(p.grad().defined()) << name << " got no gradient";
    double rel = RelativeError(p.grad(), it->second);
    EXPECT_LE(rel, 1e-4) << "grad/" << name;
    if (rel > worst) worst = rel, worst_name = name;
    ++compared;
  }
  std::printf("[%s/%s] worst gradient relative error %.3e (%s), %d tensors\n",
              GetParam().name.c_str(), GetParam().backend.c_str(), worst, worst_name.c_str(),
              compared);
  int ref_grads = 0;
  for (auto& [k, v] : ref_) ref_grads += k.rfind("grad/", 0) == 0;
  EXPECT_EQ(compared, ref_grads) << "parameter names must match upstream's state dict";
}

TEST_P(GptReferenceTest, WindowsFlopsAndScalingParams) {
  auto windows = model_->WindowSizes();
  const auto& expected = manifest_["window_sizes"];
  ASSERT_EQ(windows.size(), expected.size());
  for (size_t i = 0; i < windows.size(); ++i) {
    EXPECT_EQ(windows[i][0], expected[i][0].get<int64_t>()) << "layer " << i;
    EXPECT_EQ(windows[i][1], expected[i][1].get<int64_t>()) << "layer " << i;
  }
  EXPECT_EQ(model_->EstimateFlops(), manifest_["flops_per_token"].get<int64_t>());
  auto counts = model_->NumScalingParams();
  for (auto& [key, value] : manifest_["num_scaling_params"].items()) {
    EXPECT_EQ(counts.at(key), value.get<int64_t>()) << key;
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, GptReferenceTest,
    ::testing::Values(CaseParam{"gpt_tiny_sl", "math"}, CaseParam{"gpt_tiny_sl", "sdpa"},
                      CaseParam{"gpt_tiny_gqa", "math"}, CaseParam{"gpt_tiny_gqa", "sdpa"}),
    [](const auto& info) { return info.param.name + "_" + info.param.backend; });

// Upstream-size configurations: window sizes, FLOPs per token and scaling-parameter counts of
// manifest.json's derived_sizes, exactly.
TEST(GptDerivedSizesTest, MatchManifest) {
  auto derived = LoadManifest()["derived_sizes"];
  ASSERT_FALSE(derived.empty());
  for (auto& [name, entry] : derived.items()) {
    GPT model(GPTConfigFromJson(entry["config"]));
    EXPECT_EQ(model->EstimateFlops(), entry["flops_per_token"].get<int64_t>()) << name;
    auto counts = model->NumScalingParams();
    for (auto& [key, value] : entry["num_scaling_params"].items()) {
      EXPECT_EQ(counts.at(key), value.get<int64_t>()) << name << " " << key;
    }
    auto windows = model->WindowSizes();
    ASSERT_EQ(windows.size(), entry["window_sizes"].size()) << name;
    for (size_t i = 0; i < windows.size(); ++i) {
      EXPECT_EQ(windows[i][0], entry["window_sizes"][i][0].get<int64_t>())
          << name << " layer " << i;
    }
  }
}

TEST(GptAttentionTest, BandMaskFollowsFlashConvention) {
  torch::Tensor m = CausalBandMask(6, 2, torch::kCPU);
  // Query 4 sees keys 2, 3, 4 (i - j <= 2), never a later key.
  EXPECT_FALSE(m[4][1].item<bool>());
  EXPECT_TRUE(m[4][2].item<bool>());
  EXPECT_TRUE(m[4][4].item<bool>());
  EXPECT_FALSE(m[4][5].item<bool>());
  EXPECT_EQ(m.sum().item<int64_t>(), 1 + 2 + 3 + 3 + 3 + 3);
}

TEST(GptAttentionTest, ForcedFlashOnCpuSaysWhy) {
  torch::Tensor x = torch::zeros({1, 2, 2, 4});
  try {
    ResolveAttentionBackend("flash", x);
    FAIL() << "flash on CPU fp32 must be refused";
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention_backend: flash"), std::string::npos);
  }
}

TEST(GptConfigTest, ValidationNamesTheField) {
  GPTConfig cfg;
  cfg.n_kv_head = 3;
  xv::Status st = ValidateGPTConfig(cfg);
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("n_kv_head:", 0), 0u) << st.message();
  cfg = GPTConfig();
  cfg.window_pattern = "SXL";
  st = ValidateGPTConfig(cfg);
  EXPECT_EQ(st.message().rfind("window_pattern:", 0), 0u) << st.message();
}

TEST(GptInitTest, InitWeightsFollowsUpstream) {
  GPTConfig cfg = GPTConfigFromJson({{"sequence_len", 16},
                                     {"vocab_size", 50},
                                     {"n_layer", 2},
                                     {"n_head", 2},
                                     {"n_kv_head", 1},
                                     {"n_embd", 64},
                                     {"window_pattern", "L"}});
  GPT model(cfg);
  torch::manual_seed(42);
  model->InitWeights();
  for (auto& [name, p] : model->NamedParameters()) {
    if (name.find("c_proj") != std::string::npos || name.find("ve_gate") != std::string::npos) {
      EXPECT_EQ(p.abs().max().item<float>(), 0.0f) << name;
    }
  }
  EXPECT_TRUE(torch::allclose(model->x0_lambdas(), torch::full({2}, 0.1)));
  EXPECT_TRUE(torch::allclose(model->resid_lambdas(), torch::ones({2})));
  EXPECT_LE(model->lm_head_weight().std().item<double>(), 0.0012);
  EXPECT_NEAR(model->wte_weight().std().item<double>(), 1.0, 0.05);
  // With c_proj = 0 the blocks are identities, so the initial loss is close to ln(vocab).
  torch::Tensor idx = torch::randint(0, 50, {2, 16});
  double loss = model->forward(idx, idx).item<double>();
  EXPECT_NEAR(loss, std::log(50.0), 0.05);
}

}  // namespace
}  // namespace xv::trainer
