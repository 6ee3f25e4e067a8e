// Parsing JSON that came from outside the process (requests, recipes, trainer events, MCP
// arguments) with a nesting limit, so that no input can make a parser, dump() or a destructor
// recurse without bound, and describing values without dumping them into messages.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace xv {

// Deep enough for every document xv itself writes (recipes, events, policies, plans nest < 10).
inline constexpr int kMaxJsonDepth = 64;

// Parses `text` into `*out`. Refuses, without recursing, text nested deeper than `max_depth`
// arrays/objects, and text that is not JSON. Errors are INVALID_ARGUMENT and start with `what`
// (a field path such as "budget_json"): "budget_json: nested deeper than 64 levels" or
// "budget_json: not JSON (syntax error at byte 17)". Never quotes the input.
Status ParseBoundedJson(std::string_view text, std::string_view what, nlohmann::json* out,
                        int max_depth = kMaxJsonDepth);

// The nesting depth of JSON text (0 for a scalar), counted by a linear scan that skips strings;
// stops counting once it passes `stop_after`. Exposed for tests and for callers that only check.
int JsonNestingDepth(std::string_view text, int stop_after = kMaxJsonDepth + 1);

// What a value is, for error messages, without its contents: "an object", "an array of 3",
// "a string of 12 bytes", "a number (-3.5)", "true", "null".
std::string DescribeJsonValue(const nlohmann::json& v);

// dump() that cannot throw on invalid UTF-8 in strings (invalid bytes become U+FFFD), and whose
// text is safe on a terminal: DEL and the C1 controls are written as \u escapes like the C0 ones.
// Use for any value holding text that came from outside, and for every JSON xvctl prints.
std::string DumpJsonLossless(const nlohmann::json& v, int indent = -1);

}  // namespace xv
