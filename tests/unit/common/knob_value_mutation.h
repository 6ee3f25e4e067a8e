// For tests that touch every knob: a value of a knob that differs from the current one and is
// inside the knob's range (the combination checks may still reject it).
#pragma once

#include <nlohmann/json.hpp>

#include "common/recipe_knobs.h"

namespace xv::testing {

// A JSON value for `knob`, different from `current` (the knob's value as RecipeKnobToJson gives it)
// and inside the knob's type and range.
nlohmann::json OtherKnobValue(const RecipeKnob& knob, const nlohmann::json& current);

}  // namespace xv::testing
