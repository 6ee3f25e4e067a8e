#include "common/bounded_json_or_discarded.h"

namespace xv {

nlohmann::json ParseBoundedJsonOrDiscarded(std::string_view text, int max_depth) {
  nlohmann::json j;
  if (!ParseBoundedJson(text, "json", &j, max_depth).ok()) {
    return nlohmann::json(nlohmann::json::value_t::discarded);
  }
  return j;
}

}  // namespace xv
