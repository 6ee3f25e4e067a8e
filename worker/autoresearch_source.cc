#include "worker/autoresearch_source.h"

#include <cctype>
#include <map>
#include <set>

#include "common/bounded_json.h"
#include "common/recipe.h"
#include "common/sha256.h"

namespace xv::worker {
namespace {

using nlohmann::json;

std::string UpperCase(const std::string& s) {
  std::string out = s;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

bool IsUpperNameStart(char c) { return c >= 'A' && c <= 'Z'; }
bool IsUpperNameChar(char c) { return IsUpperNameStart(c) || (c >= '0' && c <= '9') || c == '_'; }

// Scans Python source one character at a time, keeping track of strings (with triple quotes),
// comments and bracket depth, so that a line start is known to be top-level code.
class PythonScanner {
 public:
  explicit PythonScanner(const std::string& s) : s_(s) {}

  // Advances over one character (or a whole quote run) at `*i`.
  void Step(size_t* i) {
    const char c = s_[*i];
    if (in_comment_) {
      if (c == '\n') in_comment_ = false;
      ++*i;
      return;
    }
    if (quote_ != 0) {
      if (c == '\\') {
        *i += 2;
        return;
      }
      if (c == '\n' && !triple_) {
        quote_ = 0;  // an unterminated one-line string ends with its line (a syntax error anyway)
      } else if (c == quote_ && (!triple_ || Triple(*i, quote_))) {
        *i += triple_ ? 3 : 1;
        quote_ = 0;
        return;
      }
      ++*i;
      return;
    }
    if (c == '#') {
      in_comment_ = true;
    } else if (c == '\'' || c == '"') {
      quote_ = c;
      triple_ = Triple(*i, c);
      *i += triple_ ? 3 : 1;
      return;
    } else if (c == '(' || c == '[' || c == '{') {
      ++depth_;
    } else if ((c == ')' || c == ']' || c == '}') && depth_ > 0) {
      --depth_;
    }
    ++*i;
  }

  // At a line start outside any string, comment and bracket.
  bool AtTopLevel() const { return quote_ == 0 && !in_comment_ && depth_ == 0; }
  bool InString() const { return quote_ != 0; }
  bool InComment() const { return in_comment_; }
  int depth() const { return depth_; }

 private:
  bool Triple(size_t i, char q) const {
    return i + 2 < s_.size() && s_[i + 1] == q && s_[i + 2] == q;
  }
  const std::string& s_;
  char quote_ = 0;
  bool triple_ = false;
  bool in_comment_ = false;
  int depth_ = 0;
};

// At `begin` (a top-level line start): `NAME [: annotation] = value`. Fills *out (value bounds
// found by ScanValue) and returns true when the line is such an assignment.
bool MatchAssignmentHead(const std::string& s, size_t begin, SourceConstant* out,
                         size_t* value_start) {
  size_t i = begin;
  if (i >= s.size() || !IsUpperNameStart(s[i])) return false;
  while (i < s.size() && IsUpperNameChar(s[i])) ++i;
  const std::string name = s.substr(begin, i - begin);
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  if (i < s.size() && s[i] == ':') {  // an annotation: up to the '=' on this line
    while (i < s.size() && s[i] != '=' && s[i] != '\n') ++i;
  }
  if (i >= s.size() || s[i] != '=' || (i + 1 < s.size() && s[i + 1] == '=')) return false;
  ++i;
  while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
  out->name = name;
  *value_start = i;
  return true;
}

// The value from `start` to its line's end or comment; multi_line when it does not close there.
void ScanValue(const std::string& s, size_t start, SourceConstant* c) {
  PythonScanner scan(s);
  size_t i = start;
  size_t last_code = start;  // one past the last non-blank character of the value
  while (i < s.size()) {
    if (!scan.InString() && !scan.InComment() && s[i] == '\n') break;
    if (!scan.InString() && s[i] == '#') break;
    const size_t before = i;
    scan.Step(&i);
    if (s[before] != ' ' && s[before] != '\t' && s[before] != '\r') last_code = i;
  }
  c->value_begin = start;
  c->value_end = last_code;
  const bool continued = last_code > start && s[last_code - 1] == '\\';
  c->multi_line = scan.depth() > 0 || scan.InString() || continued || last_code == start;
}

KnobConstant Entry(const std::string& knob) {
  static const std::map<std::string, std::pair<std::string, KnobSupply>> kSpecial = {
      {"sequence_len", {"EVAL_SEQ_LEN", KnobSupply::kPrepare}},
      {"train_sequence_len", {"MAX_SEQ_LEN", KnobSupply::kPrepare}},
      {"time_budget_s", {"TIME_BUDGET", KnobSupply::kPrepare}},
      {"eval_tokens", {"EVAL_TOKENS", KnobSupply::kPrepare}},
      {"seed", {"SEED", KnobSupply::kPrepare}},
      {"vocab_size", {"VOCAB_SIZE", KnobSupply::kPrepare}},
      {"device", {"", KnobSupply::kWorker}},
      {"threads", {"", KnobSupply::kWorker}},
  };
  auto it = kSpecial.find(knob);
  if (it != kSpecial.end()) {
    return {knob, it->second.first, it->second.second,
            knob == "train_sequence_len" ? "sequence_len" : ""};
  }
  return {knob, UpperCase(knob), KnobSupply::kConstant, ""};
}

}  // namespace

const std::vector<KnobConstant>& AutoresearchKnobMap() {
  static const std::vector<KnobConstant> kMap = [] {
    std::vector<KnobConstant> map;
    for (const std::string& knob : RecipeKnobNames()) map.push_back(Entry(knob));
    return map;
  }();
  return kMap;
}

std::vector<SourceConstant> FindTopLevelConstants(const std::string& source) {
  std::vector<SourceConstant> found;
  PythonScanner scan(source);
  size_t line = 1;
  size_t i = 0;
  bool line_start = true;
  while (i < source.size()) {
    if (line_start && scan.AtTopLevel()) {
      SourceConstant c;
      size_t value_start = 0;
      if (MatchAssignmentHead(source, i, &c, &value_start)) {
        ScanValue(source, value_start, &c);
        c.line = line;
        found.push_back(c);
      }
    }
    const size_t before = i;
    scan.Step(&i);
    line_start = false;
    for (size_t k = before; k < i && k < source.size(); ++k) {
      if (source[k] == '\n') {
        ++line;
        line_start = true;
      }
    }
  }
  return found;
}

std::string PythonLiteral(const json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null() || value.is_object()) return "None";
  if (value.is_array()) {
    std::string out = "(";
    for (size_t i = 0; i < value.size(); ++i) {
      if (i > 0) out += ", ";
      out += PythonLiteral(value[i]);
    }
    return out + (value.size() == 1 ? ",)" : ")");
  }
  return DumpJsonLossless(value);  // numbers; strings are valid Python literals as JSON writes them
}

Status RewriteSourceConstants(const std::string& source, const std::string& source_name,
                              const json& recipe, const json& defaults, RewrittenSource* out) {
  if (!recipe.is_object()) return Status::InvalidArgument("recipe: not a JSON object");
  std::map<std::string, std::vector<SourceConstant>> by_name;
  for (SourceConstant& c : FindTopLevelConstants(source)) by_name[c.name].push_back(c);

  // Each rewrite: [begin, end) of the file -> literal. Collected, then applied back to front.
  std::map<size_t, std::pair<size_t, std::string>> edits;
  RewrittenSource result;
  for (const KnobConstant& k : AutoresearchKnobMap()) {
    if (k.supply == KnobSupply::kWorker || !recipe.contains(k.knob)) continue;
    json value = recipe[k.knob];
    if (value.is_object()) continue;
    if (!k.zero_means.empty() && value == 0 && recipe.contains(k.zero_means)) {
      value = recipe[k.zero_means];
    }
    auto it = by_name.find(k.constant);
    if (it == by_name.end()) {
      const bool is_default = defaults.contains(k.knob) && defaults[k.knob] == value;
      if (k.supply == KnobSupply::kConstant && !is_default) {
        return Status::InvalidArgument(
            k.knob + ": " + source_name + " has no top-level constant " + k.constant +
            "; the fork would ignore the override (recipe " + PythonLiteral(value) + ", default " +
            PythonLiteral(defaults.value(k.knob, json())) + "): add `" + k.constant +
            " = ...` to the file, or leave " + k.knob + " at its default");
      }
      continue;
    }
    const std::string literal = PythonLiteral(value);
    for (const SourceConstant& c : it->second) {
      if (c.multi_line) {
        return Status::InvalidArgument(k.knob + ": " + source_name + " line " +
                                       std::to_string(c.line) + ": the value of " + k.constant +
                                       " continues on the next line; xv rewrites one-line "
                                       "constants only (write it on one line)");
      }
      edits[c.value_begin] = {c.value_end, literal};
    }
    result.assigned.emplace_back(k.constant, literal);
  }
  std::string text = source;
  for (auto e = edits.rbegin(); e != edits.rend(); ++e) {
    text.replace(e->first, e->second.first - e->first, e->second.second);
  }
  result.text = std::move(text);
  result.sha256 = Sha256Hex(result.text);
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace xv::worker
