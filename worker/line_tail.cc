#include "worker/line_tail.h"

#include "common/untrusted_text.h"

namespace xv::worker {

void LineTail::PushLine(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  lines_.push_back(SanitizeAndTruncateUtf8(line, max_line_bytes_));
  while (lines_.size() > max_lines_) lines_.pop_front();
}

void LineTail::Append(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      // Keep memory bounded on a line that never ends (a progress bar with '\r'), keeping a suffix
      // that starts on a code-point boundary.
      if (partial_.size() > 4 * max_line_bytes_) {
        partial_ = std::string(Utf8Suffix(partial_, max_line_bytes_));
      }
      return;
    }
    partial_.append(bytes.substr(0, nl));
    PushLine(partial_);
    partial_.clear();
    bytes.remove_prefix(nl + 1);
  }
}

std::string LineTail::Text() const {
  std::string out;
  size_t skip = (!partial_.empty() && lines_.size() >= max_lines_) ? 1 : 0;
  for (const auto& l : lines_) {
    if (skip) {
      --skip;
      continue;
    }
    if (!out.empty()) out += '\n';
    out += l;
  }
  if (!partial_.empty()) {
    if (!out.empty()) out += '\n';
    // The last bytes of the unfinished line; a character still being written ends it as U+FFFD.
    const std::string clean = SanitizeUtf8(Utf8Suffix(partial_, max_line_bytes_));
    out += Utf8Suffix(clean, max_line_bytes_);
  }
  return out;
}

}  // namespace xv::worker
