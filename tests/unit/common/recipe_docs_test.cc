// docs/recipe.md is written from the knob table: every knob is documented, with the table's
// default, unit and range (the generated reference is embedded verbatim).
#include <cstdlib>
#include <fstream>

#include <gtest/gtest.h>

#include "common/recipe.h"
#include "common/recipe_knobs.h"
#include "recipe_test_files.h"

namespace xv {
namespace {

TEST(RecipeDocs, EveryKnobIsDocumented) {
  const std::string doc = testing::ReadSourceFile("docs/recipe.md");
  ASSERT_FALSE(doc.empty());
  for (const std::string& name : RecipeKnobNames()) {
    EXPECT_NE(doc.find("| `" + name + "` |"), std::string::npos)
        << name << " missing from docs/recipe.md";
  }
}

TEST(RecipeDocs, KnobReferenceIsGeneratedFromTheTable) {
  const std::string doc = testing::ReadSourceFile("docs/recipe.md");
  const std::string generated = RecipeKnobsMarkdown();
  if (doc.find(generated) == std::string::npos) {
    // Leave the expected text where a person can paste it from.
    const char* binary_dir = std::getenv("XV_BINARY_DIR");
    const std::string out = std::string(binary_dir ? binary_dir : ".") + "/recipe-knobs.md";
    std::ofstream(out) << generated;
    ADD_FAILURE() << "docs/recipe.md does not contain the knob reference generated from the table; "
                     "the expected text is in "
                  << out;
  }
}

}  // namespace
}  // namespace xv
