#include "tokenizer/corpus_reader.h"

#include <cstdint>
#include <cstring>

#include <nlohmann/json.hpp>

#include "tokenizer/corpus_decompress.h"

namespace xv::tok {
namespace {

bool IsBlankLine(std::string_view line) {
  for (char c : line) {
    if (c != ' ' && c != '\t' && c != '\r') return false;
  }
  return true;
}

bool IsPercentLine(std::string_view line) { return line == "%" || line == "%\r"; }

bool IsAllWhitespace(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\n' && c != '\f' && c != '\v') return false;
  }
  return true;
}

// Calls fn(line_begin, line_end_without_newline, next_line_begin) for every line.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    size_t next = nl == std::string_view::npos ? text.size() : nl + 1;
    fn(pos, end, next);
    pos = next;
  }
}

void EmitDocument(std::string_view text, size_t begin, size_t end, std::vector<std::string>* docs) {
  if (end <= begin) return;
  std::string_view doc = text.substr(begin, end - begin);
  // Drop the line break that precedes the separator (or ends the file).
  while (!doc.empty() && (doc.back() == '\n' || doc.back() == '\r')) doc.remove_suffix(1);
  if (IsAllWhitespace(doc)) return;
  docs->emplace_back(doc);
}

}  // namespace

Status ParseTextSeparator(const std::string& text, TextSeparator* separator) {
  if (text == "auto") {
    *separator = TextSeparator::kAuto;
  } else if (text == "percent" || text == "%") {
    *separator = TextSeparator::kPercent;
  } else if (text == "blank") {
    *separator = TextSeparator::kBlankLine;
  } else {
    return Status::InvalidArgument("--txt-separator: expected auto, percent or blank, got \"" +
                                   text + "\"");
  }
  return Status::Ok();
}

const char* TextSeparatorName(TextSeparator separator) {
  switch (separator) {
    case TextSeparator::kAuto:
      return "auto";
    case TextSeparator::kPercent:
      return "percent";
    case TextSeparator::kBlankLine:
      return "blank";
  }
  return "?";
}

size_t FindInvalidUtf8(std::string_view text) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  size_t i = 0;
  while (i < n) {
    // Fast path over ASCII, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    const unsigned char c = s[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;  // no overlong forms
      if (c == 0xED) hi = 0x9F;  // no surrogates
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;  // no overlong forms
      if (c == 0xF4) hi = 0x8F;  // nothing above U+10FFFF
    } else {
      return i;
    }
    if (i + len > n) return i;
    if (s[i + 1] < lo || s[i + 1] > hi) return i;
    for (size_t k = 2; k < len; ++k) {
      if (s[i + k] < 0x80 || s[i + k] > 0xBF) return i;
    }
    i += len;
  }
  return std::string_view::npos;
}

void SplitTextDocuments(std::string_view text, TextSeparator separator,
                        std::vector<std::string>* docs) {
  if (separator == TextSeparator::kAuto) {
    separator = TextSeparator::kBlankLine;
    ForEachLine(text, [&](size_t b, size_t e, size_t) {
      if (IsPercentLine(text.substr(b, e - b))) separator = TextSeparator::kPercent;
    });
  }
  size_t doc_begin = 0;
  bool in_blank_run = false;
  ForEachLine(text, [&](size_t b, size_t e, size_t next) {
    std::string_view line = text.substr(b, e - b);
    if (separator == TextSeparator::kPercent) {
      if (IsPercentLine(line)) {
        EmitDocument(text, doc_begin, b, docs);
        doc_begin = next;
      }
    } else {
      const bool blank = IsBlankLine(line);
      if (blank && !in_blank_run) EmitDocument(text, doc_begin, b, docs);
      if (blank) doc_begin = next;
      in_blank_run = blank;
    }
  });
  EmitDocument(text, doc_begin, text.size(), docs);
}

Status ParseJsonlDocuments(std::string_view text, const std::string& name,
                           std::vector<std::string>* docs) {
  Status status;
  size_t line_no = 0;
  ForEachLine(text, [&](size_t b, size_t e, size_t) {
    ++line_no;
    if (!status.ok()) return;
    std::string_view line = text.substr(b, e - b);
    if (IsBlankLine(line)) return;
    const std::string where =
        name + ":" + std::to_string(line_no) + " (byte offset " + std::to_string(b) + "): ";
    nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) {
      status = Status::InvalidArgument(where + "not a JSON value");
      return;
    }
    if (!j.is_object()) {
      status = Status::InvalidArgument(where + "expected a JSON object with a \"text\" field");
      return;
    }
    auto it = j.find("text");
    if (it == j.end()) {
      status = Status::InvalidArgument(where + "missing field \"text\"");
      return;
    }
    if (!it->is_string()) {
      status = Status::InvalidArgument(where + "field \"text\" is not a string");
      return;
    }
    std::string doc = it->get<std::string>();
    if (FindInvalidUtf8(doc) != std::string_view::npos) {  // e.g. a lone surrogate escape
      status = Status::InvalidArgument(where + "field \"text\" is not valid UTF-8");
      return;
    }
    if (!doc.empty()) docs->push_back(std::move(doc));
  });
  return status;
}

Status ReadCorpusDocuments(const CorpusFile& file, TextSeparator separator,
                           std::vector<std::string>* docs) {
  std::string bytes;
  XV_RETURN_IF_ERROR(ReadCorpusFileBytes(file, &bytes));
  if (bytes.empty()) return Status::InvalidArgument(file.path + ": empty input file");
  const size_t bad = FindInvalidUtf8(bytes);
  if (bad != std::string_view::npos) {
    return Status::InvalidArgument(
        file.path + ": invalid UTF-8 at byte offset " + std::to_string(bad) +
        (file.compression == CorpusCompression::kNone ? "" : " of the decompressed data"));
  }
  const size_t before = docs->size();
  if (file.format == CorpusFormat::kJsonl) {
    XV_RETURN_IF_ERROR(ParseJsonlDocuments(bytes, file.path, docs));
  } else {
    SplitTextDocuments(bytes, separator, docs);
  }
  if (docs->size() == before) {
    return Status::InvalidArgument(
        file.path + ": no documents (the file holds only whitespace or " + "separators)");
  }
  return Status::Ok();
}

}  // namespace xv::tok
