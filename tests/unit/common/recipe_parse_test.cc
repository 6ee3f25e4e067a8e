// Parsing and validation: YAML and JSON in, overrides, and the errors a user sees (each names the
// field first).
#include <gtest/gtest.h>

#include "common/recipe.h"
#include "common/recipe_knobs.h"
#include "knob_value_mutation.h"

namespace xv {
namespace {

// Parses `yaml` and returns the error message ("" when it parsed).
std::string YamlError(const std::string& yaml) {
  Recipe r;
  const Status s = ParseRecipeYaml(yaml, &r);
  if (!s.ok()) {
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  }
  return s.ok() ? "" : s.message();
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

TEST(RecipeParse, YamlSetsKnobsAndKeepsDefaultsForTheRest) {
  Recipe r;
  ASSERT_TRUE(ParseRecipeYaml("depth: 4\nmatrix_lr: 0.03\nadam_betas: [0.7, 0.9]\n"
                              "window_pattern: sl\nvalue_embeddings: off\n",
                              &r)
                  .ok());
  EXPECT_EQ(r.depth, 4);
  EXPECT_DOUBLE_EQ(r.matrix_lr, 0.03);
  EXPECT_DOUBLE_EQ(r.adam_betas[0], 0.7);
  EXPECT_DOUBLE_EQ(r.adam_betas[1], 0.9);
  EXPECT_EQ(r.window_pattern, "SL");  // upper-cased like upstream's pattern.upper()
  EXPECT_FALSE(r.value_embeddings);
  EXPECT_EQ(r.head_dim, 128);  // default kept
  EXPECT_DOUBLE_EQ(r.embedding_lr, 0.6);
}

TEST(RecipeParse, UnknownKeySuggestsTheClosestKnob) {
  const std::string e = YamlError("matrx_lr: 0.1\n");
  EXPECT_TRUE(StartsWith(e, "matrx_lr: unknown knob")) << e;
  EXPECT_NE(e.find("did you mean 'matrix_lr'"), std::string::npos) << e;
  EXPECT_NE(e.find("line 1"), std::string::npos) << e;
  const std::string far = YamlError("banana: 1\n");
  EXPECT_TRUE(StartsWith(far, "banana: unknown knob")) << far;
  EXPECT_EQ(far.find("did you mean"), std::string::npos) << far;
}

TEST(RecipeParse, WrongTypesNameTheFieldAndTheValue) {
  EXPECT_TRUE(StartsWith(YamlError("depth: abc\n"), "depth: expected an integer, got 'abc'"));
  EXPECT_TRUE(StartsWith(YamlError("depth: 2.5\n"), "depth: expected an integer, got '2.5'"));
  EXPECT_TRUE(StartsWith(YamlError("depth: '4'\n"), "depth: expected an integer, got the string"));
  EXPECT_TRUE(
      StartsWith(YamlError("matrix_lr: fast\n"), "matrix_lr: expected a number, got 'fast'"));
  EXPECT_TRUE(StartsWith(YamlError("matrix_lr: .nan\n"), "matrix_lr: expected a number"));
  EXPECT_TRUE(
      StartsWith(YamlError("value_embeddings: maybe\n"), "value_embeddings: expected a boolean"));
  EXPECT_TRUE(StartsWith(YamlError("adam_betas: 0.9\n"), "adam_betas: expected a pair of numbers"));
  EXPECT_TRUE(
      StartsWith(YamlError("adam_betas: [0.9]\n"), "adam_betas: expected a pair of numbers"));
  EXPECT_TRUE(StartsWith(YamlError("adam_betas: [0.9, x]\n"), "adam_betas[1]: expected a number"));
}

TEST(RecipeParse, NestedGarbageIsATypeError) {
  EXPECT_TRUE(
      StartsWith(YamlError("depth: {a: 1}\n"), "depth: expected an integer, got a mapping"));
  EXPECT_TRUE(
      StartsWith(YamlError("depth: [1, 2]\n"), "depth: expected an integer, got a sequence"));
  EXPECT_TRUE(StartsWith(YamlError("depth:\n"), "depth: expected an integer, got nothing"));
  EXPECT_TRUE(
      StartsWith(YamlError("adam_betas: [[0.1], 0.2]\n"), "adam_betas[0]: expected a number"));
  EXPECT_TRUE(StartsWith(YamlError("? [a, b]\n: 1\n"), "recipe: keys must be plain knob names"));
}

TEST(RecipeParse, DocumentShapeErrors) {
  EXPECT_TRUE(StartsWith(YamlError("- depth: 4\n"), "recipe: expected a mapping"));
  EXPECT_TRUE(StartsWith(YamlError("just text\n"), "recipe: expected a mapping"));
  EXPECT_TRUE(StartsWith(YamlError(""), "recipe: the document is empty"));
  EXPECT_TRUE(StartsWith(YamlError("depth: [1,\n"), "recipe: YAML syntax error"));
  const std::string dup = YamlError("depth: 4\nmatrix_lr: 0.1\ndepth: 6\n");
  EXPECT_TRUE(StartsWith(dup, "depth: duplicate key")) << dup;
  EXPECT_NE(dup.find("line 3"), std::string::npos) << dup;
  Recipe r;
  EXPECT_TRUE(ParseRecipeYaml("{}", &r).ok());
}

TEST(RecipeParse, OutOfRangeValuesNameTheFieldAndTheRange) {
  EXPECT_TRUE(StartsWith(YamlError("depth: 0\n"), "depth: must be in [1, 256], got 0"));
  EXPECT_TRUE(StartsWith(YamlError("depth: 99999999999999999999\n"), "depth: expected an integer"));
  EXPECT_TRUE(StartsWith(YamlError("depth: 3000000000\n"), "depth: must be in [1, 256]"));
  EXPECT_TRUE(StartsWith(YamlError("matrix_lr: -1\n"), "matrix_lr: must be in [0, "));
  EXPECT_TRUE(StartsWith(YamlError("time_budget_s: 0\n"), "time_budget_s: must be in (0, "));
  EXPECT_TRUE(
      StartsWith(YamlError("adam_betas: [0.8, 1.0]\n"), "adam_betas[1]: must be in [0, 1)"));
  EXPECT_TRUE(
      StartsWith(YamlError("adam_betas: [-0.1, 0.9]\n"), "adam_betas[0]: must be in [0, 1)"));
  EXPECT_TRUE(StartsWith(YamlError("muon_ns_steps: 6\n"), "muon_ns_steps: must be in [1, 5]"));
  EXPECT_TRUE(StartsWith(YamlError("head_dim: 63\n"), "head_dim: must be even"));
}

TEST(RecipeParse, EnumsListTheirChoices) {
  const std::string e = YamlError("activation: gelu\n");
  EXPECT_TRUE(StartsWith(e, "activation: must be one of relu2, swiglu, got 'gelu'")) << e;
  EXPECT_TRUE(StartsWith(YamlError("dtype: fp8\n"), "dtype: must be one of"));
  EXPECT_TRUE(
      StartsWith(YamlError("attention_backend: xformers\n"), "attention_backend: must be one of"));
  EXPECT_TRUE(StartsWith(YamlError("device: tpu\n"), "device: must be one of"));
  EXPECT_EQ(YamlError("dtype: Float32\n"), "");  // case-insensitive, stored lower-case
}

TEST(RecipeParse, ImpossibleCombinationsNameTheField) {
  // 1000 is not a multiple of 128 * 2048.
  EXPECT_TRUE(
      StartsWith(YamlError("total_batch_size: 1000\n"), "total_batch_size: must be a multiple"));
  // model_dim 512 / head_dim 128 = 4 heads; 3 kv heads do not divide them.
  EXPECT_TRUE(StartsWith(YamlError("n_kv_head: 3\n"), "n_kv_head: must divide n_head = 4"));
  EXPECT_TRUE(StartsWith(YamlError("n_kv_head: 8\n"), "n_kv_head: must divide n_head = 4"));
  EXPECT_TRUE(StartsWith(YamlError("kv_head_divisor: 3\n"), "kv_head_divisor: must divide n_head"));
  EXPECT_TRUE(StartsWith(YamlError("n_kv_head: 2\nkv_head_divisor: 2\n"), "n_kv_head: set either"));
  EXPECT_TRUE(
      StartsWith(YamlError("window_pattern: SSXL\n"), "window_pattern: letters must be S or L"));
  EXPECT_TRUE(StartsWith(YamlError("window_pattern: ''\n"), "window_pattern: must be a non-empty"));
  EXPECT_TRUE(StartsWith(YamlError("warmup_ratio: 0.6\n"),
                         "warmdown_ratio: warmup_ratio + warmdown_ratio"));
  EXPECT_TRUE(
      StartsWith(YamlError("eval_tokens: 1000\n"), "eval_tokens: must be at least one eval batch"));
  EXPECT_TRUE(StartsWith(YamlError("short_window_fraction: 0.0001\n"),
                         "short_window_fraction: the short window"));
  EXPECT_TRUE(
      StartsWith(YamlError("depth: 1\naspect_ratio: 16\nhead_dim: 16\n"), "value_embeddings:"));
  EXPECT_EQ(YamlError("depth: 1\naspect_ratio: 16\nhead_dim: 16\nvalue_embeddings: false\n"), "");
  EXPECT_EQ(YamlError("n_kv_head: 2\n"), "");
  EXPECT_EQ(YamlError("n_kv_head: 1\n"), "");  // MQA
}

TEST(RecipeParse, RecipeAgainstData) {
  Recipe r;
  EXPECT_TRUE(CheckRecipeAgainstData(r, 8192).ok());
  const Status s = CheckRecipeAgainstData(r, 32768);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(StartsWith(s.message(), "vocab_size: ")) << s.message();
  EXPECT_NE(s.message().find("32768"), std::string::npos);
}

TEST(RecipeOverride, SetsOneKnobFromYamlScalarText) {
  Recipe r;
  ASSERT_TRUE(ApplyOverride("matrix_lr", "0.03", &r).ok());
  EXPECT_DOUBLE_EQ(r.matrix_lr, 0.03);
  ASSERT_TRUE(ApplyOverride("adam_betas", "[0.8, 0.9]", &r).ok());
  EXPECT_DOUBLE_EQ(r.adam_betas[1], 0.9);
  ASSERT_TRUE(ApplyOverride("window_pattern", "SSSL", &r).ok());
  ASSERT_TRUE(ApplyOverride("value_embeddings", "false", &r).ok());
  EXPECT_FALSE(r.value_embeddings);
  ASSERT_TRUE(ApplyOverride("depth", "6", &r).ok());
  EXPECT_EQ(r.depth, 6);
  ASSERT_TRUE(ApplyOverride(" depth ", " 4 ", &r).ok());
  EXPECT_EQ(r.depth, 4);
  EXPECT_TRUE(StartsWith(ApplyOverride("", "4", &r).message(), "override: empty knob name"));
}

TEST(RecipeOverride, ErrorsNameTheKnobAndLeaveTheRecipeUnchanged) {
  Recipe r;
  Status s = ApplyOverride("matrx_lr", "0.03", &r);
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(StartsWith(s.message(), "matrx_lr: unknown knob")) << s.message();
  s = ApplyOverride("depth", "abc", &r);
  EXPECT_TRUE(StartsWith(s.message(), "depth: expected an integer, got 'abc'")) << s.message();
  // Valid alone, impossible in combination: rejected, recipe untouched.
  s = ApplyOverride("device_batch_size", "3", &r);
  EXPECT_TRUE(StartsWith(s.message(), "total_batch_size: must be a multiple")) << s.message();
  EXPECT_EQ(r.device_batch_size, 128);
  s = ApplyOverride("matrix_lr", "[1, 2", &r);
  EXPECT_TRUE(StartsWith(s.message(), "matrix_lr: cannot read")) << s.message();
  EXPECT_DOUBLE_EQ(r.matrix_lr, 0.04);
}

TEST(RecipeOverride, ManyOverridesAreValidatedTogether) {
  // Halving device_batch_size with total_batch_size: invalid one at a time when the total goes
  // first (65536 is not a multiple of 128 * 2048), valid together in either order.
  Recipe one_by_one;
  EXPECT_FALSE(ApplyOverride("total_batch_size", "65536", &one_by_one).ok());
  for (const bool total_first : {true, false}) {
    Recipe r;
    std::vector<std::pair<std::string, std::string>> o = {{"total_batch_size", "65536"},
                                                          {"device_batch_size", "32"}};
    if (!total_first) std::swap(o[0], o[1]);
    const Status s = ApplyOverrides(o, &r);
    ASSERT_TRUE(s.ok()) << s.ToString();
    EXPECT_EQ(r.total_batch_size, 65536);
    EXPECT_EQ(r.device_batch_size, 32);
  }
  Recipe r;
  Status s = ApplyOverrides({{"n_kv_head", "2"}, {"kv_head_divisor", "1"}}, &r);
  EXPECT_TRUE(s.ok()) << s.ToString();
  s = ApplyOverrides({{"matrix_lr", "0.1"}, {"matrix_lr", "0.2"}}, &r);
  EXPECT_TRUE(StartsWith(s.message(), "matrix_lr: overridden twice")) << s.message();
  s = ApplyOverrides({{"matrix_lr", "0.1"}, {"device_batch_size", "3"}}, &r);
  EXPECT_TRUE(StartsWith(s.message(), "total_batch_size: must be a multiple")) << s.message();
  EXPECT_DOUBLE_EQ(r.matrix_lr, 0.04);  // unchanged on error
}

TEST(RecipeJson, RoundTripsEveryKnob) {
  Recipe r;
  ASSERT_TRUE(ParseRecipeYaml("depth: 4\nmatrix_lr: 0.07\nadam_betas: [0.7, 0.9]\nseed: 7\n"
                              "activation: swiglu\nvalue_embeddings: false\ndtype: float32\n",
                              &r)
                  .ok());
  const nlohmann::json j = RecipeToJson(r);
  EXPECT_EQ(j.size(), RecipeKnobNames().size());
  Recipe back;
  ASSERT_TRUE(ParseRecipeJson(j, &back).ok());
  EXPECT_EQ(RecipeToJson(back), j);
  // The resolved form (with "derived") is accepted too.
  ResolvedSizes s;
  ASSERT_TRUE(ResolveSizes(r, &s).ok());
  Recipe from_resolved;
  ASSERT_TRUE(ParseRecipeJson(ResolvedConfigJson(r, s), &from_resolved).ok());
  EXPECT_EQ(RecipeToJson(from_resolved), j);
}

TEST(RecipeJson, ErrorsNameTheField) {
  Recipe r;
  auto error = [&](const char* text) {
    const Status s = ParseRecipeJson(nlohmann::json::parse(text), &r);
    return s.ok() ? std::string() : s.message();
  };
  EXPECT_TRUE(
      StartsWith(error(R"({"depth": "8"})"), "depth: expected an integer, got the string '8'"));
  EXPECT_TRUE(StartsWith(error(R"({"depth": 8.5})"), "depth: expected an integer, got 8.5"));
  EXPECT_TRUE(
      StartsWith(error(R"({"matrix_lr": null})"), "matrix_lr: expected a number, got null"));
  EXPECT_TRUE(StartsWith(error(R"({"adam_betas": [0.8]})"), "adam_betas: expected a pair"));
  EXPECT_TRUE(StartsWith(error(R"({"depht": 8})"), "depht: unknown knob (did you mean 'depth'?)"));
  EXPECT_TRUE(StartsWith(error(R"({"seed": 18446744073709551615})"), "seed: must be in"));
  EXPECT_TRUE(StartsWith(error(R"([1, 2])"), "recipe: expected a JSON object"));
  EXPECT_EQ(error(R"({"matrix_lr": 1})"), "");  // an integer is a fine number
}

TEST(RecipeKnobs, NamesAreUniqueAndDefaultsInRange) {
  const auto& names = RecipeKnobNames();
  EXPECT_EQ(names.size(), RecipeKnobTable().size());
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = i + 1; j < names.size(); ++j) EXPECT_NE(names[i], names[j]);
    EXPECT_NE(FindRecipeKnob(names[i]), nullptr);
  }
  for (const RecipeKnob& k : RecipeKnobTable()) {
    EXPECT_TRUE(CheckRecipeKnobRange(k, Recipe{}).ok()) << k.name << ": default out of its range";
  }
  EXPECT_TRUE(ValidateRecipe(Recipe{}).ok()) << ValidateRecipe(Recipe{}).ToString();
}

TEST(RecipeKnobs, EachKnobOwnsExactlyOneField) {
  // Setting a knob through the table changes that key of RecipeToJson and no other one, and the
  // value reads back: no two knobs alias one member, and no knob is wired to the wrong member.
  const Recipe base;
  const nlohmann::json before = RecipeToJson(base);
  for (const RecipeKnob& k : RecipeKnobTable()) {
    SCOPED_TRACE(k.name);
    const nlohmann::json other = testing::OtherKnobValue(k, before.at(k.name));
    ASSERT_NE(other, before.at(k.name));
    Recipe r = base;
    ASSERT_TRUE(SetRecipeKnobFromJson(k, other, &r).ok());
    const nlohmann::json after = RecipeToJson(r);
    for (const auto& item : before.items()) {
      if (item.key() == k.name) {
        EXPECT_EQ(after.at(item.key()), other);
      } else {
        EXPECT_EQ(after.at(item.key()), item.value()) << "also changed " << item.key();
      }
    }
  }
}

}  // namespace
}  // namespace xv
