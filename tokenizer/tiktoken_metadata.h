// The tokenizer's small JSON files beside the ranks:
//  tokenizer.json:   {"pattern": "...", "special_tokens": {"<|reserved_0|>": 8188, ...},
//                     "bos": "<|reserved_0|>", "bos_id": 8188, "n_ranks": 8188, "vocab_size": 8192}
//                    (the shape of the reference tokenizer_ref.json, which this reader also
//                    accepts)
//  token_bytes.json: a JSON array with the raw byte length of every id, 0 for specials
//                    (an object with a "token_bytes" array is accepted when reading).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace xv::tok {

struct TokenizerMeta {
  std::string pattern;
  std::vector<std::string> specials;  // special i has id n_ranks + i
  std::string bos;                    // one of specials
  uint32_t n_ranks = 0;
  uint32_t vocab_size = 0;  // n_ranks + specials.size()
  uint32_t bos_id = 0;
};

// Writes tokenizer.json atomically.
Status WriteTokenizerMeta(const std::string& path, const TokenizerMeta& meta);
// Reads tokenizer.json. Requires "pattern" and "special_tokens" (ids consecutive from n_ranks);
// "bos" defaults to the lowest special. Errors name the file and the field.
Status ReadTokenizerMeta(const std::string& path, TokenizerMeta* meta);

// Writes token_bytes.json atomically.
Status WriteTokenBytes(const std::string& path, const std::vector<int32_t>& token_bytes);
// Reads token_bytes.json; errors name the file and the index of a bad entry.
Status ReadTokenBytes(const std::string& path, std::vector<int32_t>* token_bytes);

// Writes `content` to `path` atomically: a temp file beside it, fsync, rename. Nothing is left
// behind on failure.
Status WriteFileAtomically(const std::string& path, const std::string& content);

}  // namespace xv::tok
