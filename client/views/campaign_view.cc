#include "client/views/campaign_view.h"

#include <cmath>
#include <optional>
#include <set>
#include <sstream>

#include "client/views/number_format.h"
#include "client/views/text_table.h"
#include "common/bounded_json_or_discarded.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

nlohmann::json ParsedOrNull(const std::string& text) {
  if (text.empty()) return nullptr;
  nlohmann::json j = ParseBoundedJsonOrDiscarded(text);
  if (j.is_discarded()) return nullptr;
  return j;
}

std::string ShortHash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) : h; }

// A number of a decision JSON with `decimals`, "-" for null or absent.
std::string Figure(const nlohmann::json& obj, const char* key, int decimals) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return "-";
  return FormatFixed(obj[key].get<double>(), decimals);
}

std::string Count(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number_integer()) return "-";
  return std::to_string(obj[key].get<int64_t>());
}

std::string Str(const nlohmann::json& obj, const char* key) {
  if (!obj.is_object() || !obj.contains(key) || !obj[key].is_string()) return "";
  return obj[key].get<std::string>();
}

// A number of seconds as the contract stores it: 300, 2.5.
std::string Seconds(double v) {
  if (v == std::floor(v) && std::fabs(v) < 1e15) return std::to_string(static_cast<int64_t>(v));
  return nlohmann::json(v).dump();
}

}  // namespace

std::string RenderBudgetContract(const std::string& budget_json) {
  nlohmann::json j =
      budget_json.empty() ? nlohmann::json::object() : ParseBoundedJsonOrDiscarded(budget_json);
  if (!j.is_object()) return budget_json + " (not a JSON object)";
  std::set<std::string> shown;  // the keys rendered by name; the rest are appended as key=value
  auto seconds = [&j, &shown](const char* key, std::optional<double>* out) {
    if (!j.contains(key) || !j[key].is_number()) return;
    *out = j[key].get<double>();
    shown.insert(key);
  };
  std::optional<double> time_budget, startup, eval;
  seconds("time_budget_s", &time_budget);
  seconds("startup_allowance_s", &startup);
  seconds("eval_allowance_s", &eval);
  const double startup_s = startup.value_or(300.0);  // the daemon's default
  std::string deadline;
  if (time_budget) {
    deadline = Seconds(*time_budget + startup_s + eval.value_or(*time_budget)) + " s";
  } else if (eval) {
    deadline = "time budget + " + Seconds(startup_s + *eval) + " s";
  } else {
    deadline = "2 x time budget + " + Seconds(startup_s) + " s";
  }
  std::string out = "time_budget_s=" + (time_budget ? Seconds(*time_budget) : "each recipe's own");
  out += ", startup_allowance_s=" + Seconds(startup_s);
  out += ", eval_allowance_s=" + (eval ? Seconds(*eval) : "the run's time budget");
  out += " (hard deadline " + deadline + ")";
  std::string max_concurrent = "no limit";
  if (j.contains("max_concurrent") && j["max_concurrent"].is_number()) {
    max_concurrent = j["max_concurrent"].dump();
    shown.insert("max_concurrent");
  }
  out += ", max_concurrent=" + max_concurrent;
  for (const auto& [key, value] : j.items()) {
    if (shown.count(key) == 0) out += ", " + key + "=" + value.dump();
  }
  return out;
}

nlohmann::json RoundJson(const v1::RoundInfo& r) {
  nlohmann::json j = {{"id", r.id()},
                      {"kind", r.kind()},
                      {"state", r.state()},
                      {"decision_summary", r.decision_summary()},
                      {"kept_experiment_id", r.kept_experiment_id()},
                      {"kept_candidate", r.kept_candidate()},
                      {"head_recipe_hash", r.head_recipe_hash()},
                      {"experiments", r.experiments()},
                      {"unfinished", r.unfinished()},
                      {"created_at", r.created_at()},
                      {"decided_at", r.decided_at()}};
  j["decision"] = ParsedOrNull(r.decision_json());
  if (j["decision"].is_null() && !r.decision_json().empty()) j["decision_text"] = r.decision_json();
  // Issue 14: the round's run order and drift figures.
  j["order_seed"] = r.order_seed();
  nlohmann::json order = nlohmann::json::array();
  for (const auto& slot : r.run_order()) {
    order.push_back({{"position", slot.position()},
                     {"block", slot.block()},
                     {"experiment_id", slot.experiment_id()},
                     {"arm", slot.arm()}});
  }
  j["run_order"] = order;
  j["drift"] = ParsedOrNull(r.drift_json());
  return j;
}

