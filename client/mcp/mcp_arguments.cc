#include "client/mcp/mcp_arguments.h"

#include <vector>

#include "client/requests/candidate_spec.h"
#include "client/requests/sweep_expansion.h"
#include "common/message_field_name.h"

namespace xv::client {
namespace {

using nlohmann::json;

std::string Indexed(const std::string& field, size_t i) {
  return field + "[" + std::to_string(i) + "]";
}

// A list of strings, each checked by `check` (naming field[i]).
template <typename Check>
Status StringList(const json& list, const std::string& field, Check check,
                  std::vector<std::string>* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    if (!list[i].is_string()) {
      return Status::InvalidArgument(Indexed(field, i) +
                                     ": expected a string \"k=v\" or an object");
    }
    const std::string text = list[i].get<std::string>();
    XV_RETURN_IF_ERROR(check(text).WithContext(Indexed(field, i) + ": "));
    out->push_back(text);
  }
  return Status::Ok();
}

Status SetArgs(const json& set, std::vector<std::string>* out) {
  const std::string field = "arguments.set";
  if (set.is_object()) {
    for (const auto& [key, value] : set.items()) {
      std::string text;
      XV_RETURN_IF_ERROR(OverrideValueText(value, field + "." + FieldNameForMessage(key), &text));
      v1::Override o;
      const std::string kv = key + "=" + text;
      XV_RETURN_IF_ERROR(ParseOverride(kv, field + "." + FieldNameForMessage(key), &o));
      if (o.key() != key || o.value() != text) {
        return Status::InvalidArgument(field + "." + FieldNameForMessage(key) +
                                       ": the key or value has leading or trailing blanks, or "
                                       "the key contains '='");
      }
      out->push_back(kv);
    }
    return Status::Ok();
  }
  if (set.is_array()) {
    return StringList(
        set, field,
        [](const std::string& t) {
          v1::Override o;
          return ParseOverride(t, "override", &o);
        },
        out);
  }
  return Status::InvalidArgument(field + ": expected an object of overrides or a list of \"k=v\"");
}

Status CandidateArgs(const json& list, std::vector<std::string>* out) {
  const std::string field = "arguments.candidates";
  if (!list.is_array()) return Status::InvalidArgument(field + ": expected an array");
  for (size_t i = 0; i < list.size(); ++i) {
    const json& c = list[i];
    std::string text;
    if (c.is_object()) {
      XV_RETURN_IF_ERROR(OverrideMapText(c, Indexed(field, i), &text));
    } else if (c.is_string()) {
      text = c.get<std::string>();
      std::vector<v1::Override> overrides;
      XV_RETURN_IF_ERROR(ParseCandidate(text, &overrides).WithContext(Indexed(field, i) + ": "));
    } else {
      return Status::InvalidArgument(Indexed(field, i) +
                                     ": expected an object of overrides or a \"k=v,k2=v2\" string");
    }
    out->push_back(text);
  }
  return Status::Ok();
}

Status SweepArgs(const json& sweep, std::vector<std::string>* out) {
  const std::string field = "arguments.sweep";
  if (sweep.is_object()) {
    for (const auto& [key, values] : sweep.items()) {
      const std::string kfield = field + "." + FieldNameForMessage(key);
      if (!values.is_array() || values.empty()) {
        return Status::InvalidArgument(kfield + ": expected a non-empty array of values");
      }
      std::string text = key + "=";
      std::vector<std::string> texts;
      for (size_t i = 0; i < values.size(); ++i) {
        std::string v;
        XV_RETURN_IF_ERROR(OverrideValueText(values[i], Indexed(kfield, i), &v));
        text += (i == 0 ? "" : ",") + v;
        texts.push_back(v);
      }
      SweepAxis axis;
      XV_RETURN_IF_ERROR(ParseSweep(text, &axis).WithContext(kfield + ": "));
      if (axis.key != key || axis.values != texts) {
        return Status::InvalidArgument(kfield +
                                       ": a value has a comma or quote outside brackets, or "
                                       "leading or trailing blanks; write it as JSON, not text");
      }
      out->push_back(text);
    }
    return Status::Ok();
  }
  if (sweep.is_array()) {
    return StringList(
        sweep, field,
        [](const std::string& t) {
          SweepAxis axis;
          return ParseSweep(t, &axis);
        },
        out);
  }
  return Status::InvalidArgument(field +
                                 ": expected an object {knob: [values]} or a list of "
                                 "\"k=v1,v2\"");
}

}  // namespace

