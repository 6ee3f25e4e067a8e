// Text that came from outside the process (requests, trainer output, files, worker messages):
// UTF-8 discipline, code-point-safe truncation, length limits with errors that name the field, and
// quoting that never echoes more than a short, printable excerpt. Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"

namespace xv {

// Length limits of the API's string fields, in bytes of UTF-8.
inline constexpr size_t kMaxNameBytes =
    200;  // names: candidates, campaigns, plans, workers, recipes
inline constexpr size_t kMaxKindBytes =
    64;  // kinds and enum-like words: failure_kind, state, trainer
inline constexpr size_t kMaxDetailBytes =
    16384;  // details: failure_detail, error messages, stderr tails
inline constexpr size_t kMaxQuoteBytes =
    200;  // how much of an input an error or log line may quote

// True when `s` is well-formed UTF-8 (no overlongs, no surrogates, nothing above U+10FFFF).
bool IsValidUtf8(std::string_view s);

// `s` with every ill-formed sequence replaced by U+FFFD (one per maximal ill-formed subpart, as
// the Unicode standard recommends). Valid input comes back unchanged.
std::string SanitizeUtf8(std::string_view s);

// The longest prefix of `s` of at most `max_bytes` bytes that does not end inside a code point.
// `s` is expected to be valid UTF-8 (sanitize first); on invalid input it still never splits a
// well-formed sequence.
std::string_view Utf8Prefix(std::string_view s, size_t max_bytes);

// The longest suffix of `s` of at most `max_bytes` bytes that starts on a code-point boundary.
std::string_view Utf8Suffix(std::string_view s, size_t max_bytes);

// SanitizeUtf8 then Utf8Prefix: always valid UTF-8 of at most `max_bytes` bytes.
std::string SanitizeAndTruncateUtf8(std::string_view s, size_t max_bytes);

// True when `s` holds a C0 control (U+0000-U+001F), DEL (U+007F) or a C1 control (U+0080-U+009F,
// encoded as C2 80..C2 9F). Names must not hold any.
bool HasControlCharacters(std::string_view s);

// `s` made safe to print on a terminal: sanitized to UTF-8, then every C0, DEL and C1 control
// written as an escape ("\n", "\t", "\x1b", "\u009b"). Tabs and newlines are escaped too unless
// `keep_newlines_and_tabs` (multi-line text such as a stderr tail printed as a block).
std::string EscapeForTerminal(std::string_view s, bool keep_newlines_and_tabs = false);

// A short, printable, quoted excerpt of untrusted input for an error message or a log line:
// "\"abc\"" or "\"abcd…\" (1048576 bytes)". At most about `max_bytes` of the input are quoted.
std::string QuoteExcerpt(std::string_view s, size_t max_bytes = kMaxQuoteBytes);

// Checks an API string field before anything is stored: valid UTF-8, at most `max_bytes` bytes,
// and, when `is_name`, no control characters. The error is INVALID_ARGUMENT and names `field`:
// "candidates[3].name: 1048576 bytes, over the limit of 200 (use a shorter name)".
Status CheckTextField(std::string_view field, std::string_view value, size_t max_bytes,
                      bool is_name);

}  // namespace xv
