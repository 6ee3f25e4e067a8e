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

TEST(RecipeGarbageInput, DeepNestingAndHugeDocumentsAreRefusedNamingTheRecipe) {
  Recipe r;
  // Flow nesting: refused by the pre-scan, whatever the depth (100,000 levels is 200 KB).
  for (const std::string& text :
       {"matrix_lr: " + std::string(100000, '[') + std::string(100000, ']') + "\n",
        "adam_betas: " + std::string(65, '{') + "\n", std::string(100000, '[')}) {
    Status s = ParseRecipeYaml(text, &r);
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message().rfind("recipe: nested deeper than 64 levels of [ ] and { }", 0), 0u)
        << s.message();
  }
  // Brackets inside quotes and comments are not nesting.
  const Status quoted =
      ParseRecipeYaml("# " + std::string(1000, '[') + "\nwindow_pattern: \"SSSL\"  # " +
                          std::string(100, '{') + "\n",
                      &r);
  EXPECT_TRUE(quoted.ok()) << quoted.message();
  // Block nesting: yaml-cpp's own depth guard, reported as the recipe's.
  std::string block;
  for (int i = 0; i < 1000; ++i) block += std::string(i, ' ') + "k:\n";
  Status s = ParseRecipeYaml(block, &r);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("recipe: nested too deep for a recipe", 0), 0u) << s.message();
  std::string dashes;
  for (int i = 0; i < 100000; ++i) dashes += "- ";
  s = ParseRecipeYaml(dashes + "x\n", &r);
  EXPECT_EQ(s.message().rfind("recipe: nested too deep for a recipe", 0), 0u) << s.message();
  // Over 1 MiB: refused by size before parsing.
  s = ParseRecipeYaml("# " + std::string(1 << 20, 'x') + "\ndepth: 2\n", &r);
  EXPECT_EQ(s.message().rfind("recipe: 1048588 bytes, over the limit of 1048576", 0), 0u)
      << s.message();
  // An override value nested deep.
  s = ApplyOverride("adam_betas", std::string(100000, '[') + std::string(100000, ']'), &r);
  EXPECT_EQ(s.message(), "adam_betas: the value is nested deeper than 64 levels of [ ] and { }");
}

TEST(RecipeGarbageInput, AFileThatIsNotARecipeIsNotQuotedBack) {
  // A whole file as one scalar (what /etc/passwd reads as): its size, never its text.
  const std::string file = "root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1::/usr/sbin:/nologin\n";
  Recipe r;
  Status s = ParseRecipeYaml(file, &r);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().find("root:x"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("got a scalar of"), std::string::npos) << s.message();
  // An unknown key longer than a field name: a short escaped excerpt with its size.
  s = ParseRecipeYaml("? " + std::string(5000, 'k') + "\n: 1\n", &r);
  EXPECT_NE(s.message().find("(5000 bytes): unknown knob"), std::string::npos) << s.message();
  EXPECT_LT(s.message().size(), 300u);
  // An unreadable override value is quoted short.
  s = ApplyOverride("matrix_lr", "[" + std::string(5000, 'v') + " : : ]]", &r);
  EXPECT_LT(s.message().size(), 400u) << s.message();
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
