// Derived sizes against the upstream reference: tests/reference/manifest.json "derived_sizes"
// (upstream default and the AMD-tuned recipes at vocab 8192 / seq 2048) and the two tiny cases.
// Each manifest config is turned into a Recipe the way a user would write it (depth, aspect_ratio,
// head_dim, n_kv_head, window_pattern, sequence_len, vocab_size), then every count must match
// exactly.
#include <cmath>

#include <gtest/gtest.h>

#include "common/recipe.h"
#include "recipe_test_files.h"

namespace xv {
namespace {

// A recipe whose model config is `config` (manifest form: n_layer, n_head, n_kv_head, n_embd, ...).
Recipe RecipeForConfig(const nlohmann::json& config) {
  Recipe r;
  const int n_layer = config.at("n_layer");
  const int n_embd = config.at("n_embd");
  const int n_head = config.at("n_head");
  const int n_kv_head = config.at("n_kv_head");
  r.depth = n_layer;
  r.aspect_ratio = n_embd / n_layer;  // rounded up to head_dim by the resolution
  r.head_dim = n_embd / n_head;
  r.n_kv_head = n_kv_head == n_head ? 0 : n_kv_head;
  r.window_pattern = config.at("window_pattern").get<std::string>();
  r.sequence_len = config.at("sequence_len");
  r.vocab_size = config.at("vocab_size");
  // Keep the batch arithmetic valid for any sequence length.
  r.device_batch_size = 1;
  r.total_batch_size = r.sequence_len;
  r.eval_tokens = r.sequence_len;
  return r;
}

void ExpectMatchesReference(const std::string& what, const Recipe& r, const nlohmann::json& ref) {
  SCOPED_TRACE(what);
  ASSERT_TRUE(ValidateRecipe(r).ok()) << ValidateRecipe(r).ToString();
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  const nlohmann::json& config = ref.at("config");
  EXPECT_EQ(s.model_dim, config.at("n_embd").get<int>());
  EXPECT_EQ(s.n_head, config.at("n_head").get<int>());
  EXPECT_EQ(s.n_kv_head, config.at("n_kv_head").get<int>());
  const nlohmann::json& windows = ref.at("window_sizes");
  ASSERT_EQ(s.window_sizes.size(), windows.size());
  for (size_t i = 0; i < windows.size(); ++i) {
    EXPECT_EQ(s.window_sizes[i][0], windows[i][0].get<int>()) << "layer " << i;
    EXPECT_EQ(s.window_sizes[i][1], windows[i][1].get<int>()) << "layer " << i;
  }
  const nlohmann::json& p = ref.at("num_scaling_params");
  EXPECT_EQ(s.params_wte, p.at("wte").get<int64_t>());
  EXPECT_EQ(s.params_value_embeds, p.at("value_embeds").get<int64_t>());
  EXPECT_EQ(s.params_lm_head, p.at("lm_head").get<int64_t>());
  EXPECT_EQ(s.params_transformer_matrices, p.at("transformer_matrices").get<int64_t>());
  EXPECT_EQ(s.params_scalars, p.at("scalars").get<int64_t>());
  EXPECT_EQ(s.params_total, p.at("total").get<int64_t>());
  EXPECT_EQ(s.flops_per_token, ref.at("flops_per_token").get<int64_t>());
}

TEST(RecipeSizes, ManifestDerivedSizesMatchExactly) {
  const nlohmann::json& manifest = testing::ReferenceManifest();
  ASSERT_TRUE(manifest.contains("derived_sizes"));
  const nlohmann::json& derived = manifest.at("derived_sizes");
  ASSERT_EQ(derived.size(), 4u);
  for (const auto& item : derived.items()) {
    ExpectMatchesReference(item.key(), RecipeForConfig(item.value().at("config")), item.value());
  }
}

TEST(RecipeSizes, TinyReferenceCasesMatchExactly) {
  const nlohmann::json& cases = testing::ReferenceManifest().at("cases");
  ASSERT_TRUE(cases.contains("gpt_tiny_sl"));
  ASSERT_TRUE(cases.contains("gpt_tiny_gqa"));
  for (const char* name : {"gpt_tiny_sl", "gpt_tiny_gqa"}) {
    ExpectMatchesReference(name, RecipeForConfig(cases.at(name).at("config")), cases.at(name));
  }
}

TEST(RecipeSizes, GqaThroughDivisorEqualsExplicitCount) {
  Recipe r =
      RecipeForConfig(testing::ReferenceManifest().at("cases").at("gpt_tiny_gqa").at("config"));
  r.n_kv_head = 0;
  r.kv_head_divisor = 2;
  ExpectMatchesReference("gqa via kv_head_divisor", r,
                         testing::ReferenceManifest().at("cases").at("gpt_tiny_gqa"));
}

TEST(RecipeSizes, UpstreamDefaultStructIsTheManifestDefault) {
  // The struct's defaults are upstream's constants: they resolve to manifest "upstream_default".
  ExpectMatchesReference("Recipe{}", Recipe{},
                         testing::ReferenceManifest().at("derived_sizes").at("upstream_default"));
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(Recipe{}, &s).ok());
  EXPECT_EQ(s.grad_accum_steps, 2);  // 2**19 / (128 * 2048)
  EXPECT_EQ(s.tokens_per_micro_step, 128 * 2048);
  EXPECT_EQ(s.mlp_hidden_dim, 4 * 512);
}

TEST(RecipeSizes, ModelDimRoundsUpToHeadDim) {
  Recipe r;
  r.depth = 3;
  r.aspect_ratio = 50;  // 150 -> 256 with head_dim 128
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  EXPECT_EQ(s.model_dim, 256);
  EXPECT_EQ(s.n_head, 2);
}

TEST(RecipeSizes, ShortWindowFractionAndLastLayerFull) {
  Recipe r;
  r.depth = 4;
  r.window_pattern = "SSSS";
  r.short_window_fraction = 0.25;
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  ASSERT_EQ(s.window_sizes.size(), 4u);
  EXPECT_EQ(s.window_sizes[0][0], 512);
  EXPECT_EQ(s.window_sizes[2][0], 512);
  EXPECT_EQ(s.window_sizes[3][0], 2048);  // last layer always full
  EXPECT_EQ(s.short_window, 512);
}

TEST(RecipeSizes, ValueEmbeddingsOffRemovesThemAndTheirGates) {
  const nlohmann::json& ref =
      testing::ReferenceManifest().at("derived_sizes").at("upstream_default");
  Recipe r;
  r.value_embeddings = false;
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  const nlohmann::json& p = ref.at("num_scaling_params");
  EXPECT_EQ(s.params_value_embeds, 0);
  // Upstream's 4 gates of 32 x n_kv_head (4) weights are gone: 4 * 32 * 4 = 512.
  EXPECT_EQ(s.params_transformer_matrices, p.at("transformer_matrices").get<int64_t>() - 512);
  // The value embeddings were excluded from FLOPs already; only the gates' 6 x 512 go.
  EXPECT_EQ(s.flops_per_token, ref.at("flops_per_token").get<int64_t>() - 6 * 512);
}

TEST(RecipeSizes, MlpRatioAndSwigluChangeTheMatrixCount) {
  Recipe base;
  ResolvedSizes s0, s1, s2;
  ASSERT_TRUE(ResolveSizes(base, &s0).ok());
  Recipe half = base;
  half.mlp_ratio = 2;  // hidden 1024: c_fc + c_proj lose 2 * 512 * 1024 per layer
  ASSERT_TRUE(ResolveSizes(half, &s1).ok());
  EXPECT_EQ(s1.mlp_hidden_dim, 1024);
  EXPECT_EQ(s0.params_transformer_matrices - s1.params_transformer_matrices, 8LL * 2 * 512 * 1024);
  Recipe swiglu = base;
  swiglu.activation = "swiglu";  // c_fc doubles its rows: + 2048 * 512 per layer
  ASSERT_TRUE(ResolveSizes(swiglu, &s2).ok());
  EXPECT_EQ(s2.params_transformer_matrices - s0.params_transformer_matrices, 8LL * 2048 * 512);
  EXPECT_EQ(s2.flops_per_token - s0.flops_per_token, 6LL * 8 * 2048 * 512);
}

TEST(RecipeSizes, UnvalidatedRecipesAreRejectedNotComputed) {
  // ResolveSizes is public: a recipe built in code without ValidateRecipe must not overflow,
  // loop over a billion layers or turn NaN into a window.
  auto error = [](Recipe r) {
    ResolvedSizes s;
    const Status st = ResolveSizes(r, &s);
    return st.ok() ? std::string() : st.message();
  };
  Recipe r;
  r.depth = 1000000000;
  EXPECT_EQ(error(r).rfind("depth: ", 0), 0u) << error(r);
  r = Recipe{};
  r.short_window_fraction = std::nan("");
  EXPECT_EQ(error(r).rfind("short_window_fraction: ", 0), 0u) << error(r);
  r = Recipe{};
  r.total_batch_size = 0;
  EXPECT_EQ(error(r).rfind("total_batch_size: ", 0), 0u) << error(r);
  r = Recipe{};
  r.head_dim = 0;
  EXPECT_EQ(error(r).rfind("head_dim: ", 0), 0u) << error(r);
  r = Recipe{};
  r.window_pattern = "SSXL";
  EXPECT_EQ(error(r).rfind("window_pattern: ", 0), 0u) << error(r);
}

TEST(RecipeSizes, ResolvedConfigJsonCarriesKnobsAndDerivedSizes) {
  Recipe r;
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  const nlohmann::json j = ResolvedConfigJson(r, s);
  EXPECT_EQ(j.at("depth"), 8);
  EXPECT_EQ(j.at("derived").at("model_dim"), 512);
  EXPECT_EQ(j.at("derived").at("num_scaling_params").at("total"), 50332176);
  EXPECT_EQ(j.at("derived").at("flops_per_token"), 239078400);
  EXPECT_EQ(j.at("derived").at("window_sizes").size(), 8u);
  EXPECT_EQ(j.at("derived").at("grad_accum_steps"), 2);
}

// train_sequence_len: the training rows, the windows and the micro-step follow it; the
// evaluation batch (eval_tokens' minimum) stays device_batch_size * sequence_len; the model's
// parameters do not change; 0 means sequence_len.
TEST(RecipeSizes, TrainSequenceLenSetsWindowsAndMicroStepButNotTheEvaluation) {
  Recipe base;  // upstream: sequence_len 2048, device_batch_size 128, total 2^19, SSSL
  ResolvedSizes at_eval;
  ASSERT_TRUE(ResolveSizes(base, &at_eval).ok());
  Recipe shorter = base;
  shorter.train_sequence_len = 512;
  ASSERT_TRUE(ValidateRecipe(shorter).ok());
  EXPECT_EQ(TrainingSequenceLen(shorter), 512);
  EXPECT_EQ(TrainingSequenceLen(base), 2048);
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(shorter, &s).ok());
  EXPECT_EQ(s.tokens_per_micro_step, 128 * 512);
  EXPECT_EQ(s.grad_accum_steps, 8);
  EXPECT_EQ(s.short_window, 256);
  EXPECT_EQ(s.window_sizes.front(), (std::array<int, 2>{256, 0}));
  EXPECT_EQ(s.window_sizes.back(), (std::array<int, 2>{512, 0}));
  EXPECT_EQ(s.params_total, at_eval.params_total);
  EXPECT_LT(s.flops_per_token, at_eval.flops_per_token);  // attention over 512, not 2048
  // Explicitly equal to sequence_len: the same sizes as 0.
  Recipe explicit_len = base;
  explicit_len.train_sequence_len = 2048;
  ResolvedSizes e;
  ASSERT_TRUE(ResolveSizes(explicit_len, &e).ok());
  EXPECT_EQ(e.window_sizes, at_eval.window_sizes);
  EXPECT_EQ(e.grad_accum_steps, at_eval.grad_accum_steps);
  // The micro-step divisibility names the training length.
  Recipe odd = base;
  odd.train_sequence_len = 3000;
  const Status st = ValidateRecipe(odd);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.message().rfind("total_batch_size: must be a multiple of device_batch_size * "
                               "train_sequence_len = 128 * 3000",
                               0),
            0u)
      << st.message();
  // eval_tokens' minimum is the evaluation batch at sequence_len, whatever the training length.
  Recipe small_eval = shorter;
  small_eval.eval_tokens = 128 * 512;  // one batch of training rows, a quarter of an eval batch
  const Status ev = ValidateRecipe(small_eval);
  ASSERT_FALSE(ev.ok());
  EXPECT_EQ(ev.message().rfind("eval_tokens: must be at least one eval batch", 0), 0u)
      << ev.message();
  Recipe overrides = base;
  ASSERT_TRUE(ApplyOverride("train_sequence_len", "1024", &overrides).ok());
  EXPECT_EQ(overrides.train_sequence_len, 1024);
  EXPECT_FALSE(ApplyOverride("train_sequence_len", "-1", &overrides).ok());
}

}  // namespace
}  // namespace xv
