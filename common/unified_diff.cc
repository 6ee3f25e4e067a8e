// ApplyUnifiedDiff: parse the header and hunks, then place each hunk exactly. See unified_diff.h.
#include "common/unified_diff.h"

#include <string_view>
#include <vector>

#include "common/untrusted_text.h"

namespace xv {
namespace {

// Line comparisons one patch may spend looking for offsets: a hostile patch of many hunks at
// wrong line numbers would otherwise cost hunks x lines x hunk length.
constexpr long kMaxComparisons = 20000000;

struct Hunk {
  int index = 0;       // 1-based
  std::string header;  // "@@ -3,4 +3,5 @@", shown in errors
  long old_start = 0, old_count = 1, new_start = 0, new_count = 1;
  std::vector<std::string> old_lines;  // with their "\n" unless marked "\ No newline"
  std::vector<std::string> new_lines;
};

// `text` cut into lines, each with its "\n" (the last may have none).
std::vector<std::string_view> SplitLines(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    end = end == std::string_view::npos ? text.size() : end + 1;
    lines.push_back(text.substr(start, end - start));
    start = end;
  }
  return lines;
}

std::string_view WithoutCr(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// A decimal number of at most 9 digits, no sign, at *pos; advances *pos.
bool ParseLineNumber(std::string_view text, size_t* pos, long* out) {
  size_t i = *pos;
  long value = 0;
  while (i < text.size() && text[i] >= '0' && text[i] <= '9' && i - *pos < 10) {
    value = value * 10 + (text[i] - '0');
    ++i;
  }
  if (i == *pos || i - *pos > 9 || value > kMaxDiffLineNumber) return false;
  *pos = i;
  *out = value;
  return true;
}

// "START[,COUNT]" after the sign at *pos.
bool ParseRange(std::string_view text, size_t* pos, char sign, long* start, long* count) {
  if (*pos >= text.size() || text[*pos] != sign) return false;
  ++*pos;
  if (!ParseLineNumber(text, pos, start)) return false;
  *count = 1;
  if (*pos < text.size() && text[*pos] == ',') {
    ++*pos;
    if (!ParseLineNumber(text, pos, count)) return false;
  }
  return true;
}

// "@@ -A[,B] +C[,D] @@[ section]".
Status ParseHunkHeader(std::string_view line, int index, Hunk* hunk) {
  line = WithoutCr(line);
  hunk->index = index;
  size_t pos = 3;
  const bool ok = StartsWith(line, "@@ ") &&
                  ParseRange(line, &pos, '-', &hunk->old_start, &hunk->old_count) &&
                  pos < line.size() && line[pos++] == ' ' &&
                  ParseRange(line, &pos, '+', &hunk->new_start, &hunk->new_count) &&
                  StartsWith(line.substr(pos), " @@");
  if (!ok) {
    return Status::InvalidArgument("patch: hunk " + std::to_string(index) + ": header " +
                                   QuoteExcerpt(std::string(line)) +
                                   " is not `@@ -START[,COUNT] +START[,COUNT] @@`");
  }
  hunk->header = std::string(line.substr(0, pos + 3));
  return Status::Ok();
}

std::string HunkLabel(const Hunk& hunk) {
  return "patch: hunk " + std::to_string(hunk.index) + " (" + hunk.header + ")";
}

// The hunk's body from lines[*i]: exactly old_count old and new_count new lines.
Status ReadHunkBody(const std::vector<std::string_view>& lines, size_t* i, Hunk* hunk) {
  long old_left = hunk->old_count, new_left = hunk->new_count;
  int last_sides = 0;  // 1 old, 2 new, 3 both: which lines a "\ No newline" marker ends
  auto cut_newline = [](std::vector<std::string>* side) {
    if (!side->empty() && !side->back().empty() && side->back().back() == '\n') {
      side->back().pop_back();
    }
  };
  while (*i < lines.size()) {
    std::string_view line = lines[*i];
    if (!line.empty() && line.back() == '\n') line.remove_suffix(1);
    if (StartsWith(line, "\\")) {
      if (last_sides == 0) break;
      if (last_sides & 1) cut_newline(&hunk->old_lines);
      if (last_sides & 2) cut_newline(&hunk->new_lines);
      last_sides = 0;
      ++*i;
      continue;
    }
    if (old_left == 0 && new_left == 0) break;
    const char kind = line.empty() ? ' ' : line[0];
    const std::string content = std::string(line.empty() ? line : line.substr(1)) + "\n";
    if ((kind == ' ' && (old_left == 0 || new_left == 0)) || (kind == '-' && old_left == 0) ||
        (kind == '+' && new_left == 0) || (kind != ' ' && kind != '-' && kind != '+')) {
      return Status::InvalidArgument(
          HunkLabel(*hunk) + ": line " + std::to_string(*i + 1) + " of the patch, " +
          QuoteExcerpt(std::string(line)) + ", does not fit the header's counts (" +
          std::to_string(old_left) + " old and " + std::to_string(new_left) +
          " new lines still expected; each line starts with ' ', '-' or '+')");
    }
    if (kind != '+') {
      hunk->old_lines.push_back(content);
      --old_left;
    }
    if (kind != '-') {
      hunk->new_lines.push_back(content);
      --new_left;
    }
    last_sides = kind == ' ' ? 3 : (kind == '-' ? 1 : 2);
    ++*i;
  }
  if (old_left > 0 || new_left > 0) {
    return Status::InvalidArgument(
        HunkLabel(*hunk) + ": the patch ends with " + std::to_string(old_left) + " old and " +
        std::to_string(new_left) + " new lines of the hunk missing (cut, or wrong counts)");
  }
  return Status::Ok();
}

// The header `--- OLD` / `+++ NEW`: skips what precedes it; *i ends after `+++`.
Status ReadFileHeader(const std::vector<std::string_view>& lines, size_t* i) {
  for (; *i + 1 < lines.size(); ++*i) {
    if (StartsWith(lines[*i], "@@")) break;
    if (!StartsWith(lines[*i], "--- ") || !StartsWith(lines[*i + 1], "+++ ")) continue;
    for (std::string_view name : {lines[*i].substr(4), lines[*i + 1].substr(4)}) {
      name = WithoutCr(name.substr(0, name.find_first_of("\t\n")));
      if (name == "/dev/null") {
        return Status::InvalidArgument(
            "patch: the header names /dev/null (it creates or deletes a file); a code "
            "candidate's patch changes the trainer's source only");
      }
    }
    *i += 2;
    return Status::Ok();
  }
  return Status::InvalidArgument(
      "patch: no file header (`--- FILE` then `+++ FILE`) before the first hunk; send the "
      "output of `diff -u` or `git diff`");
}

Status ParseDiff(const std::string& diff, const std::string& file_name, std::vector<Hunk>* out) {
  const std::vector<std::string_view> lines = SplitLines(diff);
  size_t i = 0;
  XV_RETURN_IF_ERROR(ReadFileHeader(lines, &i));
  while (i < lines.size()) {
    const std::string_view line = WithoutCr(lines[i]);
    if (line == "\n" || line.empty()) {
      ++i;
      continue;
    }
    if (StartsWith(line, "--- ") || StartsWith(line, "diff ")) {
      return Status::InvalidArgument(
          "patch: line " + std::to_string(i + 1) + " starts a second file (" +
          QuoteExcerpt(std::string(WithoutCr(line.substr(0, line.find('\n'))))) +
          "); a code candidate's patch changes " + file_name + " only");
    }
    if (!StartsWith(line, "@@")) {
      return Status::InvalidArgument("patch: line " + std::to_string(i + 1) + ", " +
                                     QuoteExcerpt(std::string(line.substr(0, line.find('\n')))) +
                                     ", is not a hunk header (`@@ -A,B +C,D @@`)");
    }
    Hunk hunk;
    XV_RETURN_IF_ERROR(
        ParseHunkHeader(line.substr(0, line.find('\n')), static_cast<int>(out->size()) + 1, &hunk));
    ++i;
    XV_RETURN_IF_ERROR(ReadHunkBody(lines, &i, &hunk));
    if (!out->empty()) {
      const Hunk& prev = out->back();
      if (hunk.old_start < prev.old_start + prev.old_count) {
        return Status::InvalidArgument(HunkLabel(hunk) + ": starts before the end of hunk " +
                                       std::to_string(prev.index) + " (" + prev.header +
                                       "); hunks must be in file order and not overlap");
      }
    }
    out->push_back(std::move(hunk));
  }
  if (out->empty()) return Status::InvalidArgument("patch: no hunk (`@@ -A,B +C,D @@`)");
  return Status::Ok();
}

// Where the hunk's old lines match lines[p..], p in [from, lines.size() - old_count], nearest to
// the stated line; -1 when nowhere. *comparisons counts the line comparisons spent.
long PlaceHunk(const Hunk& hunk, const std::vector<std::string_view>& lines, long from,
               long* comparisons) {
  const long count = static_cast<long>(hunk.old_lines.size());
  const long last = static_cast<long>(lines.size()) - count;
  // "-A,0" inserts after line A; otherwise the hunk starts at line A.
  const long target = count == 0 ? hunk.old_start : hunk.old_start - 1;
  auto matches = [&](long p) {
    if (p < from || p > last) return false;
    for (long j = 0; j < count; ++j) {
      ++*comparisons;
      if (lines[p + j] != hunk.old_lines[j]) return false;
    }
    return true;
  };
  if (count == 0) return target >= from && target <= last ? target : -1;
  for (long d = 0; target - d >= from || target + d <= last; ++d) {
    if (*comparisons > kMaxComparisons) return -1;
    if (matches(target - d)) return target - d;
    if (d > 0 && matches(target + d)) return target + d;
  }
  return -1;
}

// Why the hunk does not apply at its stated line: the first old line that differs there.
std::string MismatchDetail(const Hunk& hunk, const std::vector<std::string_view>& lines,
                           const std::string& file_name) {
  const long start = hunk.old_count == 0 ? hunk.old_start : hunk.old_start - 1;
  for (size_t j = 0; j < hunk.old_lines.size(); ++j) {
    const long at = start + static_cast<long>(j);
    if (at < 0 || at >= static_cast<long>(lines.size())) {
      return "line " + std::to_string(at + 1) + " is past the end of " + file_name + " (" +
             std::to_string(lines.size()) + " lines)";
    }
    if (lines[at] != hunk.old_lines[j]) {
      return "line " + std::to_string(at + 1) + " of " + file_name + " is " +
             QuoteExcerpt(std::string(lines[at])) + " where the hunk expects " +
             QuoteExcerpt(hunk.old_lines[j]) + ", and its lines match nowhere else";
    }
  }
  return "it overlaps the previous hunk's place, or matching it cost too much";
}

}  // namespace

Status ApplyUnifiedDiff(const std::string& original, const std::string& diff,
                        const std::string& file_name, size_t max_result_bytes, std::string* out) {
  std::vector<Hunk> hunks;
  XV_RETURN_IF_ERROR(ParseDiff(diff, file_name, &hunks));
  const std::vector<std::string_view> lines = SplitLines(original);
  std::string result;
  long next = 0;  // first line of `original` not copied yet
  long comparisons = 0;
  for (const Hunk& hunk : hunks) {
    const long at = PlaceHunk(hunk, lines, next, &comparisons);
    if (at < 0) {
      return Status::InvalidArgument(HunkLabel(hunk) + " does not apply to " + file_name + ": " +
                                     MismatchDetail(hunk, lines, file_name));
    }
    for (long j = next; j < at; ++j) result.append(lines[j]);
    for (const std::string& line : hunk.new_lines) result += line;
    next = at + static_cast<long>(hunk.old_lines.size());
    if (result.size() > max_result_bytes) break;
  }
  for (long j = next; j < static_cast<long>(lines.size()); ++j) result.append(lines[j]);
  if (result.size() > max_result_bytes) {
    return Status::InvalidArgument("patch: the patched " + file_name + " would be more than " +
                                   std::to_string(max_result_bytes) + " bytes");
  }
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace xv
