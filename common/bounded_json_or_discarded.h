// The drop-in bounded form of `nlohmann::json::parse(text, nullptr, false)` for callers that only
// need "a value or nothing" (stored JSON read back, trainer lines, daemon replies shown by xvctl):
// text nested deeper than the limit is treated like text that is not JSON, so no later dump(),
// copy or destructor can recurse without bound. Callers that report the refusal use
// ParseBoundedJson (common/bounded_json.h), whose error names the field.
// Thread-safety: pure function.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"

namespace xv {

// The parsed value, or a value whose is_discarded() is true when `text` is not JSON or nests
// deeper than `max_depth` arrays/objects. Never throws.
nlohmann::json ParseBoundedJsonOrDiscarded(std::string_view text, int max_depth = kMaxJsonDepth);

}  // namespace xv
