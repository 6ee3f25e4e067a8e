#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/bpe_split_pattern.h"

#include <pcre2.h>

#include <atomic>
#include <string>

namespace xv::tok {

namespace {

// Per-thread PCRE2 state: match data (one ovector pair is all we read), a JIT stack large enough
// for long runs of whitespace or letters, and the match context that hands the stack to the JIT.
struct ThreadMatchState {
  pcre2_match_data* match_data = nullptr;
  pcre2_jit_stack* jit_stack = nullptr;
  pcre2_match_context* match_context = nullptr;
  ThreadMatchState() {
    match_data = pcre2_match_data_create(1, nullptr);
    match_context = pcre2_match_context_create(nullptr);
    jit_stack = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (jit_stack != nullptr) pcre2_jit_stack_assign(match_context, nullptr, jit_stack);
  }
  ~ThreadMatchState() {
    pcre2_match_data_free(match_data);
    pcre2_match_context_free(match_context);
    if (jit_stack != nullptr) pcre2_jit_stack_free(jit_stack);
  }
};

ThreadMatchState& MatchState() {
  thread_local ThreadMatchState state;
  return state;
}

}  // namespace

Status ValidateUtf8(std::string_view text, size_t* bad_offset) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // Fast path: 8 ASCII bytes at a time.
    while (i + 8 <= n) {
      uint64_t word;
      __builtin_memcpy(&word, s + i, 8);
      if (word & 0x8080808080808080ULL) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = s[i];
    size_t len = 0;
    uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
      cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      cp = c & 0x0F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      cp = c & 0x07;
    } else {
      len = 0;
    }
    bool ok = len != 0 && i + len <= n;
    for (size_t k = 1; ok && k < len; ++k) {
      if ((s[i + k] & 0xC0) != 0x80) {
        ok = false;
      } else {
        cp = (cp << 6) | (s[i + k] & 0x3F);
      }
    }
    if (ok) {
      if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
          (len == 4 && (cp < 0x10000 || cp > 0x10FFFF))) {
        ok = false;
      }
    }
    if (!ok) {
      if (bad_offset != nullptr) *bad_offset = i;
      return Status::InvalidArgument("invalid UTF-8 at byte offset " + std::to_string(i));
    }
    i += len;
  }
  return Status::Ok();
}

size_t CountCodePoints(std::string_view text) {
  size_t count = 0;
  for (char c : text) count += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return count;
}

size_t PrefixBytesForCodePoints(std::string_view text, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      if (chars == max_chars) return i;
      ++chars;
    }
  }
  return text.size();
}

Status SplitPattern::Compile(const std::string& pattern, std::unique_ptr<SplitPattern>* out) {
  int error_code = 0;
  PCRE2_SIZE error_offset = 0;
  pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                   PCRE2_UTF | PCRE2_UCP, &error_code, &error_offset, nullptr);
  if (code == nullptr) {
    PCRE2_UCHAR buffer[256];
    pcre2_get_error_message(error_code, buffer, sizeof(buffer));
    return Status::InvalidArgument(
        "split pattern: " + std::string(reinterpret_cast<char*>(buffer)) + " at pattern offset " +
        std::to_string(error_offset));
  }
  static std::atomic<uint64_t> next_id{1};
  std::unique_ptr<SplitPattern> split(new SplitPattern());
  split->pattern_ = pattern;
  split->code_ = code;
  split->jit_ = pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) == 0;
  split->id_ = next_id.fetch_add(1);
  *out = std::move(split);
  return Status::Ok();
}

SplitPattern::~SplitPattern() {
  if (code_ != nullptr) pcre2_code_free(static_cast<pcre2_code*>(code_));
}

bool SplitPattern::NextMatch(std::string_view text, size_t start, size_t* begin,
                             size_t* end) const {
  ThreadMatchState& state = MatchState();
  auto* code = static_cast<pcre2_code*>(code_);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  int rc;
  if (jit_) {
    rc = pcre2_jit_match(code, subject, text.size(), start, 0, state.match_data,
                         state.match_context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                       state.match_data, nullptr);
    }
  } else {
    rc = pcre2_match(code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, state.match_data,
                     nullptr);
  }
  if (rc < 0) return false;
  const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(state.match_data);
  *begin = ovector[0];
  *end = ovector[1];
  return true;
}

void SplitPattern::ForEachChunk(std::string_view text,
                                const std::function<void(std::string_view)>& on_chunk) const {
  ForEach(text, on_chunk);
}

}  // namespace xv::tok
