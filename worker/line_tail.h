// LineTail: keeps the last N complete lines of a byte stream (a trainer's stderr), for the failure
// report. Bytes are fed in arbitrary chunks; a trailing partial line counts as a line in Text().
// Thread-safety: none; one owner.
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
  std::string Text() const;

 private:
  void PushLine(std::string line);
  const size_t max_lines_;
  const size_t max_line_bytes_;
  std::deque<std::string> lines_;
  std::string partial_;
};

}  // namespace xv::worker
