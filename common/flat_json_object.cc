// FlatJsonObject: one-pass reading of flat JSON objects. See flat_json_object.h.
#include "common/flat_json_object.h"

#include <charconv>
#include <system_error>

namespace xv {
namespace {

// A cursor over the text; every Read* returns false on anything outside the accepted subset.
class FlatJsonCursor {
 public:
  explicit FlatJsonCursor(std::string_view text)
      : p_(text.data()), end_(text.data() + text.size()) {}

  void SkipSpace() {
    while (p_ < end_ && (*p_ == ' ' || *p_ == '\t' || *p_ == '\n' || *p_ == '\r')) ++p_;
  }
  bool AtEnd() const { return p_ == end_; }
  bool Take(char c) {
    if (p_ == end_ || *p_ != c) return false;
    ++p_;
    return true;
  }
  // A string of printable ASCII without escapes; *out views its characters.
  bool ReadString(std::string_view* out) {
    if (!Take('"')) return false;
    const char* start = p_;
    while (p_ < end_ && *p_ != '"') {
      const unsigned char c = static_cast<unsigned char>(*p_);
      if (c < 0x20 || c >= 0x7f || c == '\\') return false;
      ++p_;
    }
    if (p_ == end_) return false;
    *out = std::string_view(start, static_cast<size_t>(p_ - start));
    ++p_;  // the closing quote
    return true;
  }
  bool ReadLiteral(std::string_view word) {
    if (static_cast<size_t>(end_ - p_) < word.size() || std::string_view(p_, word.size()) != word) {
      return false;
    }
    p_ += word.size();
    return true;
  }
  // A number in JSON's grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?.
  bool ReadNumber(FlatJsonObject::Member* m) {
    const char* start = p_;
    Take('-');
    if (p_ == end_ || !IsDigit(*p_)) return false;
    if (*p_ == '0') {
      ++p_;
    } else {
      SkipDigits();
    }
    bool integer = true;
    if (Take('.')) {
      integer = false;
      if (p_ == end_ || !IsDigit(*p_)) return false;
      SkipDigits();
    }
    if (p_ < end_ && (*p_ == 'e' || *p_ == 'E')) {
      integer = false;
      ++p_;
      if (!Take('+')) Take('-');
      if (p_ == end_ || !IsDigit(*p_)) return false;
      SkipDigits();
    }
    if (integer) {
      // Beyond int64 nlohmann::json keeps an unsigned or a double: the full parser's business.
      auto [ptr, ec] = std::from_chars(start, p_, m->integer);
      if (ec != std::errc() || ptr != p_) return false;
      m->kind = FlatJsonObject::Kind::kInteger;
      m->number = static_cast<double>(m->integer);
      return true;
    }
    auto [ptr, ec] = std::from_chars(start, p_, m->number);
    if (ec != std::errc() || ptr != p_) return false;  // out of range included
    m->kind = FlatJsonObject::Kind::kFloat;
    return true;
  }
  bool ReadValue(FlatJsonObject::Member* m) {
    if (p_ == end_) return false;
    switch (*p_) {
      case '"':
        m->kind = FlatJsonObject::Kind::kString;
        return ReadString(&m->string);
      case 'n':
        m->kind = FlatJsonObject::Kind::kNull;
        return ReadLiteral("null");
      case 't':
        m->kind = FlatJsonObject::Kind::kBool;
        m->boolean = true;
        return ReadLiteral("true");
      case 'f':
        m->kind = FlatJsonObject::Kind::kBool;
        m->boolean = false;
        return ReadLiteral("false");
      default:
        return ReadNumber(m);
    }
  }

 private:
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  void SkipDigits() {
    while (p_ < end_ && IsDigit(*p_)) ++p_;
  }
  const char* p_;
  const char* end_;
};

}  // namespace

bool FlatJsonObject::Parse(std::string_view text, FlatJsonObject* out) {
  out->members_.clear();
  FlatJsonCursor in(text);
  in.SkipSpace();
  if (!in.Take('{')) return false;
  in.SkipSpace();
  if (!in.Take('}')) {
    while (true) {
      if (out->members_.size() == kMaxMembers) return false;
      Member m;
      if (!in.ReadString(&m.key)) return false;
      if (out->Find(m.key) != nullptr)
        return false;  // duplicate: which one wins is not ours to say
      in.SkipSpace();
      if (!in.Take(':')) return false;
      in.SkipSpace();
      if (!in.ReadValue(&m)) return false;
      out->members_.push_back(m);
      in.SkipSpace();
      if (in.Take('}')) break;
      if (!in.Take(',')) return false;
      in.SkipSpace();
    }
  }
  in.SkipSpace();
  return in.AtEnd();
}

const FlatJsonObject::Member* FlatJsonObject::Find(std::string_view key) const {
  for (const Member& m : members_) {
    if (m.key == key) return &m;
  }
  return nullptr;
}

}  // namespace xv
