// The ranks file in tiktoken's text format: one "<base64 of the token bytes> <rank>" per line,
// ranks 0..n-1 (Python: tiktoken.load.load_tiktoken_bpe reads it). xv requires dense ranks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace xv::tok {

// ranks[r] = the bytes of the token with rank r.
using TokenRanks = std::vector<std::string>;

std::string Base64Encode(std::string_view bytes);
// Standard alphabet with '=' padding. Fails with INVALID_ARGUMENT on any other input.
Status Base64Decode(std::string_view text, std::string* bytes);

// Writes `ranks` atomically (temp file in the same directory, then rename).
Status WriteTiktokenRanks(const std::string& path, const TokenRanks& ranks);

// Reads a ranks file. Errors name the file and line: malformed line, bad base64, a rank that is not
// the next one (ranks must be 0, 1, 2, ... in file order), a duplicate token (and the line it
// duplicates), an empty token, an empty file.
Status ReadTiktokenRanks(const std::string& path, TokenRanks* ranks);
// Same, from text in memory; `name` is used in error messages.
Status ParseTiktokenRanks(std::string_view text, const std::string& name, TokenRanks* ranks);

}  // namespace xv::tok
