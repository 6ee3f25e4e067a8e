// Garbage in: byte-level mutations of a valid recipe and of override values never crash the parser,
// and every rejection names where it comes from (a knob, "recipe", or "override") first.
#include <random>
#include <string>

#include <gtest/gtest.h>

#include "common/recipe.h"
#include "common/recipe_knobs.h"
#include "recipe_test_files.h"

namespace xv {
namespace {

// True when `message` starts with "<knob>:" or "<knob>[i]:" for a known knob, or "recipe:" /
// "override:".
bool NamesItsField(const std::string& message) {
  if (message.rfind("recipe: ", 0) == 0 || message.rfind("override: ", 0) == 0) return true;
  const size_t end = message.find_first_of(":[");
  if (end == std::string::npos) return false;
  const std::string field = message.substr(0, end);
  if (FindRecipeKnob(field) != nullptr) return true;
  // Unknown keys are named as written: "<key>: unknown knob" / "<key>: duplicate key".
  return message.find(": unknown knob") != std::string::npos ||
         message.find(": duplicate key") != std::string::npos;
}

TEST(RecipeGarbageInput, MutatedYamlIsRejectedWithAFieldOrParsed) {
  const std::string original = testing::ReadSourceFile("recipes/amdsense-round5.yaml");
  ASSERT_FALSE(original.empty());
  const std::string alphabet = "SL[]{}:,-'\"#!&*|>?%@` \n\t0123456789.eE+xyz\\";
  std::mt19937 rng(1234);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string text = original;
    const int edits = 1 + static_cast<int>(rng() % 4);
    for (int e = 0; e < edits; ++e) {
      const size_t pos = rng() % text.size();
      switch (rng() % 3) {
        case 0:
          text[pos] = alphabet[rng() % alphabet.size()];
          break;
        case 1:
          text.insert(pos, 1, alphabet[rng() % alphabet.size()]);
          break;
        default:
          text.erase(pos, 1 + rng() % 8);
          break;
      }
      if (text.empty()) text = "x";
    }
    Recipe r;
    const Status s = ParseRecipeYaml(text, &r);
    if (s.ok()) {
      EXPECT_TRUE(ValidateRecipe(r).ok()) << text;
    } else {
      ++rejected;
      EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
      EXPECT_TRUE(NamesItsField(s.message())) << s.message() << "\n--- input ---\n" << text;
    }
  }
  EXPECT_GT(rejected, 100);  // the mutations do reach the error paths
}

TEST(RecipeGarbageInput, OverrideValuesOfEveryShape) {
  const char* values[] = {"",        "~",        "[",          "]",         "{a: 1}", "[1, [2]]",
                          "- 1",     "&a 1",     "*a",         "!!int 3",   "0x10",   "1_000",
                          "1e400",   "-1e400",   ".inf",       "NaN",       "  7  ",  "'0.1'",
                          "\"SSL\"", "[0.5, 1]", "[0.5, 0.5]", "true",      "on",     "? a",
                          "a: b: c", "|\n  x",   "\t",         "%YAML 1.2", "S L",    "sssl"};
  for (const std::string& key : RecipeKnobNames()) {
    for (const char* v : values) {
      Recipe r;
      const std::string before = RecipeToJson(r).dump();
      const Status s = ApplyOverride(key, v, &r);
      if (!s.ok()) {
        EXPECT_TRUE(s.message().rfind(key, 0) == 0 || NamesItsField(s.message()))
            << key << " = " << v << ": " << s.message();
        EXPECT_EQ(RecipeToJson(r).dump(), before) << key << " = " << v;
      } else {
        EXPECT_TRUE(ValidateRecipe(r).ok()) << key << " = " << v;
      }
    }
  }
}

}  // namespace
}  // namespace xv
