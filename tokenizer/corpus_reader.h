// Corpus reader: the documents of one input file (see corpus_files.h for which files are read).
//
// Text files: documents are separated either by lines holding only `%` (the fortune format, a
// trailing
// '\r' allowed) or by one or more blank lines (lines of only spaces, tabs or '\r').
// TextSeparator::kAuto picks `%` when the file has at least one such line, else blank lines. A
// document is the text between separators without the line break before the separator; documents
// that are empty or only whitespace are dropped; everything else is kept byte for byte. JSON lines:
// one JSON object per line with a string field "text" (other fields are ignored); blank lines are
// skipped; empty texts are dropped. Every file must be valid UTF-8 (checked before parsing) and
// hold at least one document. Thread-safety: free functions, no shared state; safe to call from
// several threads.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "tokenizer/corpus_files.h"

namespace xv::tok {

enum class TextSeparator { kAuto, kPercent, kBlankLine };

// Parses "auto", "percent" (or "%") and "blank"; INVALID_ARGUMENT naming --txt-separator otherwise.
Status ParseTextSeparator(const std::string& text, TextSeparator* separator);
const char* TextSeparatorName(TextSeparator separator);

// Byte offset of the first byte that is not part of well-formed UTF-8 (no overlong forms, no
// surrogates, nothing above U+10FFFF), or std::string_view::npos when `text` is valid.
size_t FindInvalidUtf8(std::string_view text);

// Splits text into documents (rules above). Appends to `docs`.
void SplitTextDocuments(std::string_view text, TextSeparator separator,
                        std::vector<std::string>* docs);

// Parses JSON lines (rules above); `name` is used in errors, which give the line number and byte
// offset. Appends to `docs`.
Status ParseJsonlDocuments(std::string_view text, const std::string& name,
                           std::vector<std::string>* docs);

// Reads, decompresses, validates and splits one file. Appends its documents to `docs`. Errors name
// the file: invalid UTF-8 (INVALID_ARGUMENT with the byte offset, of the decompressed stream for
// .gz/.zst), an empty file or one without documents (INVALID_ARGUMENT), JSON errors, and those of
// ReadCorpusFileBytes.
Status ReadCorpusDocuments(const CorpusFile& file, TextSeparator separator,
                           std::vector<std::string>* docs);

}  // namespace xv::tok
