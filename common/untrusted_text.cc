#include "common/untrusted_text.h"

#include <cstdint>
#include <cstdio>
#include <cstring>

namespace xv {
namespace {

// Length of the well-formed UTF-8 sequence starting at s[i], or 0 when the bytes there are not
// one. `*subpart` receives the length of the maximal ill-formed subpart to skip (>= 1) in that
// case.
size_t SequenceLength(std::string_view s, size_t i, size_t* subpart) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const uint8_t c = b(i);
  *subpart = 1;
  if (c < 0x80) return 1;
  size_t need;
  uint8_t lo = 0x80, hi = 0xBF;  // the allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    need = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;  // no overlongs
    if (c == 0xED) hi = 0x9F;  // no surrogates
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;  // no overlongs
    if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
  } else {
    return 0;
  }
  for (size_t k = 1; k < need; ++k) {
    if (i + k >= s.size()) return 0;
    const uint8_t t = b(i + k);
    const bool ok = k == 1 ? (t >= lo && t <= hi) : (t >= 0x80 && t <= 0xBF);
    if (!ok) return 0;
    *subpart = k + 1;
  }
  return need;
}

bool IsContinuation(char c) { return (static_cast<uint8_t>(c) & 0xC0) == 0x80; }

}  // namespace

bool IsValidUtf8(std::string_view s) {
  size_t subpart;
  for (size_t i = 0; i < s.size();) {
    // ASCII eight bytes at a time (trainer JSON, names, paths: nearly all of what is checked).
    uint64_t word;
    if (i + sizeof(word) <= s.size()) {
      std::memcpy(&word, s.data() + i, sizeof(word));
      if ((word & 0x8080808080808080ULL) == 0) {
        i += sizeof(word);
        continue;
      }
    }
    const size_t n = SequenceLength(s, i, &subpart);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string SanitizeUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t subpart;
  for (size_t i = 0; i < s.size();) {
    const size_t n = SequenceLength(s, i, &subpart);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      i += subpart;
    } else {
      out.append(s.data() + i, n);
      i += n;
    }
  }
  return out;
}

std::string_view Utf8Prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t end = max_bytes;
  // Back up over continuation bytes to the start of the code point that straddles the cut.
  while (end > 0 && IsContinuation(s[end])) --end;
  if (end < max_bytes) {
    size_t subpart;
    const size_t n = SequenceLength(s, end, &subpart);
    if (n != 0 && end + n <= max_bytes) end += n;  // it fitted after all
  }
  return s.substr(0, end);
}

std::string_view Utf8Suffix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s;
  size_t start = s.size() - max_bytes;
  while (start < s.size() && IsContinuation(s[start])) ++start;
  return s.substr(start);
}

std::string SanitizeAndTruncateUtf8(std::string_view s, size_t max_bytes) {
  // Sanitizing can grow the text (1 bad byte -> 3), so cut the input first with some slack.
  const std::string clean =
      SanitizeUtf8(s.substr(0, max_bytes < s.size() ? max_bytes + 3 : s.size()));
  return std::string(Utf8Prefix(clean, max_bytes));
}

bool HasControlCharacters(std::string_view s) {
  for (size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<uint8_t>(s[i]);
    if (c < 0x20 || c == 0x7F) return true;
    if (c == 0xC2 && i + 1 < s.size()) {
      const auto d = static_cast<uint8_t>(s[i + 1]);
      if (d >= 0x80 && d <= 0x9F) return true;
    }
  }
  return false;
}

std::string EscapeForTerminal(std::string_view s, bool keep_newlines_and_tabs) {
  const std::string clean = SanitizeUtf8(s);
  std::string out;
  out.reserve(clean.size());
  char buf[16];
  for (size_t i = 0; i < clean.size(); ++i) {
    const auto c = static_cast<uint8_t>(clean[i]);
    if (c == '\n' || c == '\t') {
      if (keep_newlines_and_tabs) {
        out += static_cast<char>(c);
      } else {
        out += c == '\n' ? "\\n" : "\\t";
      }
    } else if (c == '\r') {
      out += "\\r";
    } else if (c < 0x20 || c == 0x7F) {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else if (c == 0xC2 && i + 1 < clean.size() && static_cast<uint8_t>(clean[i + 1]) >= 0x80 &&
               static_cast<uint8_t>(clean[i + 1]) <= 0x9F) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<uint8_t>(clean[i + 1]));
      out += buf;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string QuoteExcerpt(std::string_view s, size_t max_bytes) {
  const bool cut = s.size() > max_bytes;
  std::string out = "\"" + EscapeForTerminal(SanitizeAndTruncateUtf8(s, max_bytes));
  out += cut ? "…\" (" + std::to_string(s.size()) + " bytes)" : "\"";
  return out;
}

Status CheckTextField(std::string_view field, std::string_view value, size_t max_bytes,
                      bool is_name) {
  const std::string f(field);
  if (value.size() > max_bytes) {
    return Status::InvalidArgument(f + ": " + std::to_string(value.size()) +
                                   " bytes, over the limit of " + std::to_string(max_bytes) +
                                   " (shorten it)");
  }
  if (!IsValidUtf8(value)) {
    return Status::InvalidArgument(f + ": not valid UTF-8 (" + QuoteExcerpt(value) + ")");
  }
  if (is_name && HasControlCharacters(value)) {
    return Status::InvalidArgument(f + ": holds a control character (" + QuoteExcerpt(value) +
                                   "); names are printable text");
  }
  return Status::Ok();
}

}  // namespace xv
