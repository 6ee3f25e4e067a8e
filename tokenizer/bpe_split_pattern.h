// SplitPattern: the regex that cuts text into chunks before byte-pair merging (tiktoken's and
// rustbpe's "pre-tokenization"). Compiled with PCRE2 in UTF + UCP mode and JIT-compiled when the
// platform allows. Also: UTF-8 validation used by every entry point that accepts text.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace xv::tok {

// Returns OK when `text` is well-formed UTF-8 (no overlongs, no surrogates, <= U+10FFFF). Otherwise
// INVALID_ARGUMENT "invalid UTF-8 at byte offset N" and, when `bad_offset` is not null, sets it to
// N.
Status ValidateUtf8(std::string_view text, size_t* bad_offset = nullptr);

// Number of Unicode code points in valid UTF-8 `text` (counts lead bytes).
size_t CountCodePoints(std::string_view text);

// Byte length of the longest prefix of valid UTF-8 `text` holding at most `max_chars` code points.
size_t PrefixBytesForCodePoints(std::string_view text, size_t max_chars);

class SplitPattern {
 public:
  // Compiles `pattern`. Fails with INVALID_ARGUMENT naming the offset of the error in the pattern.
  static Status Compile(const std::string& pattern, std::unique_ptr<SplitPattern>* out);
  ~SplitPattern();
  SplitPattern(const SplitPattern&) = delete;
  SplitPattern& operator=(const SplitPattern&) = delete;

  // Calls `on_chunk(chunk)` for each successive match of the pattern in `text`, left to right,
  // exactly like tiktoken's / fancy-regex's find_iter (empty matches are skipped; text between
  // matches is not reported -- the upstream pattern matches every character). Requires: `text` is
  // valid UTF-8 (the caller validates; invalid UTF-8 is undefined behaviour in PCRE2's JIT).
  // Thread-safe: concurrent calls from different threads are fine (per-thread match data).
  void ForEachChunk(std::string_view text,
                    const std::function<void(std::string_view)>& on_chunk) const;

  // Same as ForEachChunk, templated for inlined callbacks on hot paths.
  template <typename F>
  void ForEach(std::string_view text, F&& on_chunk) const;

  const std::string& pattern() const { return pattern_; }
  bool jit() const { return jit_; }

 private:
  SplitPattern() = default;
  // Finds the next match at or after `start`; returns false when there is none. [*begin, *end) is
  // the match.
  bool NextMatch(std::string_view text, size_t start, size_t* begin, size_t* end) const;

  std::string pattern_;
  void* code_ = nullptr;  // pcre2_code_8*
  bool jit_ = false;
  uint64_t id_ = 0;  // distinguishes instances for per-thread match data
};

template <typename F>
void SplitPattern::ForEach(std::string_view text, F&& on_chunk) const {
  if (text.empty()) return;
  size_t pos = 0, begin = 0, end = 0;
  while (pos < text.size() && NextMatch(text, pos, &begin, &end)) {
    if (end > begin) {
      on_chunk(text.substr(begin, end - begin));
      pos = end;
    } else {
      // Empty match: advance by one code point (the upstream pattern never matches empty).
      pos = end + 1;
      while (pos < text.size() && (static_cast<unsigned char>(text[pos]) & 0xC0) == 0x80) ++pos;
    }
  }
}

}  // namespace xv::tok
