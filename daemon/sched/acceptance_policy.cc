#include "daemon/sched/acceptance_policy.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>

#include <yaml-cpp/yaml.h>

#include "common/bounded_json.h"
#include "common/message_field_name.h"
#include "common/untrusted_text.h"

namespace xv::sched {
namespace {

constexpr int kMaxRuns = 64;  // per candidate or head, per round
const char* const kFieldNames[] = {"mode",
                                   "confidence",
                                   "min_effect",
                                   "replicates",
                                   "head_controls",
                                   "max_keeps_per_round",
                                   "correction",
                                   "band_k",
                                   "max_throughput_drift",
                                   "adjust_for_throughput"};

std::string Num(double v) {
  std::ostringstream out;
  out.precision(12);
  out << v;
  return out.str();
}

std::string KnownFields() {
  std::string names;
  for (const char* name : kFieldNames) {
    if (!names.empty()) names += ", ";
    names += name;
  }
  return names;
}

// A value for an error message: a scalar as written (a string as a short excerpt), a container
// described by its type and size, never dumped (the caller's value may be of any size or depth).
std::string Got(const nlohmann::json& value) {
  if (value.is_number() || value.is_boolean() || value.is_null()) return value.dump();
  if (value.is_string()) return "the string " + QuoteExcerpt(value.get_ref<const std::string&>());
  return DescribeJsonValue(value);
}

Status ReadNumber(const nlohmann::json& value, const char* field, double* out) {
  if (!value.is_number()) {
    return Status::InvalidArgument(std::string(field) + ": must be a number, got " + Got(value));
  }
  *out = value.get<double>();
  return Status::Ok();
}

Status ReadInteger(const nlohmann::json& value, const char* field, int* out) {
  if (value.is_number_integer()) {
    const int64_t v = value.get<int64_t>();
    if (v < -1000000 || v > 1000000) {
      return Status::InvalidArgument(std::string(field) + ": out of range, got " + Got(value));
    }
    *out = static_cast<int>(v);
    return Status::Ok();
  }
  if (value.is_number_float()) {
    const double v = value.get<double>();
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) <= 1000000) {
      *out = static_cast<int>(v);
      return Status::Ok();
    }
  }
  return Status::InvalidArgument(std::string(field) + ": must be an integer, got " + Got(value));
}

Status ReadBool(const nlohmann::json& value, const char* field, bool* out) {
  if (!value.is_boolean()) {
    return Status::InvalidArgument(std::string(field) + ": must be true or false, got " +
                                   Got(value));
  }
  *out = value.get<bool>();
  return Status::Ok();
}

Status ReadString(const nlohmann::json& value, const char* field, std::string* out) {
  if (!value.is_string()) {
    return Status::InvalidArgument(std::string(field) + ": must be a string, got " + Got(value));
  }
  *out = value.get<std::string>();
  return Status::Ok();
}

// A YAML scalar as the JSON value it spells: quoted text stays a string; plain text becomes
// null, a boolean, an integer or a number when it reads as one.
nlohmann::json YamlScalarToJson(const YAML::Node& node) {
  const std::string& text = node.Scalar();
  if (node.Tag() == "!") return text;  // quoted
  if (text.empty() || text == "~" || text == "null") return nullptr;
  if (text == "true") return true;
  if (text == "false") return false;
  errno = 0;
  char* end = nullptr;
  const long long integer = std::strtoll(text.c_str(), &end, 10);
  if (errno == 0 && end == text.c_str() + text.size()) return integer;
  errno = 0;
  const double number = std::strtod(text.c_str(), &end);
  if (errno == 0 && end == text.c_str() + text.size()) return number;
  return text;
}

std::string MarkText(const YAML::Mark& mark) {
  return " (line " + std::to_string(mark.line + 1) + ", column " + std::to_string(mark.column + 1) +
         ")";
}

}  // namespace

AcceptancePolicy DefaultAcceptancePolicy(AcceptanceMode mode) {
  AcceptancePolicy policy;
  policy.mode = mode;
  if (mode == AcceptanceMode::kNoiseBand) {
    policy.replicates = 1;
    policy.head_controls = 5;
  }
  return policy;
}

const char* AcceptanceModeName(AcceptanceMode mode) {
  return mode == AcceptanceMode::kWelch ? "welch" : "noise_band";
}

const char* CorrectionName(MultipleComparisonCorrection correction) {
  return correction == MultipleComparisonCorrection::kBonferroni ? "bonferroni" : "none";
}