Status OverrideValueText(const nlohmann::json& value, const std::string& field, std::string* out) {
  if (value.is_null()) {
    return Status::InvalidArgument(field + ": null is not a value (leave the knob out instead)");
  }
  if (value.is_string()) {
    *out = value.get<std::string>();
    if (out->empty()) return Status::InvalidArgument(field + ": empty value");
    return Status::Ok();
  }
  *out = value.dump();
  return Status::Ok();
}

Status OverrideMapText(const nlohmann::json& overrides, const std::string& field,
                       std::string* out) {
  if (!overrides.is_object() || overrides.empty()) {
    return Status::InvalidArgument(field + ": expected a non-empty object {knob: value}");
  }
  std::string text;
  std::vector<std::pair<std::string, std::string>> expected;
  for (const auto& [key, value] : overrides.items()) {
    std::string v;
    XV_RETURN_IF_ERROR(OverrideValueText(value, field + "." + FieldNameForMessage(key), &v));
    text += (text.empty() ? "" : ",") + key + "=" + v;
    expected.emplace_back(key, v);
  }
  std::vector<v1::Override> parsed;
  Status st = ParseCandidate(text, &parsed);
  bool same = st.ok() && parsed.size() == expected.size();
  for (size_t i = 0; same && i < parsed.size(); ++i) {
    same = parsed[i].key() == expected[i].first && parsed[i].value() == expected[i].second;
  }
  if (!same) {
    // Name the first entry that does not read back on its own.
    for (const auto& [key, v] : expected) {
      std::vector<v1::Override> one;
      Status s1 = ParseCandidate(key + "=" + v, &one);
      if (!s1.ok() || one.size() != 1 || one[0].key() != key || one[0].value() != v) {
        return Status::InvalidArgument(field + "." + FieldNameForMessage(key) +
                                       ": the value has a comma or quote outside brackets, or "
                                       "leading or trailing blanks (or the key has '=' or ','); "
                                       "write it as JSON, not text");
      }
    }
    return Status::InvalidArgument(field + ": the overrides do not read back as given");
  }
  *out = text;
  return Status::Ok();
}

Status SubmitArgsFromJson(const nlohmann::json& a, SubmitArgs* out) {
  SubmitArgs args;
  if (a.contains("recipe_path")) args.recipe_path = a["recipe_path"].get<std::string>();
  if (a.contains("campaign")) args.campaign = a["campaign"].get<std::string>();
  if (args.recipe_path.empty() && args.campaign.empty()) {
    return Status::InvalidArgument(
        "arguments.recipe_path: give a recipe file, or campaign to build the candidates from its "
        "head");
  }
  if (a.contains("set")) XV_RETURN_IF_ERROR(SetArgs(a["set"], &args.sets));
  if (a.contains("candidates"))
    XV_RETURN_IF_ERROR(CandidateArgs(a["candidates"], &args.candidates));
  if (a.contains("sweep")) XV_RETURN_IF_ERROR(SweepArgs(a["sweep"], &args.sweeps));
  if (a.contains("replicates")) args.replicates = static_cast<int>(a["replicates"].get<double>());
  if (a.contains("round_kind")) args.kind = a["round_kind"].get<std::string>();
  if (a.contains("trainer")) args.trainer = a["trainer"].get<std::string>();
  if (a.contains("priority")) args.priority = static_cast<int>(a["priority"].get<double>());
  // Code candidates (issue 16): files on this machine, or the texts themselves.
  for (const auto& [key, list] :
       {std::pair<const char*, std::vector<std::string>*>{"source_paths", &args.sources},
        {"patch_paths", &args.patches},
        {"sources", &args.source_texts},
        {"patches", &args.patch_texts}}) {
    if (!a.contains(key)) continue;
    for (size_t i = 0; i < a[key].size(); ++i) {
      if (!a[key][i].is_string()) {
        return Status::InvalidArgument(std::string("arguments.") + key + "[" + std::to_string(i) +
                                       "]: must be a string");
      }
      list->push_back(a[key][i].get<std::string>());
    }
  }
  *out = std::move(args);
  return Status::Ok();
}

}  // namespace xv::client
