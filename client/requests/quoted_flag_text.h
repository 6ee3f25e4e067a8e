// A flag's text (--set, --candidate, --sweep, or an MCP argument built into one) as an error quotes
// it: 'text' as typed when it is short printable UTF-8, otherwise a short escaped excerpt with its
// size, so that a 64 KiB argument or one holding ESC never comes back whole.
// Thread-safety: pure function.
#pragma once

#include <string>

namespace xv::client {

// "'matrix_lr=0.03'" for short printable text; QuoteExcerpt's "\"abc…\" (65536 bytes)" otherwise.
std::string QuotedFlagText(const std::string& text);

}  // namespace xv::client
