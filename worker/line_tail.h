// LineTail: keeps the last N complete lines of a byte stream (a trainer's stderr), for the failure
// report. Bytes are fed in arbitrary chunks; a trailing partial line counts as a line in Text().
// A trainer may print anything: Text() is always valid UTF-8 (ill-formed sequences replaced by
// U+FFFD) and a line longer than max_line_bytes keeps its first max_line_bytes bytes cut on a
// code-point boundary (a partial line keeps its last ones), so a long line of "é" or a tqdm bar is
// never split inside a character. Thread-safety: none; one owner.
#pragma once

#include <cstddef>
#include <deque>
#include <string>
#include <string_view>

namespace xv::worker {

class LineTail {
 public:
  explicit LineTail(size_t max_lines, size_t max_line_bytes = 4096)
      : max_lines_(max_lines), max_line_bytes_(max_line_bytes) {}
  void Append(std::string_view bytes);
  // The kept lines joined with '\n' (plus the partial line, if any), without a trailing newline.
  // Valid UTF-8, at most about max_lines * (max_line_bytes + 1) bytes.
  std::string Text() const;

 private:
  void PushLine(std::string_view line);
  const size_t max_lines_;
  const size_t max_line_bytes_;
  std::deque<std::string> lines_;  // sanitized and cut
  std::string partial_;            // raw bytes of the line still being written
};

}  // namespace xv::worker
