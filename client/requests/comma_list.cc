#include "client/requests/comma_list.h"

namespace xv::client {

std::string TrimBlanks(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

Status SplitCommaList(const std::string& text, std::vector<std::string>* items) {
  const Status unbalanced = Status::InvalidArgument("unbalanced brackets or quotes");
  std::vector<std::string> parts;
  std::string closers;  // the closing bracket each open bracket expects, innermost last
  std::string cur;
  char quote = 0;
  bool escaped = false;  // the previous character was a backslash inside double quotes
  for (char c : text) {
    if (quote != 0) {
      if (escaped) {
        escaped = false;
      } else if (quote == '"' && c == '\\') {
        escaped = true;
      } else if (c == quote) {
        quote = 0;  // YAML's '' inside single quotes closes and reopens: the same text
      }
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      closers.push_back(c == '[' ? ']' : '}');
    } else if (c == ']' || c == '}') {
      if (closers.empty() || closers.back() != c) return unbalanced;
      closers.pop_back();
    } else if (c == ',' && closers.empty()) {
      parts.push_back(TrimBlanks(cur));
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (quote != 0 || !closers.empty()) return unbalanced;
  parts.push_back(TrimBlanks(cur));
  *items = std::move(parts);
  return Status::Ok();
}

}  // namespace xv::client