Status ValidateAcceptancePolicy(const AcceptancePolicy& p) {
  if (!(p.confidence > 0.5 && p.confidence < 1.0)) {
    return Status::InvalidArgument("confidence: must be in (0.5, 1), got " + Num(p.confidence));
  }
  if (!(p.min_effect >= 0.0 && p.min_effect < 1.0)) {
    return Status::InvalidArgument("min_effect: must be in [0, 1) bpb, got " + Num(p.min_effect));
  }
  const int min_replicates = p.mode == AcceptanceMode::kWelch ? 2 : 1;
  if (p.replicates < min_replicates || p.replicates > kMaxRuns) {
    return Status::InvalidArgument(
        "replicates: must be in [" + std::to_string(min_replicates) + ", " +
        std::to_string(kMaxRuns) + "] under mode " + AcceptanceModeName(p.mode) + ", got " +
        std::to_string(p.replicates) +
        (p.mode == AcceptanceMode::kWelch ? " (single runs need mode noise_band)" : ""));
  }
  if (p.head_controls < 2 || p.head_controls > kMaxRuns) {
    return Status::InvalidArgument("head_controls: must be in [2, " + std::to_string(kMaxRuns) +
                                   "] (the head's spread needs two runs), got " +
                                   std::to_string(p.head_controls));
  }
  if (p.max_keeps_per_round != 1) {
    return Status::InvalidArgument(
        "max_keeps_per_round: only 1 is supported (the head is one recipe), got " +
        std::to_string(p.max_keeps_per_round));
  }
  if (p.band_k.has_value()) {
    if (p.mode != AcceptanceMode::kNoiseBand) {
      return Status::InvalidArgument("band_k: only meaningful under mode noise_band");
    }
    if (!(*p.band_k > 0.0 && *p.band_k <= 100.0)) {
      return Status::InvalidArgument("band_k: must be in (0, 100], got " + Num(*p.band_k));
    }
  }
  if (!(p.max_throughput_drift > 0.0 && p.max_throughput_drift <= 10.0)) {
    return Status::InvalidArgument(
        "max_throughput_drift: must be a fraction in (0, 10] (0.10 = 10 %), got " +
        Num(p.max_throughput_drift));
  }
  return Status::Ok();
}

Status ParseAcceptancePolicyJson(const nlohmann::json& json, AcceptancePolicy* policy) {
  if (json.is_null()) {
    *policy = AcceptancePolicy();
    return Status::Ok();
  }
  if (!json.is_object()) {
    return Status::InvalidArgument("acceptance policy: must be an object, got " + Got(json));
  }
  const std::set<std::string> known(std::begin(kFieldNames), std::end(kFieldNames));
  for (const auto& item : json.items()) {
    if (known.count(item.key()) == 0) {
      return Status::InvalidArgument(FieldNameForMessage(item.key()) +
                                     ": unknown acceptance policy field (known: " + KnownFields() +
                                     ")");
    }
  }
  AcceptanceMode mode = AcceptanceMode::kWelch;
  if (json.contains("mode")) {
    std::string name;
    XV_RETURN_IF_ERROR(ReadString(json["mode"], "mode", &name));
    if (name == "welch") {
      mode = AcceptanceMode::kWelch;
    } else if (name == "noise_band") {
      mode = AcceptanceMode::kNoiseBand;
    } else {
      return Status::InvalidArgument("mode: must be welch or noise_band, got " +
                                     QuoteExcerpt(name));
    }
  }
  AcceptancePolicy p = DefaultAcceptancePolicy(mode);
  if (json.contains("confidence")) {
    XV_RETURN_IF_ERROR(ReadNumber(json["confidence"], "confidence", &p.confidence));
  }
  if (json.contains("min_effect")) {
    XV_RETURN_IF_ERROR(ReadNumber(json["min_effect"], "min_effect", &p.min_effect));
  }
  if (json.contains("replicates")) {
    XV_RETURN_IF_ERROR(ReadInteger(json["replicates"], "replicates", &p.replicates));
  }
  if (json.contains("head_controls")) {
    XV_RETURN_IF_ERROR(ReadInteger(json["head_controls"], "head_controls", &p.head_controls));
  }
  if (json.contains("max_keeps_per_round")) {
    XV_RETURN_IF_ERROR(
        ReadInteger(json["max_keeps_per_round"], "max_keeps_per_round", &p.max_keeps_per_round));
  }
  if (json.contains("correction")) {
    std::string name;
    XV_RETURN_IF_ERROR(ReadString(json["correction"], "correction", &name));
    if (name == "bonferroni") {
      p.correction = MultipleComparisonCorrection::kBonferroni;
    } else if (name == "none") {
      p.correction = MultipleComparisonCorrection::kNone;
    } else {
      return Status::InvalidArgument("correction: must be bonferroni or none, got " +
                                     QuoteExcerpt(name));
    }
  }
  if (json.contains("band_k") && !json["band_k"].is_null()) {
    double k = 0.0;
    XV_RETURN_IF_ERROR(ReadNumber(json["band_k"], "band_k", &k));
    p.band_k = k;
  }
  if (json.contains("max_throughput_drift")) {
    XV_RETURN_IF_ERROR(
        ReadNumber(json["max_throughput_drift"], "max_throughput_drift", &p.max_throughput_drift));
  }
  if (json.contains("adjust_for_throughput")) {
    XV_RETURN_IF_ERROR(
        ReadBool(json["adjust_for_throughput"], "adjust_for_throughput", &p.adjust_for_throughput));
  }
  XV_RETURN_IF_ERROR(ValidateAcceptancePolicy(p));
  *policy = p;
  return Status::Ok();
}

