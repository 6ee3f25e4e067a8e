#include "client/candidate_spec.h"

namespace xv::client {

std::string TrimBlanks(const std::string& s) {
  size_t b = s.find_first_not_of(" \t");
  if (b == std::string::npos) return "";
  size_t e = s.find_last_not_of(" \t");
  return s.substr(b, e - b + 1);
}

Status ParseOverride(const std::string& text, const std::string& what, v1::Override* out) {
  size_t eq = text.find('=');
  if (eq == std::string::npos) {
    return Status::InvalidArgument(what + " '" + text + "': expected key=value");
  }
  std::string key = TrimBlanks(text.substr(0, eq));
  std::string value = TrimBlanks(text.substr(eq + 1));
  if (key.empty()) return Status::InvalidArgument(what + " '" + text + "': empty key");
  if (value.empty())
    return Status::InvalidArgument(what + " '" + text + "': empty value for " + key);
  out->set_key(key);
  out->set_value(value);
  return Status::Ok();
}

Status ParseCandidate(const std::string& text, std::vector<v1::Override>* out) {
  out->clear();
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '[' || c == '{') {
      ++depth;
    } else if (c == ']' || c == '}') {
      --depth;
    } else if (c == ',' && depth == 0) {
      parts.push_back(cur);
      cur.clear();
      continue;
    }
    cur += c;
  }
  if (quote || depth != 0) {
    return Status::InvalidArgument("--candidate '" + text + "': unbalanced brackets or quotes");
  }
  parts.push_back(cur);
  for (const auto& p : parts) {
    if (TrimBlanks(p).empty()) continue;
    v1::Override o;
    XV_RETURN_IF_ERROR(ParseOverride(TrimBlanks(p), "--candidate", &o));
    out->push_back(o);
  }
  if (out->empty()) return Status::InvalidArgument("--candidate '" + text + "': no overrides");
  return Status::Ok();
}

}  // namespace xv::client