std::string RenderRunOrder(const v1::RoundInfo& r) {
  if (r.run_order_size() == 0) return "";
  std::string text = "seed " + std::to_string(r.order_seed()) + ":";
  int block = -1;
  for (const auto& slot : r.run_order()) {
    if (slot.block() != block) {
      block = slot.block();
      text += std::string(block == 0 ? " " : " | ") + "[" + std::to_string(block) + "]";
    }
    text += " " + slot.arm() + " #" + std::to_string(slot.experiment_id());
  }
  return text;
}

std::string RenderDrift(const std::string& drift_json) {
  const nlohmann::json d = ParsedOrNull(drift_json);
  if (!d.is_object() || !d.contains("arms") || !d["arms"].is_array()) return "";
  auto percent = [](const nlohmann::json& obj, const char* key) -> std::string {
    if (!obj.is_object() || !obj.contains(key) || !obj[key].is_number()) return "";
    const double v = 100.0 * obj[key].get<double>();
    return (v >= 0 ? "+" : "") + FormatFixed(v, 1) + "%";
  };
  std::string text = "tok/s";
  bool first = true;
  for (const auto& a : d["arms"]) {
    text +=
        std::string(first ? " " : ", ") + Str(a, "arm") + " " + Figure(a, "tok_per_sec_mean", 0);
    first = false;
    if (a.contains("tok_per_sec_sd") && a["tok_per_sec_sd"].is_number()) {
      text += " sd " + Figure(a, "tok_per_sec_sd", 0);
    }
    text += " (steps " + Figure(a, "steps_mean", 1) + ")";
    const std::string vs = percent(a, "vs_controls");
    if (!vs.empty()) text += " " + vs;
    if (a.value("step_work_by_design", false)) text += " [changes step work]";
  }
  const std::string trend = percent(d, "controls_trend");
  if (!trend.empty()) {
    text += "; controls' trend " + trend + " over " + Figure(d, "span_s", 1) + " s";
  }
  const std::string spread = percent(d, "controls_spread");
  if (!spread.empty()) text += ", spread " + spread;
  if (d.contains("corr_val_bpb_tok_per_sec") && d["corr_val_bpb_tok_per_sec"].is_number()) {
    text += "; corr(val_bpb, tok/s) " + Figure(d, "corr_val_bpb_tok_per_sec", 2);
  }
  return text;
}

nlohmann::json CampaignJson(const v1::Campaign& c) {
  nlohmann::json j = {{"id", c.id()},
                      {"name", c.name()},
                      {"state", c.state()},
                      {"objective", c.objective()},
                      {"device_filter", c.device_filter()},
                      {"trainer", c.trainer()},
                      {"max_attempts", c.max_attempts()},
                      {"base_recipe_hash", c.base_recipe_hash()},
                      {"head_recipe_hash", c.head_recipe_hash()},
                      {"created_at", c.created_at()}};
  j["policy"] = ParsedOrNull(c.policy_json());
  j["budget"] = ParsedOrNull(c.budget_json());
  j["head_recipe"] = ParsedOrNull(c.head_recipe_json());
  nlohmann::json rounds = nlohmann::json::array();
  for (const auto& r : c.rounds()) rounds.push_back(RoundJson(r));
  j["rounds"] = rounds;
  nlohmann::json history = nlohmann::json::array();
  for (const auto& h : c.head_history()) {
    history.push_back({{"recipe_hash", h.recipe_hash()},
                       {"round_id", h.round_id()},
                       {"experiment_id", h.experiment_id()},
                       {"candidate", h.candidate()},
                       {"reason", h.reason()},
                       {"created_at", h.created_at()}});
  }
  j["head_history"] = history;
  return j;
}

std::string RenderCampaignList(const std::vector<v1::Campaign>& campaigns) {
  using A = TextTable::Align;
  TextTable t({{"id", A::kRight},
               {"name", A::kLeft},
               {"state", A::kLeft},
               {"head", A::kLeft},
               {"trainer", A::kLeft},
               {"devices", A::kLeft},
               {"created", A::kLeft}});
  for (const auto& c : campaigns) {
    t.AddRow({std::to_string(c.id()), c.name(), c.state(), ShortHash(c.head_recipe_hash()),
              c.trainer().empty() ? "libtorch" : c.trainer(),
              c.device_filter().empty() ? "any" : c.device_filter(), c.created_at()});
  }
  return t.Render();
}

