#include "knob_value_mutation.h"

#include <cmath>
#include <string>

namespace xv::testing {

namespace {

bool Inside(const RecipeKnob& k, double v) {
  const bool lo = k.min_exclusive ? v > k.min : v >= k.min;
  const bool hi = k.max_exclusive ? v < k.max : v <= k.max;
  return lo && hi;
}

double OtherNumber(const RecipeKnob& k, double current) {
  for (double v : {current * 0.5, current + 0.01, current - 0.01, current + 1, current - 1}) {
    if (v != current && Inside(k, v)) return v;
  }
  return current;  // cannot happen for the table's ranges; the caller's assertion catches it
}

}  // namespace

nlohmann::json OtherKnobValue(const RecipeKnob& knob, const nlohmann::json& current) {
  if (current.is_boolean()) return !current.get<bool>();
  if (current.is_string()) {
    const std::string s = current.get<std::string>();
    if (knob.choices.empty()) return s == "SSSL" ? "SL" : "SSSL";
    for (const std::string& c : knob.choices) {
      if (c != s) return c;
    }
    return s;
  }
  if (current.is_array()) {
    return nlohmann::json::array({OtherNumber(knob, current[0].get<double>()), current[1]});
  }
  if (current.is_number_integer()) {
    const int64_t v = current.get<int64_t>();
    return Inside(knob, static_cast<double>(v + 1)) ? v + 1 : v - 1;
  }
  return OtherNumber(knob, current.get<double>());
}

}  // namespace xv::testing