Status ParseAcceptancePolicyJsonText(const std::string& text, AcceptancePolicy* policy) {
  if (JsonNestingDepth(text) > kMaxJsonDepth) {
    return Status::InvalidArgument("acceptance policy: nested deeper than " +
                                   std::to_string(kMaxJsonDepth) + " levels of arrays and objects");
  }
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    // The position only: the exception's text quotes the input.
    return Status::InvalidArgument("acceptance policy: invalid JSON at byte " +
                                   std::to_string(e.byte));
  } catch (const std::exception&) {
    return Status::InvalidArgument("acceptance policy: invalid JSON");
  }
  return ParseAcceptancePolicyJson(json, policy);
}

Status ParseAcceptancePolicyYaml(const std::string& yaml_text, AcceptancePolicy* policy) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("acceptance policy: invalid YAML: " + e.msg + MarkText(e.mark));
  }
  if (!root.IsDefined() || root.IsNull()) return ParseAcceptancePolicyJson(nullptr, policy);
  if (!root.IsMap()) {
    return Status::InvalidArgument("acceptance policy: must be a mapping of fields" +
                                   MarkText(root.Mark()));
  }
  nlohmann::json json = nlohmann::json::object();
  std::map<std::string, YAML::Mark> marks;
  try {
    for (const auto& entry : root) {
      if (!entry.first.IsScalar()) {
        return Status::InvalidArgument("acceptance policy: field names must be plain words" +
                                       MarkText(entry.first.Mark()));
      }
      const std::string key = entry.first.as<std::string>();
      marks[key] = entry.second.Mark();
      if (json.contains(key)) {
        return Status::InvalidArgument(FieldNameForMessage(key) + ": given twice" +
                                       MarkText(entry.first.Mark()));
      }
      if (!entry.second.IsScalar() && !entry.second.IsNull()) {
        return Status::InvalidArgument(FieldNameForMessage(key) + ": must be a scalar" +
                                       MarkText(entry.second.Mark()));
      }
      json[key] = entry.second.IsNull() ? nlohmann::json(nullptr) : YamlScalarToJson(entry.second);
    }
  } catch (const YAML::Exception& e) {
    return Status::InvalidArgument("acceptance policy: invalid YAML: " + e.msg + MarkText(e.mark));
  }
  Status status = ParseAcceptancePolicyJson(json, policy);
  if (status.ok()) return status;
  // Point at the field the message names.
  const std::string& message = status.message();
  const auto colon = message.find(':');
  if (colon != std::string::npos) {
    const auto mark = marks.find(message.substr(0, colon));
    if (mark != marks.end()) return Status::InvalidArgument(message + MarkText(mark->second));
  }
  return status;
}

nlohmann::json AcceptancePolicyToJson(const AcceptancePolicy& p) {
  nlohmann::json json = {{"mode", AcceptanceModeName(p.mode)},
                         {"confidence", p.confidence},
                         {"min_effect", p.min_effect},
                         {"replicates", p.replicates},
                         {"head_controls", p.head_controls},
                         {"max_keeps_per_round", p.max_keeps_per_round},
                         {"correction", CorrectionName(p.correction)},
                         {"max_throughput_drift", p.max_throughput_drift},
                         {"adjust_for_throughput", p.adjust_for_throughput}};
  if (p.band_k.has_value()) json["band_k"] = *p.band_k;
  return json;
}

}  // namespace xv::sched
