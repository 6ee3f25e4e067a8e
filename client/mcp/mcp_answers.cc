#include "client/mcp/mcp_answers.h"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "common/bounded_json_or_discarded.h"
#include "common/untrusted_text.h"

namespace xv::client {
namespace {

using nlohmann::json;

// `v` rounded to `decimals` places (shortest printing keeps it short); null when not finite.
json Rounded(double v, int decimals) {
  if (!std::isfinite(v)) return nullptr;
  const double scale = std::pow(10.0, decimals);
  return std::round(v * scale) / scale;
}

std::string ShortHash(const std::string& h) { return h.size() > 12 ? h.substr(0, 12) : h; }

json Parsed(const std::string& text) {
  if (text.empty()) return nullptr;
  json j = ParseBoundedJsonOrDiscarded(text);
  return j.is_discarded() ? json(nullptr) : j;
}

// A decision's statistics {n_runs, n, nan_rate, mean, sd}: the member `key`, or null.
json Stat(const json& stats, const char* key) {
  return stats.is_object() && stats.contains(key) ? stats[key] : json(nullptr);
}

json RoundedStat(const json& v) { return v.is_number() ? Rounded(v.get<double>(), 6) : json(); }

// One candidate of an automatic decision, with the figures the decision rests on.
json CandidateDecision(const json& c) {
  const json stats = c.value("stats", json::object());
  return {{"name", c.value("name", json())},
          {"decision", c.value("decision", json())},
          {"reason", c.contains("reason_text") ? c["reason_text"] : c.value("reason", json())},
          {"mean", RoundedStat(Stat(stats, "mean"))},
          {"sd", RoundedStat(Stat(stats, "sd"))},
          {"n", Stat(stats, "n")},
          {"improvement", RoundedStat(c.value("improvement", json()))},
          {"p", RoundedStat(c.value("p", json()))},
          {"band", RoundedStat(c.value("band", json()))}};
}

}  // namespace

nlohmann::json DropEmpty(const nlohmann::json& v) {
  if (v.is_array()) {
    json out = json::array();
    for (const auto& item : v) out.push_back(DropEmpty(item));
    return out;
  }
  if (!v.is_object()) return v;
  json out = json::object();
  for (const auto& [key, value] : v.items()) {
    json cleaned = DropEmpty(value);
    if (cleaned.is_null()) continue;
    if (cleaned.is_string() && cleaned.get_ref<const std::string&>().empty()) continue;
    if (cleaned.is_structured() && cleaned.empty()) continue;
    out[key] = std::move(cleaned);
  }
  return out;
}

nlohmann::json ExperimentSummary(const v1::Experiment& e) {
  json j = {{"id", e.id()},       {"round", e.round_id()},    {"name", e.name()},
            {"state", e.state()}, {"decision", e.decision()}, {"reason", e.decision_reason()}};
  if (e.has_result()) {
    const v1::Result& r = e.result();
    j["val_bpb"] = Rounded(r.val_bpb(), 6);
    j["steps"] = r.num_steps();
    j["tok_per_sec"] = Rounded(r.tok_per_sec(), 0);
    if (r.peak_vram_mb() > 0) j["peak_mem_mb"] = Rounded(r.peak_vram_mb(), 1);
  }
  if (!e.failure_kind().empty()) {
    j["failure_kind"] = e.failure_kind();
    j["failure_detail"] = Utf8Prefix(e.failure_detail(), 160);
  }
  if (e.reused_from_id() != 0) j["reused_from"] = e.reused_from_id();
  if (e.state() == "running" || e.state() == "assigned") {
    j["progress"] = Rounded(e.progress(), 3);
    if (e.last_loss() != 0) j["last_loss"] = Rounded(e.last_loss(), 4);
    j["worker"] = e.worker();
  }
  return DropEmpty(j);
}

nlohmann::json RoundSummary(const v1::RoundInfo& r) {
  json j = {{"id", r.id()},
            {"kind", r.kind()},
            {"state", r.state()},
            {"summary", r.decision_summary()},
            {"kept", r.kept_candidate()},
            {"experiments", r.experiments()},
            {"unfinished", r.unfinished()}};
  if (r.kept_experiment_id() != 0) j["kept_experiment_id"] = r.kept_experiment_id();
  const json decision = Parsed(r.decision_json());
  if (decision.is_object()) {
    if (decision.contains("candidates") && decision["candidates"].is_array()) {
      json candidates = json::array();
      for (const auto& c : decision["candidates"]) {
        if (!c.is_object()) continue;
        candidates.push_back(CandidateDecision(c));
        // The head's figures are the same for every candidate: said once.
        const json head = c.value("head", json::object());
        if (!j.contains("head_mean")) {
          j["head_mean"] = RoundedStat(Stat(head, "mean"));
          j["head_sd"] = RoundedStat(Stat(head, "sd"));
          j["head_n"] = Stat(head, "n");
        }
      }
      j["candidates"] = candidates;
    }
    for (const char* key : {"confirm", "ablation", "reason"}) {
      if (decision.contains(key)) j[key] = decision[key];
    }
  }
  return DropEmpty(j);
}

nlohmann::json CampaignSummary(const v1::Campaign& c, int last_rounds, bool with_head_recipe) {
  json j = {{"id", c.id()},
            {"name", c.name()},
            {"state", c.state()},
            {"trainer", c.trainer()},
            {"device_filter", c.device_filter()},
            {"policy", Parsed(c.policy_json())},
            {"budget", Parsed(c.budget_json())},
            {"head", ShortHash(c.head_recipe_hash())}};
  if (with_head_recipe) j["head_recipe"] = Parsed(c.head_recipe_json());
  const int total = c.rounds_size();
  const int first = last_rounds > 0 ? std::max(0, total - last_rounds) : 0;
  json rounds = json::array();
  for (int i = first; i < total; ++i) rounds.push_back(RoundSummary(c.rounds(i)));
  j["rounds"] = rounds;
  j["rounds_total"] = total;
  if (first > 0) j["rounds_left_out"] = first;
  const int changes = c.head_history_size();
  const int first_change = last_rounds > 0 ? std::max(0, changes - last_rounds) : 0;
  json history = json::array();
  for (int i = first_change; i < changes; ++i) {
    const v1::HeadChange& h = c.head_history(i);
    history.push_back(DropEmpty({{"round", h.round_id()},
                                 {"experiment_id", h.experiment_id()},
                                 {"candidate", h.candidate()},
                                 {"reason", h.reason()},
                                 {"head", ShortHash(h.recipe_hash())}}));
  }
  j["head_history"] = history;
  if (first_change > 0) j["head_changes_left_out"] = first_change;
  return DropEmpty(j);
}

nlohmann::json StatusSummary(const v1::StatusResponse& resp, const std::string& address) {
  json workers = json::array();
  for (const auto& w : resp.workers()) {
    workers.push_back(DropEmpty({{"name", w.name()},
                                 {"state", w.state()},
                                 {"device", w.device().name()},
                                 {"running", w.current_experiment_id()}}));
  }
  json active = json::array();
  for (const auto& e : resp.active()) {
    json a = {{"id", e.id()},
              {"name", e.name()},
              {"campaign_id", e.campaign_id()},
              {"round", e.round_id()},
              {"state", e.state()},
              {"worker", e.worker()},
              {"progress", Rounded(e.progress(), 3)}};
    // The loss of the latest step event; null until the first step.
    if (e.last_loss() != 0) a["last_loss"] = Rounded(e.last_loss(), 4);
    active.push_back(DropEmpty(a));
  }
  json unserved = json::array();
  for (const auto& u : resp.unserved_trainers()) {
    unserved.push_back({{"trainer", u.trainer()}, {"queued", u.queued()}});
  }
  json j = {{"address", address},
            {"version", resp.version()},
            {"queued", resp.queued()},
            {"running", resp.running()},
            {"finished", resp.finished()},
            {"workers", workers},
            {"active", active},
            {"write_mode", resp.write_mode().empty() ? "read-write" : resp.write_mode()},
            {"unserved_trainers", unserved}};
  return DropEmpty(j);
}

nlohmann::json ResultsAnswer(const std::vector<v1::Experiment>& rows, const ResultsPage& page) {
  std::vector<const v1::Experiment*> matching;
  for (const auto& e : rows) {
    if (page.round_id != 0 && e.round_id() != page.round_id) continue;
    if (!page.ids.empty() &&
        std::find(page.ids.begin(), page.ids.end(), e.id()) == page.ids.end()) {
      continue;
    }
    if (page.after_id > 0 && e.id() <= page.after_id) continue;
    matching.push_back(&e);
  }
  if (page.after_id > 0) {
    std::sort(matching.begin(), matching.end(),
              [](const v1::Experiment* a, const v1::Experiment* b) { return a->id() < b->id(); });
  }
  const size_t total = matching.size();
  const size_t limit = page.limit > 0 ? static_cast<size_t>(page.limit) : total;
  size_t first = 0, last = total;
  if (total > limit) {
    // A cursor page and best-first keep the first `limit`; id order keeps the most recent.
    if (page.after_id > 0 || page.best_first) {
      last = limit;
    } else {
      first = total - limit;
    }
  }
  json experiments = json::array();
  for (size_t i = first; i < last; ++i) experiments.push_back(ExperimentSummary(*matching[i]));
  json j = {{"experiments", experiments}, {"count", last - first}, {"total", total}};
  if (page.after_id > 0 && last < total) j["next_after_id"] = matching[last - 1]->id();
  if (page.after_id == 0 && last - first < total) j["left_out"] = total - (last - first);
  return j;
}

nlohmann::json EtaEstimate(std::vector<double> recent_run_s, int64_t runs_ahead, int64_t workers) {
  recent_run_s.erase(std::remove_if(recent_run_s.begin(), recent_run_s.end(),
                                    [](double s) { return !std::isfinite(s) || s <= 0; }),
                     recent_run_s.end());
  if (recent_run_s.empty()) {
    return {{"basis", "no estimate: no finished run with a wall time yet"}};
  }
  if (workers <= 0) return {{"basis", "no estimate: no worker is connected"}};
  std::sort(recent_run_s.begin(), recent_run_s.end());
  const size_t n = recent_run_s.size();
  const double median =
      n % 2 == 1 ? recent_run_s[n / 2] : (recent_run_s[n / 2 - 1] + recent_run_s[n / 2]) / 2;
  const int64_t waves = (std::max<int64_t>(runs_ahead, 0) + workers - 1) / workers;
  std::ostringstream basis;
  basis << "median wall time of the " << n << " most recent finished runs ("
        << std::round(median * 10) / 10 << " s) x " << waves << " wave" << (waves == 1 ? "" : "s")
        << " (" << runs_ahead << " runs queued or running, these included, over " << workers
        << " worker" << (workers == 1 ? "" : "s") << ")";
  return {{"eta_s", std::round(median * static_cast<double>(waves))}, {"basis", basis.str()}};
}

}  // namespace xv::client
