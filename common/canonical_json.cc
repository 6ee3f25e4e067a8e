// CanonicalJson: one text per JSON value, so that equal configs hash equally. Keys sorted
// (bytewise), no whitespace, integers as integers, floating-point numbers in their shortest
// round-trip text.
#include <cmath>
#include <map>
#include <string>

#include "common/recipe.h"
#include "common/shortest_double.h"

namespace xv {

namespace {

void AppendCanonical(const nlohmann::json& j, std::string* out) {
  switch (j.type()) {
    case nlohmann::json::value_t::object: {
      // nlohmann::json objects are std::map-ordered already; sort explicitly to not depend on it.
      std::map<std::string, const nlohmann::json*> sorted;
      for (const auto& item : j.items()) sorted[item.key()] = &item.value();
      out->push_back('{');
      bool first = true;
      for (const auto& [key, value] : sorted) {
        if (!first) out->push_back(',');
        first = false;
        out->append(nlohmann::json(key).dump());
        out->push_back(':');
        AppendCanonical(*value, out);
      }
      out->push_back('}');
      return;
    }
    case nlohmann::json::value_t::array: {
      out->push_back('[');
      for (size_t i = 0; i < j.size(); ++i) {
        if (i) out->push_back(',');
        AppendCanonical(j[i], out);
      }
      out->push_back(']');
      return;
    }
    case nlohmann::json::value_t::number_float: {
      const double v = j.get<double>();
      out->append(std::isfinite(v) ? ShortestDoubleText(v) : "null");
      return;
    }
    default:
      // null, booleans, integers and strings: nlohmann's compact form is already unique
      // (strings escaped the same way every time).
      out->append(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      return;
  }
}

}  // namespace

std::string CanonicalJson(const nlohmann::json& j) {
  std::string out;
  AppendCanonical(j, &out);
  return out;
}

}  // namespace xv
