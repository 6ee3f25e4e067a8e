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
        key != "max_concurrent") {
      return Status::InvalidArgument("budget." + FieldNameForMessage(key) +
                                     ": unknown field (known: time_budget_s, "
                                     "startup_allowance_s, eval_allowance_s, max_concurrent)");
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
    // An integer: 2 and 2.0 are accepted, 2.5, "2" and true are not.
    const nlohmann::json& m = j.at("max_concurrent");
    const bool integral =
        m.is_number_integer() || (m.is_number_float() && std::isfinite(m.get<double>()) &&
                                  m.get<double>() == std::floor(m.get<double>()));
    const double d = m.is_number() ? m.get<double>() : 0.0;
    if (!integral || d < 1 || d > static_cast<double>(kMaxConcurrent)) {
      return Status::InvalidArgument(
          "budget.max_concurrent: must be an integer number of experiments in 1..4096, got " +
          Got(m));
    }
    c.max_concurrent = static_cast<int>(d);
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

}  // namespace xv::daemon
