// BpeTokenizer: byte-level BPE encoding that gives exactly tiktoken's Encoding.encode_ordinary ids
// for the same mergeable ranks and split pattern, and decoding back to bytes.
//
// Semantics (tiktoken): the text is split into chunks by the pattern; a chunk whose bytes are a
// token is that token; otherwise its bytes start as single-byte tokens and the adjacent pair whose
// concatenated bytes have the lowest rank is merged (the leftmost one on ties) until no adjacent
// pair is a token. Ids: rank r of the ranks file is id r; special token i has id n_ranks() + i;
// vocab_size() counts both.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/status.h"
#include "tokenizer/bpe_split_pattern.h"
#include "tokenizer/tiktoken_ranks.h"

namespace xv::tok {

class BpeTokenizer {
 public:
  // Loads the ranks file (tiktoken text format) and, when `meta_json_path` is not empty,
  // tokenizer.json (pattern, special tokens, bos; see tiktoken_metadata.h). Without metadata the
  // upstream pattern and the four reserved specials are used. Errors name the file (and line) at
  // fault.
  static Status Load(const std::string& ranks_path, const std::string& meta_json_path,
                     std::unique_ptr<BpeTokenizer>* out);

  // Builds a tokenizer from dense ranks (ranks[r] = bytes of rank r). Requires every single byte to
  // be a token (as byte-level BPE ranks always are), no duplicate byte strings, and specials that
  // are not empty and distinct. `bos_token` must be one of `specials` (or empty for "first special,
  // if any").
  static Status FromRanks(TokenRanks ranks, std::string pattern, std::vector<std::string> specials,
                          std::unique_ptr<BpeTokenizer>* out, const std::string& bos_token = "");

  ~BpeTokenizer();
  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  // tiktoken's encode_ordinary (special tokens in the text are encoded as ordinary text).
  // Requires valid UTF-8 for tiktoken-exact ids; invalid byte sequences never crash: each maximal
  // invalid run is emitted as single-byte tokens and the valid text around it is encoded normally.
  // Thread-safe: any number of threads may encode concurrently (per-thread match data and chunk
  // cache; the cache holds chunks of up to 22 bytes and takes at most 8 MB per thread and
  // tokenizer, for the last 4 tokenizers a thread used).
  std::vector<uint32_t> EncodeOrdinary(std::string_view text) const;
  // Appends the ids of `text` to `*ids` (same semantics as EncodeOrdinary).
  void EncodeOrdinaryAppend(std::string_view text, std::vector<uint32_t>* ids) const;
  // Like EncodeOrdinary but rejects invalid UTF-8 with INVALID_ARGUMENT naming the byte offset.
  Status EncodeOrdinaryChecked(std::string_view text, std::vector<uint32_t>* ids) const;

  // Concatenates the bytes of `ids` (specials decode to their text). Fails with INVALID_ARGUMENT
  // naming the position of an id >= vocab_size(). The result may be invalid UTF-8 when the ids
  // split a character.
  Status Decode(const std::vector<uint32_t>& ids, std::string* bytes) const;

  // Raw byte length of every id in [0, vocab_size()), 0 for special tokens (upstream token_bytes).
  std::vector<int32_t> TokenByteLengths() const;

  uint32_t n_ranks() const { return static_cast<uint32_t>(ranks_.size()); }
  uint32_t vocab_size() const { return n_ranks() + static_cast<uint32_t>(specials_.size()); }
  // Id of the BOS special; vocab_size() when the tokenizer has no specials.
  uint32_t bos_id() const { return bos_id_; }
  const std::string& pattern() const { return split_->pattern(); }
  const std::vector<std::string>& specials() const { return specials_; }
  const TokenRanks& ranks() const { return ranks_; }
  // Rank of a byte string, or -1 when it is not a token.
  int64_t RankOf(std::string_view bytes) const;

 private:
  BpeTokenizer() = default;
  struct Impl;
  // Encodes one chunk (a pattern match) and appends its ids; `cache` is this thread's chunk cache.
  void EncodeChunk(std::string_view chunk, void* cache, std::vector<uint32_t>* ids) const;
  void EncodeValidUtf8(std::string_view text, std::vector<uint32_t>* ids) const;

  TokenRanks ranks_;
  std::vector<std::string> specials_;
  uint32_t bos_id_ = 0;
  std::unique_ptr<SplitPattern> split_;
  std::unique_ptr<Impl> impl_;
  uint64_t instance_id_ = 0;
};

}  // namespace xv::tok
