// FlatJsonObject: the members of a JSON object whose values are all scalars (numbers, true, false,
// null, and strings of printable ASCII without escapes), read in one pass without building a
// document. It is the fast path for the daemon's most frequent input, a trainer's step event
// ({"type":"step","step":12,"loss":3.1,...}); anything else (a nested value, an escape, a
// non-ASCII or control byte, a duplicate key, an integer beyond int64, more than kMaxMembers
// members, text that is not JSON) is refused, and the caller reads the text with the full parser
// (common/bounded_json_or_discarded.h). So an accepted text has exactly the value nlohmann::json
// gives it: integers as int64, other numbers as the nearest double.
// Thread-safety: a value type; Parse is a pure function. The members view the parsed text, which
// must outlive them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace xv {

class FlatJsonObject {
 public:
  static constexpr size_t kMaxMembers = 64;

  enum class Kind { kNull, kBool, kInteger, kFloat, kString };
  struct Member {
    std::string_view key;
    Kind kind = Kind::kNull;
    bool boolean = false;     // kBool
    int64_t integer = 0;      // kInteger
    double number = 0;        // kInteger (the same value) and kFloat
    std::string_view string;  // kString: the characters between the quotes
    bool is_number() const { return kind == Kind::kInteger || kind == Kind::kFloat; }
  };

  // Reads `text` into *out. False when it is not a flat object as above (*out is then unspecified).
  static bool Parse(std::string_view text, FlatJsonObject* out);

  // The member named `key`, or nullptr.
  const Member* Find(std::string_view key) const;
  const std::vector<Member>& members() const { return members_; }

 private:
  std::vector<Member> members_;
};

}  // namespace xv
