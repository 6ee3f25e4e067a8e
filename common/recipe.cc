// Recipe parsing (YAML, JSON, overrides), validation and the knob list; all driven by the knob
// table in recipe_knobs.cc. Derived sizes: recipe_sizes.cc. Hashing: recipe_hash.cc.
#include "common/recipe.h"

#include <cstring>
#include <set>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include "common/bounded_json.h"
#include "common/message_field_name.h"
#include "common/recipe_knobs.h"
#include "common/untrusted_text.h"

namespace xv {

namespace {

std::string LineSuffix(const YAML::Mark& mark) {
  if (mark.line < 0) return "";
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

// A recipe is a short flat mapping of knobs; anything far larger or nested is not one.
constexpr size_t kMaxRecipeYamlBytes = 1u << 20;
constexpr int kMaxRecipeYamlFlowDepth = kMaxJsonDepth;

// The deepest nesting of YAML flow collections ([...] and {...}) in `text`, counted by a linear
// scan that skips quoted scalars and comments; stops once it passes `stop_after`. Block nesting
// (by indentation) is bounded by yaml-cpp itself, which refuses documents deeper than 2000
// levels; flow nesting is checked first so that no input of up to kMaxRecipeYamlBytes makes the
// parser, the node tree or an error message recurse once per level.
int YamlFlowNestingDepth(const std::string& text, int stop_after) {
  int depth = 0, deepest = 0;
  char quote = 0;  // '\'' or '"' while inside a quoted scalar
  bool comment = false, escaped = false;
  char previous = '\n';
  for (const char c : text) {
    if (comment) {
      if (c == '\n') comment = false;
    } else if (quote == '"') {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        quote = 0;
      }
    } else if (quote == '\'') {
      if (c == '\'') quote = 0;  // '' inside is two quotes in a row: leaves and re-enters
    } else if (c == '#' && (previous == ' ' || previous == '\t' || previous == '\n')) {
      comment = true;
    } else if ((c == '"' || c == '\'') && std::strchr(" \t\n[{,:-?", previous) != nullptr) {
      quote = c;  // a quote opens a quoted scalar only where a scalar starts (not in "it's")
    } else if (c == '[' || c == '{') {
      if (++depth > deepest) deepest = depth;
      if (deepest >= stop_after) return deepest;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
    previous = c;
  }
  return deepest;
}

Status UnknownKnob(const std::string& key) {
  std::string message = FieldNameForMessage(key) + ": unknown knob";
  const std::string closest = ClosestRecipeKnobName(key);
  if (!closest.empty()) message += " (did you mean '" + closest + "'?)";
  message += "; see docs/recipe.md for the list";
  return Status::InvalidArgument(message);
}

// Appends `suffix` to an error's message (keeps the field name first).
Status WithSuffix(const Status& s, const std::string& suffix) {
  if (s.ok() || suffix.empty()) return s;
  return Status::InvalidArgument(s.message() + suffix);
}

}  // namespace

Status ParseRecipeYaml(const std::string& yaml_text, Recipe* out) {
  if (yaml_text.size() > kMaxRecipeYamlBytes) {
    return Status::InvalidArgument(
        "recipe: " + std::to_string(yaml_text.size()) + " bytes, over the limit of " +
        std::to_string(kMaxRecipeYamlBytes) + " (a recipe is a short mapping of knob: value)");
  }
  if (YamlFlowNestingDepth(yaml_text, kMaxRecipeYamlFlowDepth + 1) > kMaxRecipeYamlFlowDepth) {
    return Status::InvalidArgument("recipe: nested deeper than " +
                                   std::to_string(kMaxRecipeYamlFlowDepth) +
                                   " levels of [ ] and { } (a recipe is a flat mapping of knob: "
                                   "value)");
  }
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::DeepRecursion& e) {
    return Status::InvalidArgument(
        "recipe: nested too deep for a recipe (a flat mapping of knob: "
        "value)" +
        LineSuffix(e.mark));
  } catch (const YAML::ParserException& e) {
    return Status::InvalidArgument("recipe: YAML syntax error: " + e.msg + LineSuffix(e.mark));
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("recipe: YAML error: ") + e.what());
  }
  if (root.IsNull() || !root.IsDefined()) {
    return Status::InvalidArgument(
        "recipe: the document is empty; expected a mapping of knob: value (use {} for all "
        "defaults)");
  }
  if (!root.IsMap()) {
    return Status::InvalidArgument(
        std::string("recipe: expected a mapping of knob: value at the top level, got ") +
        // The scalar's size, never its text: the document may be any file a caller pointed at.
        (root.IsSequence() ? "a sequence"
                           : "a scalar of " + std::to_string(root.Scalar().size()) + " bytes") +
        LineSuffix(root.Mark()));
  }
  Recipe r;
  std::set<std::string> seen;
  try {
    for (const auto& entry : root) {
      const YAML::Node& key = entry.first;
      if (!key.IsScalar()) {
        return Status::InvalidArgument("recipe: keys must be plain knob names, got a " +
                                       std::string(key.IsMap() ? "mapping" : "sequence") +
                                       " as a key" + LineSuffix(key.Mark()));
      }
      const std::string name = key.Scalar();
      if (!seen.insert(name).second) {
        return Status::InvalidArgument(FieldNameForMessage(name) + ": duplicate key" +
                                       LineSuffix(key.Mark()));
      }
      const RecipeKnob* knob = FindRecipeKnob(name);
      if (knob == nullptr) return WithSuffix(UnknownKnob(name), LineSuffix(key.Mark()));
      XV_RETURN_IF_ERROR(WithSuffix(SetRecipeKnobFromYaml(*knob, entry.second, &r),
                                    LineSuffix(entry.second.Mark())));
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(std::string("recipe: YAML error: ") + e.what());
  }
  XV_RETURN_IF_ERROR(ValidateRecipe(r));
  *out = r;
  return Status::Ok();
}

Status ParseRecipeJson(const nlohmann::json& j, Recipe* out) {
  if (!j.is_object()) {
    return Status::InvalidArgument("recipe: expected a JSON object of knob: value, got " +
                                   std::string(j.type_name()));
  }
  Recipe r;
  for (const auto& item : j.items()) {
    if (item.key() == "derived") continue;  // written by ResolvedConfigJson; always recomputed
    const RecipeKnob* knob = FindRecipeKnob(item.key());
    if (knob == nullptr) return UnknownKnob(item.key());
    XV_RETURN_IF_ERROR(SetRecipeKnobFromJson(*knob, item.value(), &r));
  }
  XV_RETURN_IF_ERROR(ValidateRecipe(r));
  *out = r;
  return Status::Ok();
}

namespace {

// Sets one knob from YAML value text, checking its type and range only (no combination checks).
Status SetKnobFromText(const std::string& raw_key, const std::string& value_text, Recipe* r,
                       std::string* key_out) {
  // "--set ' matrix_lr '=..." is still matrix_lr.
  const size_t first = raw_key.find_first_not_of(" \t");
  const size_t last = raw_key.find_last_not_of(" \t");
  const std::string key = first == std::string::npos ? "" : raw_key.substr(first, last - first + 1);
  if (key.empty()) return Status::InvalidArgument("override: empty knob name (expected key=value)");
  *key_out = key;
  const RecipeKnob* knob = FindRecipeKnob(key);
  if (knob == nullptr) return UnknownKnob(key);
  if (YamlFlowNestingDepth(value_text, kMaxRecipeYamlFlowDepth + 1) > kMaxRecipeYamlFlowDepth) {
    return Status::InvalidArgument(key + ": the value is nested deeper than " +
                                   std::to_string(kMaxRecipeYamlFlowDepth) +
                                   " levels of [ ] and { }");
  }
  YAML::Node value;
  try {
    value = YAML::Load(value_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument(key + ": cannot read " + QuoteExcerpt(value_text) +
                                   " as a YAML value: " + e.msg);
  }
  return SetRecipeKnobFromYaml(*knob, value, r);
}

}  // namespace

Status ApplyOverride(const std::string& key, const std::string& value_text, Recipe* recipe) {
  Recipe r = *recipe;
  std::string name;
  XV_RETURN_IF_ERROR(SetKnobFromText(key, value_text, &r, &name));
  XV_RETURN_IF_ERROR(ValidateRecipe(r));
  *recipe = r;
  return Status::Ok();
}

Status ApplyOverrides(const std::vector<std::pair<std::string, std::string>>& overrides,
                      Recipe* recipe) {
  Recipe r = *recipe;
  std::set<std::string> seen;
  for (const auto& [key, value_text] : overrides) {
    std::string name;
    XV_RETURN_IF_ERROR(SetKnobFromText(key, value_text, &r, &name));
    if (!seen.insert(name).second) {
      return Status::InvalidArgument(name + ": overridden twice in one set of overrides");
    }
  }
  XV_RETURN_IF_ERROR(ValidateRecipe(r));
  *recipe = r;
  return Status::Ok();
}

Status ValidateRecipe(const Recipe& r) {
  for (const RecipeKnob& knob : RecipeKnobTable())
    XV_RETURN_IF_ERROR(CheckRecipeKnobRange(knob, r));
  if (r.head_dim % 2 != 0) {
    return Status::InvalidArgument(
        "head_dim: must be even (rotary embedding pairs channels), got " +
        std::to_string(r.head_dim));
  }
  if (r.warmup_ratio + r.warmdown_ratio > 1.0 + 1e-12) {
    return Status::InvalidArgument(
        "warmdown_ratio: warmup_ratio + warmdown_ratio must be <= 1, got " +
        std::to_string(r.warmup_ratio) + " + " + std::to_string(r.warmdown_ratio));
  }
  ResolvedSizes sizes;
  XV_RETURN_IF_ERROR(ResolveSizes(r, &sizes));
  const int64_t eval_batch_tokens = static_cast<int64_t>(r.device_batch_size) * r.sequence_len;
  if (r.eval_tokens < eval_batch_tokens) {
    return Status::InvalidArgument(
        "eval_tokens: must be at least one eval batch (device_batch_size * "
        "sequence_len = " +
        std::to_string(eval_batch_tokens) + "), got " + std::to_string(r.eval_tokens));
  }
  return Status::Ok();
}

Status CheckRecipeAgainstData(const Recipe& r, int data_vocab_size) {
  if (r.vocab_size != data_vocab_size) {
    return Status::InvalidArgument("vocab_size: the recipe says " + std::to_string(r.vocab_size) +
                                   " but the data's tokenizer has " +
                                   std::to_string(data_vocab_size) +
                                   " tokens; set vocab_size: " + std::to_string(data_vocab_size) +
                                   " or prepare data with that vocabulary");
  }
  return Status::Ok();
}

nlohmann::json RecipeToJson(const Recipe& r) {
  nlohmann::json j = nlohmann::json::object();
  for (const RecipeKnob& knob : RecipeKnobTable()) j[knob.name] = RecipeKnobToJson(knob, r);
  return j;
}

const std::vector<std::string>& RecipeKnobNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const RecipeKnob& knob : RecipeKnobTable()) v.push_back(knob.name);
    return v;
  }();
  return names;
}

}  // namespace xv