std::string RenderCampaign(const v1::Campaign& c) {
  using A = TextTable::Align;
  std::ostringstream out;
  // Every text here came from the daemon (names, filters, policies from submitters): escaped, so
  // that a control character in one is shown, not obeyed by the terminal.
  auto t = [](const std::string& s) { return EscapeForTerminal(s); };
  out << "campaign " << t(c.name()) << " #" << c.id() << " (" << t(c.state()) << ")\n";
  out << "objective: " << t(c.objective().empty() ? "val_bpb" : c.objective()) << " (minimise)\n";
  out << "head:      " << t(c.head_recipe_hash()) << "\n";
  out << "base:      " << t(c.base_recipe_hash()) << "\n";
  out << "policy:    " << t(c.policy_json().empty() ? "{}" : c.policy_json()) << "\n";
  out << "trainer:   " << t(c.trainer().empty() ? "libtorch" : c.trainer())
      << "; devices: " << t(c.device_filter().empty() ? "any" : c.device_filter())
      << "; max attempts: " << c.max_attempts() << "\n";
  out << "budget:    " << t(RenderBudgetContract(c.budget_json())) << "\n";
  if (c.head_history_size() > 0) {
    out << "\nhead history:\n";
    TextTable h({{"round", A::kRight},
                 {"experiment", A::kRight},
                 {"candidate", A::kLeft},
                 {"reason", A::kLeft},
                 {"recipe", A::kLeft},
                 {"at", A::kLeft}});
    for (const auto& e : c.head_history()) {
      h.AddRow({e.round_id() ? std::to_string(e.round_id()) : "-",
                e.experiment_id() ? std::to_string(e.experiment_id()) : "-",
                e.candidate().empty() ? "-" : e.candidate(), e.reason(), ShortHash(e.recipe_hash()),
                e.created_at()});
    }
    out << h.Render();
  }
  if (c.rounds_size() == 0) {
    out << "\nno rounds yet\n";
    return out.str();
  }
  out << "\nrounds:\n";
  TextTable rt({{"round", A::kRight},
                {"kind", A::kLeft},
                {"state", A::kLeft},
                {"runs", A::kRight},
                {"left", A::kRight},
                {"kept", A::kLeft},
                {"decision", A::kLeft}});
  for (const auto& r : c.rounds()) {
    std::string kept = "-";
    if (r.kept_experiment_id() != 0) {
      kept = r.kept_candidate() + " (#" + std::to_string(r.kept_experiment_id()) + ")";
    }
    rt.AddRow({std::to_string(r.id()), r.kind(), r.state(), std::to_string(r.experiments()),
               std::to_string(r.unfinished()), kept,
               r.decision_summary().empty() ? "-" : r.decision_summary()});
  }
  out << rt.Render();
  for (const auto& r : c.rounds()) {
    const std::string order = RenderRunOrder(r);
    if (!order.empty()) out << "\nround " << r.id() << " run order (" << t(order) << ")\n";
    const std::string drift = RenderDrift(r.drift_json());
    if (!drift.empty()) out << "round " << r.id() << " drift: " << t(drift) << "\n";
  }
  for (const auto& r : c.rounds()) {
    nlohmann::json d = ParsedOrNull(r.decision_json());
    if (!d.is_object() || !d.contains("candidates") || !d["candidates"].is_array()) continue;
    // The acceptance mode is the policy's; the daemon may store its decide mode (auto|manual) as
    // "mode".
    std::string mode = Str(d.value("policy", nlohmann::json()), "mode");
    if (mode.empty()) mode = Str(d, "mode");
    if (!Str(d, "mode").empty() && Str(d, "mode") != mode) mode += ", " + Str(d, "mode");
    out << "\nround " << r.id() << " decision (" << t(mode) << "):\n";
    TextTable dt({{"candidate", A::kLeft},
                  {"mean", A::kRight},
                  {"sd", A::kRight},
                  {"n", A::kRight},
                  {"head mean", A::kRight},
                  {"head sd", A::kRight},
                  {"head n", A::kRight},
                  {"gain", A::kRight},
                  {"p", A::kRight},
                  {"band", A::kRight},
                  {"decision", A::kLeft},
                  {"reason", A::kLeft}});
    for (const auto& cand : d["candidates"]) {
      nlohmann::json stats = cand.value("stats", nlohmann::json());
      nlohmann::json head = cand.value("head", nlohmann::json());
      std::string reason = Str(cand, "reason_text");
      if (reason.empty()) reason = Str(cand, "reason");
      dt.AddRow({Str(cand, "name"), Figure(stats, "mean", 6), Figure(stats, "sd", 6),
                 Count(stats, "n"), Figure(head, "mean", 6), Figure(head, "sd", 6),
                 Count(head, "n"), Figure(cand, "improvement", 6), Figure(cand, "p", 4),
                 Figure(cand, "band", 6), Str(cand, "decision"), reason});
    }
    out << dt.Render();
  }
  return out.str();
}

}  // namespace xv::client
