// Fuzz target: recipe YAML and single overrides (common/recipe.h).
#include <string>

#include "common/recipe.h"
#include "common/recipe_knobs.h"
#include "fuzz_driver.h"
#include "fuzz_targets.h"

namespace xv::fuzz {

namespace {

// A refusal names where it comes from first: a knob ("matrix_lr: ...", "adam_betas[1]: ..."),
// "recipe: " or "override: ", or the unknown/duplicate key as written.
bool NamesItsField(const std::string& message) {
  if (message.rfind("recipe: ", 0) == 0 || message.rfind("override: ", 0) == 0) return true;
  const size_t end = message.find_first_of(":[");
  if (end == std::string::npos) return false;
  if (FindRecipeKnob(message.substr(0, end)) != nullptr) return true;
  return message.find(": unknown knob") != std::string::npos ||
         message.find(": duplicate key") != std::string::npos;
}

void CheckAccepted(const Recipe& r, const std::string& what) {
  const Status valid = ValidateRecipe(r);
  XV_FUZZ_CHECK(valid.ok(), what + " accepted a recipe that does not validate: " + valid.message());
  ResolvedSizes sizes;
  const Status resolved = ResolveSizes(r, &sizes);
  XV_FUZZ_CHECK(resolved.ok(),
                what + " accepted a recipe whose sizes do not resolve: " + resolved.message());
  Recipe again;
  const Status reparsed = ParseRecipeJson(RecipeToJson(r), &again);
  XV_FUZZ_CHECK(reparsed.ok(), what + ": RecipeToJson does not parse back: " + reparsed.message());
  XV_FUZZ_CHECK(CanonicalHash(again) == CanonicalHash(r),
                what + ": the JSON round trip changes the canonical hash");
}

}  // namespace

int FuzzRecipeYaml(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);

  Recipe r;
  const Status parsed = ParseRecipeYaml(text, &r);
  if (parsed.ok()) {
    CheckAccepted(r, "ParseRecipeYaml");
  } else {
    XV_FUZZ_CHECK(parsed.code() == Status::Code::kInvalidArgument,
                  "ParseRecipeYaml refused with " + parsed.ToString());
    XV_FUZZ_CHECK(NamesItsField(parsed.message()),
                  "the refusal does not name its field: " + parsed.message());
  }

  // The same bytes as one override "key=value" on the default recipe.
  const size_t eq = text.find('=');
  if (eq != std::string::npos) {
    Recipe base;
    static const std::string before = CanonicalHash(Recipe());
    const Status applied = ApplyOverride(text.substr(0, eq), text.substr(eq + 1), &base);
    if (applied.ok()) {
      CheckAccepted(base, "ApplyOverride");
    } else {
      XV_FUZZ_CHECK(CanonicalHash(base) == before, "a refused override changed the recipe");
      XV_FUZZ_CHECK(NamesItsField(applied.message()),
                    "the override refusal does not name its field: " + applied.message());
    }
  }
  return 0;
}

}  // namespace xv::fuzz
