#include "worker/line_tail.h"

namespace xv::worker {

void LineTail::PushLine(std::string line) {
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.size() > max_line_bytes_) line.resize(max_line_bytes_);
  lines_.push_back(std::move(line));
  while (lines_.size() > max_lines_) lines_.pop_front();
}

void LineTail::Append(std::string_view bytes) {
  while (!bytes.empty()) {
    size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      partial_.append(bytes);
      // Keep memory bounded on a line that never ends (a progress bar with '\r').
      if (partial_.size() > 4 * max_line_bytes_)
        partial_.erase(0, partial_.size() - max_line_bytes_);
      return;
    }
    partial_.append(bytes.substr(0, nl));
    PushLine(std::move(partial_));
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
    out +=
        partial_.substr(partial_.size() > max_line_bytes_ ? partial_.size() - max_line_bytes_ : 0);
  }
  return out;
}

}  // namespace xv::worker
