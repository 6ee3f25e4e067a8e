// The recipe knob table: the one place that names every knob of xv::Recipe with its type, default,
// unit, allowed range and a one-line doc. YAML parsing, JSON parsing, ApplyOverride,
// RecipeKnobNames, range validation and docs/recipe.md are all driven from it. Thread-safety: the
// table is built once (function-local static) and read-only afterwards.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include <yaml-cpp/yaml.h>
#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "common/status.h"

namespace xv {

// Where a knob's value lives in Recipe; the alternative held decides the knob's value type.
using RecipeField = std::variant<int Recipe::*, int64_t Recipe::*, double Recipe::*, bool Recipe::*,
                                 std::string Recipe::*, std::array<double, 2> Recipe::*>;

struct RecipeKnob {
  const char* name;     // YAML/JSON key
  RecipeField field;    // member of Recipe
  const char* unit;     // "" when dimensionless
  const char* section;  // "model", "batch", "optimizer", "run" (docs grouping)
  const char* doc;      // one line
  // Numeric range (ints, doubles, each element of a pair). Ignored for bool and string knobs.
  double min = 0, max = 0;
  bool min_exclusive = false, max_exclusive = false;
  // String knobs: the allowed values (enum). Empty for free-form strings (window_pattern).
  std::vector<std::string> choices;
};

// Every knob, in documentation order. Never empty; names are unique.
const std::vector<RecipeKnob>& RecipeKnobTable();
// The knob named `name`, or nullptr.
const RecipeKnob* FindRecipeKnob(const std::string& name);
// The knob name closest to `name` by edit distance ("" when nothing is reasonably close).
std::string ClosestRecipeKnobName(const std::string& name);

// Type name for messages and docs: "integer", "number", "boolean", "string", "one of a|b",
// "pair of numbers".
std::string RecipeKnobTypeName(const RecipeKnob& knob);
// The allowed range as text for messages and docs: "[1, 256]", "(0, 1e6]", "relu2, swiglu".
std::string RecipeKnobRangeText(const RecipeKnob& knob);

// Sets `knob` in `*recipe` from a YAML node (a scalar, or a two-element sequence for pairs),
// checking the type and range. Errors start with the knob name: "depth: expected an integer, got
// 'abc'".
Status SetRecipeKnobFromYaml(const RecipeKnob& knob, const YAML::Node& node, Recipe* recipe);
// Same from a JSON value.
Status SetRecipeKnobFromJson(const RecipeKnob& knob, const nlohmann::json& value, Recipe* recipe);
// The knob's current value in `recipe` as JSON.
nlohmann::json RecipeKnobToJson(const RecipeKnob& knob, const Recipe& recipe);
// Checks the knob's current value in `recipe` against its range/choices.
Status CheckRecipeKnobRange(const RecipeKnob& knob, const Recipe& recipe);

// The knob reference of docs/recipe.md: one Markdown table per section, generated from the table
// above (name, type, default, unit, range, doc). docs/recipe.md must contain it verbatim.
std::string RecipeKnobsMarkdown();

}  // namespace xv
