// UnifiedDiff: applies a unified diff (`diff -u`, `git diff`) of one file to that file's text, in
// process, exactly: every context and removed line must equal the text's line byte for byte (no
// fuzz, no whitespace folding). Used by the daemon for patch code candidates (issue 16): a patch
// that does not apply is refused at submit, naming the hunk.
//
// Accepted input:
//  - optional lines before the file header (`diff --git ...`, `index ...`, free text);
//  - one file header: `--- OLD` then `+++ NEW` (names are only shown in errors, never opened; a
//    tab and what follows, a timestamp, is dropped; `a/`/`b/` prefixes are kept as written);
//  - one or more hunks `@@ -START[,COUNT] +START[,COUNT] @@ [section]`, each followed by exactly
//    COUNT old lines (' ' context, '-' removed) and COUNT new lines (' ', '+' added); an empty
//    line counts as an empty context line (editors strip the lone space); `\ No newline at end of
//    file` after a line says that line has no final newline;
//  - hunks in file order, not overlapping.
// A hunk applies where its old lines match exactly: at its stated line, else at the nearest line
// where they do (an offset, as `patch` without fuzz), never before the end of the previous hunk.
// Refused (INVALID_ARGUMENT, prefixed "patch: "): no header or no hunk; a second file; a header
// naming /dev/null (creating or deleting the file); a malformed or out-of-order hunk header; a
// count that the hunk's lines do not fill or that exceeds kMaxDiffLineNumber; a hunk whose old
// lines match nowhere (the message names the hunk, its header and the first differing line at the
// stated place); a result larger than `max_result_bytes`.
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace xv {

// Line numbers and counts above this are refused (a hunk header cannot ask for more lines than a
// bounded patch can hold).
inline constexpr long kMaxDiffLineNumber = 100000000;

// Applies `diff` to `original`, both named `file_name` in errors (the header's names are only
// checked for /dev/null). *out is the patched text; untouched on error.
Status ApplyUnifiedDiff(const std::string& original, const std::string& diff,
                        const std::string& file_name, size_t max_result_bytes, std::string* out);

}  // namespace xv
