// The recipes in recipes/: they parse, upstream-default is upstream's constants (every knob listed,
// equal to the struct defaults), amdsense-round5 resolves to the manifest's "amdsense_round5", and
// cpu-tiny has the shape the CI and the demo rely on.
#include <gtest/gtest.h>

#include <yaml-cpp/yaml.h>

#include "common/recipe.h"
#include "recipe_test_files.h"

namespace xv {
namespace {

Recipe Load(const std::string& path) {
  Recipe r;
  const Status s = ParseRecipeYaml(testing::ReadSourceFile(path), &r);
  EXPECT_TRUE(s.ok()) << path << ": " << s.ToString();
  return r;
}

void ExpectSizesMatch(const ResolvedSizes& s, const nlohmann::json& ref) {
  EXPECT_EQ(s.model_dim, ref.at("config").at("n_embd").get<int>());
  EXPECT_EQ(s.n_head, ref.at("config").at("n_head").get<int>());
  EXPECT_EQ(s.n_kv_head, ref.at("config").at("n_kv_head").get<int>());
  ASSERT_EQ(s.window_sizes.size(), ref.at("window_sizes").size());
  for (size_t i = 0; i < s.window_sizes.size(); ++i) {
    EXPECT_EQ(s.window_sizes[i][0], ref.at("window_sizes")[i][0].get<int>()) << "layer " << i;
  }
  EXPECT_EQ(s.params_total, ref.at("num_scaling_params").at("total").get<int64_t>());
  EXPECT_EQ(s.params_transformer_matrices,
            ref.at("num_scaling_params").at("transformer_matrices").get<int64_t>());
  EXPECT_EQ(s.flops_per_token, ref.at("flops_per_token").get<int64_t>());
}

TEST(ShippedRecipes, UpstreamDefaultListsEveryKnobAtUpstreamValues) {
  const std::string text = testing::ReadSourceFile("recipes/upstream-default.yaml");
  const YAML::Node root = YAML::Load(text);
  for (const std::string& name : RecipeKnobNames()) {
    EXPECT_TRUE(root[name].IsDefined()) << name << " is not spelled out in upstream-default.yaml";
  }
  const Recipe r = Load("recipes/upstream-default.yaml");
  EXPECT_EQ(RecipeToJson(r), RecipeToJson(Recipe{}));
  EXPECT_EQ(CanonicalHash(r), CanonicalHash(Recipe{}));
  // Upstream's constants, spelled out (train.py / prepare.py).
  EXPECT_EQ(r.depth, 8);
  EXPECT_EQ(r.aspect_ratio, 64);
  EXPECT_EQ(r.head_dim, 128);
  EXPECT_EQ(r.window_pattern, "SSSL");
  EXPECT_EQ(r.total_batch_size, 1 << 19);
  EXPECT_EQ(r.device_batch_size, 128);
  EXPECT_EQ(r.sequence_len, 2048);
  EXPECT_EQ(r.vocab_size, 8192);
  EXPECT_DOUBLE_EQ(r.embedding_lr, 0.6);
  EXPECT_DOUBLE_EQ(r.unembedding_lr, 0.004);
  EXPECT_DOUBLE_EQ(r.matrix_lr, 0.04);
  EXPECT_DOUBLE_EQ(r.scalar_lr, 0.5);
  EXPECT_DOUBLE_EQ(r.weight_decay, 0.2);
  EXPECT_DOUBLE_EQ(r.adam_betas[0], 0.8);
  EXPECT_DOUBLE_EQ(r.adam_betas[1], 0.95);
  EXPECT_DOUBLE_EQ(r.warmup_ratio, 0.0);
  EXPECT_DOUBLE_EQ(r.warmdown_ratio, 0.5);
  EXPECT_DOUBLE_EQ(r.final_lr_frac, 0.0);
  EXPECT_DOUBLE_EQ(r.time_budget_s, 300);
  EXPECT_EQ(r.eval_tokens, 40 * 524288);
  EXPECT_DOUBLE_EQ(r.softcap, 15);
  EXPECT_DOUBLE_EQ(r.rope_base, 10000);
  EXPECT_DOUBLE_EQ(r.x0_lambda_init, 0.1);
  EXPECT_DOUBLE_EQ(r.resid_lambda_init, 1.0);
  EXPECT_DOUBLE_EQ(r.muon_momentum_start, 0.85);
  EXPECT_DOUBLE_EQ(r.muon_momentum_end, 0.95);
  EXPECT_EQ(r.muon_momentum_warmup_steps, 300);
  EXPECT_EQ(r.muon_ns_steps, 5);
  EXPECT_DOUBLE_EQ(r.muon_beta2, 0.95);
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  ExpectSizesMatch(s, testing::ReferenceManifest().at("derived_sizes").at("upstream_default"));
}

TEST(ShippedRecipes, AmdsenseRound5MatchesTheManifest) {
  const Recipe r = Load("recipes/amdsense-round5.yaml");
  EXPECT_EQ(r.aspect_ratio, 40);
  EXPECT_EQ(r.head_dim, 64);
  // What amdsense measured: its SDPA path ignored the windows, so every layer saw the full
  // context (the nominal SSSSSL is named in the recipe's comment and compared below).
  EXPECT_EQ(r.window_pattern, "L");
  EXPECT_EQ(r.total_batch_size, 1 << 15);
  EXPECT_EQ(r.device_batch_size, 16);
  EXPECT_DOUBLE_EQ(r.embedding_lr, 0.8);
  EXPECT_DOUBLE_EQ(r.unembedding_lr, 0.008);
  EXPECT_DOUBLE_EQ(r.matrix_lr, 0.05);
  EXPECT_DOUBLE_EQ(r.scalar_lr, 0.7);
  EXPECT_DOUBLE_EQ(r.weight_decay, 0.08);
  EXPECT_DOUBLE_EQ(r.adam_betas[0], 0.75);
  EXPECT_DOUBLE_EQ(r.adam_betas[1], 0.97);
  EXPECT_DOUBLE_EQ(r.warmdown_ratio, 0.75);
  EXPECT_DOUBLE_EQ(r.final_lr_frac, 0.07);
  // The rest is upstream's.
  EXPECT_EQ(r.depth, 8);
  EXPECT_EQ(r.sequence_len, 2048);
  EXPECT_DOUBLE_EQ(r.time_budget_s, 300);
  ResolvedSizes measured;
  ASSERT_TRUE(ResolveSizes(r, &measured).ok());
  ASSERT_EQ(measured.window_sizes.size(), 8u);
  for (const auto& w : measured.window_sizes) EXPECT_EQ(w[0], 2048);
  EXPECT_NE(
      testing::ReadSourceFile("recipes/amdsense-round5.yaml").find("nominal pattern is\n# SSSSSL"),
      std::string::npos);
  // The fork's nominal pattern resolves to the reference manifest's sizes.
  Recipe nominal = r;
  nominal.window_pattern = "SSSSSL";
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(nominal, &s).ok());
  EXPECT_EQ(s.grad_accum_steps, 1);
  ExpectSizesMatch(s, testing::ReferenceManifest().at("derived_sizes").at("amdsense_round5"));
}

TEST(ShippedRecipes, CpuTinyIsSmallAndCheap) {
  const Recipe r = Load("recipes/cpu-tiny.yaml");
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  EXPECT_EQ(r.vocab_size, 8192);
  EXPECT_EQ(r.dtype, "float32");
  EXPECT_EQ(r.attention_backend, "math");
  EXPECT_DOUBLE_EQ(r.time_budget_s, 25);
  EXPECT_EQ(s.model_dim, 128);
  EXPECT_EQ(s.n_head, 2);
  EXPECT_EQ(s.grad_accum_steps, 2);
  ASSERT_EQ(s.window_sizes.size(), 2u);
  EXPECT_EQ(s.window_sizes[0][0], 128);
  EXPECT_EQ(s.window_sizes[1][0], 256);
  // Few enough FLOPs per step for a 2-core CPU: under 50 GFLOP per optimizer step.
  EXPECT_LT(static_cast<double>(s.flops_per_token) * r.total_batch_size, 50e9);
  // Eval: whole batches of device_batch_size x sequence_len.
  EXPECT_EQ(r.eval_tokens % (static_cast<int64_t>(r.device_batch_size) * r.sequence_len), 0);
}

}  // namespace
}  // namespace xv
