#include "common/bounded_json.h"

#include <cmath>
#include <cstdio>

#include "common/shortest_double.h"

namespace xv {

int JsonNestingDepth(std::string_view text, int stop_after) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest >= stop_after) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return deepest;
}

Status ParseBoundedJson(std::string_view text, std::string_view what, nlohmann::json* out,
                        int max_depth) {
  const std::string w(what);
  if (JsonNestingDepth(text, max_depth + 1) > max_depth) {
    return Status::InvalidArgument(w + ": nested deeper than " + std::to_string(max_depth) +
                                   " levels of arrays and objects");
  }
  try {
    *out = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::parse_error& e) {
    return Status::InvalidArgument(w + ": not JSON (syntax error at byte " +
                                   std::to_string(e.byte) + ")");
  } catch (const std::exception&) {
    return Status::InvalidArgument(w + ": not JSON");
  }
  return Status::Ok();
}

std::string DescribeJsonValue(const nlohmann::json& v) {
  switch (v.type()) {
    case nlohmann::json::value_t::object:
      return "an object of " + std::to_string(v.size()) + " keys";
    case nlohmann::json::value_t::array:
      return "an array of " + std::to_string(v.size());
    case nlohmann::json::value_t::string:
      return "a string of " + std::to_string(v.get_ref<const std::string&>().size()) + " bytes";
    case nlohmann::json::value_t::boolean:
      return v.get<bool>() ? "true" : "false";
    case nlohmann::json::value_t::null:
      return "null";
    case nlohmann::json::value_t::number_integer:
      return "a number (" + std::to_string(v.get<int64_t>()) + ")";
    case nlohmann::json::value_t::number_unsigned:
      return "a number (" + std::to_string(v.get<uint64_t>()) + ")";
    case nlohmann::json::value_t::number_float:
      return "a number (" + ShortestDoubleText(v.get<double>()) + ")";
    case nlohmann::json::value_t::binary:
      return "binary data";
    case nlohmann::json::value_t::discarded:
      return "a discarded value";
  }
  return "a value";
}

std::string DumpJsonLossless(const nlohmann::json& v, int indent) {
  const std::string text =
      v.dump(indent, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
  // dump() escapes C0 controls but writes DEL and the C1 controls (U+0080-U+009F, bytes C2 80..9F)
  // raw. The text is valid UTF-8 and every structural character is ASCII, so those bytes occur only
  // inside strings, where "\u00XX" is the same JSON value.
  std::string out;
  out.reserve(text.size());
  char buf[8];
  for (size_t i = 0; i < text.size(); ++i) {
    const auto c = static_cast<unsigned char>(text[i]);
    const auto next = i + 1 < text.size() ? static_cast<unsigned char>(text[i + 1]) : 0;
    if (c == 0x7F) {
      out += "\\u007f";
    } else if (c == 0xC2 && next >= 0x80 && next <= 0x9F) {
      std::snprintf(buf, sizeof buf, "\\u%04x", next);
      out += buf;
      ++i;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

}  // namespace xv
