#include "daemon/engine/budget_contract.h"

#include <cmath>
#include <cstdint>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/message_field_name.h"

namespace xv::daemon {
namespace {

constexpr double kMaxSeconds = 86400.0;
constexpr int64_t kMaxConcurrent = 4096;
constexpr int64_t kMaxSequenceLen = 1048576;       // the recipe's sequence_len range
constexpr int64_t kMaxEvalTokens = 1000000000000;  // the recipe's eval_tokens range

std::string FormatSeconds(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

// A value for an error message: a number as written, anything else described by its type and size,
// never dumped (the caller's value may be of any size or depth).
std::string Got(const nlohmann::json& v) { return v.is_number() ? v.dump() : DescribeJsonValue(v); }

Status ReadSeconds(const nlohmann::json& j, const std::string& key, double min, double* out) {
  const nlohmann::json& v = j.at(key);
  const std::string range = FormatSeconds(min) + ".." + FormatSeconds(kMaxSeconds);
  if (!v.is_number()) {
    return Status::InvalidArgument("budget." + key + ": must be a number of seconds in " + range +
                                   ", got " + Got(v));
  }
  const double d = v.get<double>();
  if (!std::isfinite(d) || d < min || d > kMaxSeconds) {
    return Status::InvalidArgument("budget." + key + ": must be a number of seconds in " + range +
                                   ", got " + Got(v));
  }
  *out = d;
  return Status::Ok();
}

// An integer in 1..max: 2 and 2.0 are accepted, 2.5, "2" and true are not.
Status ReadInteger(const nlohmann::json& j, const std::string& key, int64_t max,
                   const std::string& what, int64_t* out) {
  const nlohmann::json& m = j.at(key);
  const bool integral =
      m.is_number_integer() || (m.is_number_float() && std::isfinite(m.get<double>()) &&
                                m.get<double>() == std::floor(m.get<double>()));
  const double d = m.is_number() ? m.get<double>() : 0.0;
  if (!integral || d < 1 || d > static_cast<double>(max)) {
    return Status::InvalidArgument("budget." + key + ": must be an integer " + what + " in 1.." +
                                   std::to_string(max) + ", got " + Got(m));
  }
  *out = static_cast<int64_t>(d);
  return Status::Ok();
}

}  // namespace

Status ParseBudgetContract(const std::string& json_text, BudgetContract* out) {
  BudgetContract c;
  if (json_text.empty()) {
    *out = c;
    return Status::Ok();
  }
  constexpr const char* kExpected =
      "budget: expected a JSON object such as {\"time_budget_s\": 300}";
  nlohmann::json j;
  const Status parsed = ParseBoundedJson(json_text, "budget_json", &j);
  if (!parsed.ok()) {
    return Status::InvalidArgument(parsed.message() + " (" + kExpected + ")");
  }
  if (!j.is_object()) {
    return Status::InvalidArgument(std::string(kExpected) + ", got " + DescribeJsonValue(j) +
                                   " in budget_json");
  }
  for (const auto& [key, value] : j.items()) {
    if (key != "time_budget_s" && key != "startup_allowance_s" && key != "eval_allowance_s" &&
        key != "max_concurrent" && key != "sequence_len" && key != "eval_tokens") {
      return Status::InvalidArgument("budget." + FieldNameForMessage(key) +
                                     ": unknown field (known: time_budget_s, "
                                     "startup_allowance_s, eval_allowance_s, max_concurrent, "
                                     "sequence_len, eval_tokens)");
    }
  }
  double v = 0;
  if (j.contains("time_budget_s")) {
    XV_RETURN_IF_ERROR(ReadSeconds(j, "time_budget_s", 1.0, &v));
    c.time_budget_s = v;
  }
  if (j.contains("startup_allowance_s")) {
    XV_RETURN_IF_ERROR(ReadSeconds(j, "startup_allowance_s", 0.0, &v));
    c.startup_allowance_s = v;
  }
  if (j.contains("eval_allowance_s")) {
    XV_RETURN_IF_ERROR(ReadSeconds(j, "eval_allowance_s", 0.0, &v));
    c.eval_allowance_s = v;
  }
  if (j.contains("max_concurrent")) {
    int64_t n = 0;
    XV_RETURN_IF_ERROR(
        ReadInteger(j, "max_concurrent", kMaxConcurrent, "number of experiments", &n));
    c.max_concurrent = static_cast<int>(n);
  }
  if (j.contains("sequence_len")) {
    int64_t n = 0;
    XV_RETURN_IF_ERROR(ReadInteger(j, "sequence_len", kMaxSequenceLen, "number of tokens", &n));
    c.sequence_len = n;
  }
  if (j.contains("eval_tokens")) {
    int64_t n = 0;
    XV_RETURN_IF_ERROR(ReadInteger(j, "eval_tokens", kMaxEvalTokens, "number of tokens", &n));
    c.eval_tokens = n;
  }
  *out = c;
  return Status::Ok();
}

std::string BudgetContractToJson(const BudgetContract& contract) {
  // Whole seconds are written as integers ({"time_budget_s":2}, not 2.0).
  auto seconds = [](double v) -> nlohmann::json {
    if (v == std::floor(v)) return static_cast<int64_t>(v);
    return v;
  };
  nlohmann::json j = nlohmann::json::object();
  if (contract.time_budget_s) j["time_budget_s"] = seconds(*contract.time_budget_s);
  j["startup_allowance_s"] = seconds(contract.startup_allowance_s);
  if (contract.eval_allowance_s) j["eval_allowance_s"] = seconds(*contract.eval_allowance_s);
  if (contract.max_concurrent) j["max_concurrent"] = *contract.max_concurrent;
  if (contract.sequence_len) j["sequence_len"] = *contract.sequence_len;
  if (contract.eval_tokens) j["eval_tokens"] = *contract.eval_tokens;
  return j.dump();
}

double ContractHardDeadlineSeconds(const BudgetContract& contract, double time_budget_s) {
  return time_budget_s + contract.startup_allowance_s +
         contract.eval_allowance_s.value_or(time_budget_s);
}

Status CheckContractTimeBudget(const BudgetContract& contract, double time_budget_s) {
  if (!contract.time_budget_s || *contract.time_budget_s == time_budget_s) return Status::Ok();
  return Status::InvalidArgument(
      "time_budget_s: fixed at " + FormatSeconds(*contract.time_budget_s) +
      " s by the campaign's budget contract (got " + FormatSeconds(time_budget_s) + ")");
}

void PinContractMetric(BudgetContract* contract, int* sequence_len, int64_t* eval_tokens) {
  if (contract->sequence_len) *sequence_len = static_cast<int>(*contract->sequence_len);
  if (contract->eval_tokens) *eval_tokens = *contract->eval_tokens;
  contract->sequence_len = *sequence_len;
  contract->eval_tokens = *eval_tokens;
}

Status CheckContractMetric(const BudgetContract& contract, int64_t sequence_len,
                           int64_t eval_tokens) {
  if (contract.sequence_len && *contract.sequence_len != sequence_len) {
    return Status::InvalidArgument(
        "sequence_len: fixed at " + std::to_string(*contract.sequence_len) +
        " by the campaign's metric contract (val_bpb is measured at this context length; got " +
        std::to_string(sequence_len) + ")");
  }
  if (contract.eval_tokens && *contract.eval_tokens != eval_tokens) {
    return Status::InvalidArgument("eval_tokens: fixed at " +
                                   std::to_string(*contract.eval_tokens) +
                                   " by the campaign's metric contract (val_bpb is measured over "
                                   "this many validation tokens; got " +
                                   std::to_string(eval_tokens) + ")");
  }
  return Status::Ok();
}

}  // namespace xv::daemon
