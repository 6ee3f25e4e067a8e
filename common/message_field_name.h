// A key or name taken from outside (a JSON object key, a YAML key, a tool name) as it may appear
// in an error message's field path: verbatim when it is short printable UTF-8, otherwise a short
// quoted excerpt with its size, so that "budget.time_budjet_s: unknown field" stays readable and a
// 1 MiB key or one holding ESC never reaches a message whole. Thread-safety: pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace xv {

// At most this many bytes of a key are shown verbatim.
inline constexpr size_t kMaxFieldNameBytes = 64;

// `key` itself when it is valid UTF-8 of at most kMaxFieldNameBytes bytes without control
// characters; QuoteExcerpt(key, kMaxFieldNameBytes) otherwise ("\"abc…\" (1048576 bytes)").
std::string FieldNameForMessage(std::string_view key);

}  // namespace xv
