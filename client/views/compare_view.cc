#include "client/views/compare_view.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include "client/views/number_format.h"
#include "client/views/text_table.h"
#include "common/run_states.h"

namespace xv::client {
namespace {

bool Measured(const v1::Experiment& e) {
  return e.state() == ToString(ExperimentState::kSucceeded) && e.has_result() &&
         std::isfinite(e.result().val_bpb());
}

bool FailedRun(const v1::Experiment& e) {
  ExperimentState state = ExperimentState::kQueued;
  return ParseExperimentState(e.state(), &state) && IsTerminal(state) &&
         state != ExperimentState::kSucceeded && state != ExperimentState::kCancelled;
}

// "v1 (#3, #4); v2 (#9)" for the values of `key` over the measured runs, "" when one value.
std::string Mixed(const std::vector<v1::Experiment>& runs,
                  const std::function<std::string(const v1::Experiment&)>& key) {
  std::map<std::string, std::string> ids_of;
  for (const auto& e : runs) {
    if (!Measured(e)) continue;
    std::string& ids = ids_of[key(e)];
    ids += (ids.empty() ? "#" : ", #") + std::to_string(e.id());
  }
  if (ids_of.size() < 2) return "";
  std::string out;
  for (const auto& [value, ids] : ids_of) {
    out += (out.empty() ? "" : "; ") + (value.empty() ? "(none)" : value) + " (" + ids + ")";
  }
  return out;
}

std::string Denominator(double peak_flops, const std::string& source) {
  return FormatFixed(peak_flops / 1e12, 0) + " TFLOP/s" + (source.empty() ? "" : " " + source);
}

void Summarise(const std::vector<const v1::Experiment*>& measured, CompareGroup* g) {
  g->n = static_cast<int>(measured.size());
  if (g->n == 0) return;
  double sum = 0, tok = 0, mfu = 0, power = 0, tpj = 0;
  int mfu_n = 0, power_n = 0, tpj_n = 0;
  std::string denominator;
  bool mixed = false;
  for (const v1::Experiment* e : measured) {
    const v1::Result& r = e->result();
    sum += r.val_bpb();
    tok += r.tok_per_sec();
    g->peak_memory_gb = std::max(g->peak_memory_gb, r.peak_vram_mb() / 1024);
    if (r.mfu_percent() >= 0 && r.peak_flops() > 0) {
      mfu += r.mfu_percent();
      ++mfu_n;
      const std::string d = Denominator(r.peak_flops(), r.peak_flops_source());
      mixed |= !denominator.empty() && d != denominator;
      denominator = d;
    }
    if (r.health().has_avg_power_w()) {
      power += r.health().avg_power_w();
      ++power_n;
    }
    if (r.health().has_energy_j() && r.health().energy_j() > 0) {
      tpj += static_cast<double>(r.total_tokens()) / r.health().energy_j();
      ++tpj_n;
    }
  }
  g->val_bpb_mean = sum / g->n;
  double ss = 0;
  for (const v1::Experiment* e : measured)
    ss += std::pow(e->result().val_bpb() - g->val_bpb_mean, 2);
  g->val_bpb_sd = g->n > 1 ? std::sqrt(ss / (g->n - 1)) : 0;
  g->tok_per_sec_mean = tok / g->n;
  g->mfu_mean = mfu_n > 0 ? mfu / mfu_n : -1;
  g->mfu_denominator = mfu_n == 0 ? "unknown" : mixed ? "mixed" : denominator;
  g->power_w = power_n > 0 ? power / power_n : -1;
  g->tokens_per_joule = tpj_n > 0 ? tpj / tpj_n : -1;
}

}  // namespace

Status CheckComparable(const std::vector<v1::Experiment>& runs,
                       const std::function<double(const v1::Experiment&)>& budget_of) {
  const std::string versions =
      Mixed(runs, [](const v1::Experiment& e) { return e.result().metric_version(); });
  if (!versions.empty()) {
    return Status::InvalidArgument("compare: the runs mix metric versions: " + versions +
                                   "; compare runs of one metric version");
  }
  const std::string budgets = Mixed(runs, [&budget_of](const v1::Experiment& e) {
    const double b = budget_of(e);
    return b > 0 ? FormatFixed(b, 0) + " s" : std::string();
  });
  if (!budgets.empty() && budgets.find("(none)") == std::string::npos) {
    return Status::InvalidArgument("compare: the runs mix time budgets: " + budgets +
                                   "; compare runs of one time budget");
  }
  return Status::Ok();
}

std::vector<CompareGroup> BuildComparison(const std::vector<v1::Experiment>& runs) {
  std::vector<CompareGroup> groups;
  std::vector<std::vector<const v1::Experiment*>> measured;
  std::map<std::tuple<std::string, std::string, std::string>, size_t> index;
  for (const auto& e : runs) {
    const std::string device = e.device_name().empty() ? "-" : e.device_name();
    auto [it, fresh] = index.try_emplace({e.name(), device, e.trainer()}, groups.size());
    if (fresh) {
      CompareGroup g;
      g.candidate = e.name();
      g.device = device;
      g.trainer = e.trainer();
      groups.push_back(g);
      measured.emplace_back();
    }
    CompareGroup& g = groups[it->second];
    ++g.runs;
    g.ids.push_back(e.id());
    if (FailedRun(e)) ++g.failed;
    if (Measured(e)) measured[it->second].push_back(&e);
  }
  for (size_t i = 0; i < groups.size(); ++i) Summarise(measured[i], &groups[i]);
  return groups;
}

std::string RenderComparison(const std::vector<CompareGroup>& groups, size_t max_width) {
  using A = TextTable::Align;
  TextTable t({{"candidate", A::kLeft, 0, true},
               {"device", A::kLeft, 3, true},
               {"trainer", A::kLeft, 6},
               {"n", A::kRight, 0},
               {"failed", A::kRight, 4},
               {"val_bpb", A::kRight, 0},
               {"sd", A::kRight, 0},
               {"tok/s", A::kRight, 2},
               {"MFU", A::kRight, 5},
               {"of", A::kLeft, 7},
               {"mem GB", A::kRight, 5},
               {"W", A::kRight, 8},
               {"tok/J", A::kRight, 8}});
  for (const auto& g : groups) {
    const bool any = g.n > 0;
    t.AddRow({g.candidate, g.device, g.trainer, std::to_string(g.n), std::to_string(g.failed),
              any ? FormatFixed(g.val_bpb_mean, 6) : "-",
              g.n > 1 ? FormatFixed(g.val_bpb_sd, 6) : "-",
              any ? FormatThousands(g.tok_per_sec_mean) : "-",
              g.mfu_mean >= 0 ? FormatFixed(g.mfu_mean, 2) + "%" : (any ? "?" : "-"),
              any ? g.mfu_denominator : "-",
              any && g.peak_memory_gb > 0 ? FormatFixed(g.peak_memory_gb, 1) : "-",
              g.power_w >= 0 ? FormatFixed(g.power_w, 0) : "-",
              g.tokens_per_joule >= 0 ? FormatThousands(g.tokens_per_joule) : "-"});
  }
  return t.RenderFitting(max_width);
}

nlohmann::json ComparisonJson(const std::vector<CompareGroup>& groups) {
  using nlohmann::json;
  json arr = json::array();
  for (const auto& g : groups) {
    const bool any = g.n > 0;
    arr.push_back(
        {{"candidate", g.candidate},
         {"device", g.device},
         {"trainer", g.trainer},
         {"runs", g.runs},
         {"n", g.n},
         {"failed", g.failed},
         {"val_bpb_mean", any ? json(g.val_bpb_mean) : json(nullptr)},
         {"val_bpb_sd", g.n > 1 ? json(g.val_bpb_sd) : json(nullptr)},
         {"tok_per_sec_mean", any ? json(g.tok_per_sec_mean) : json(nullptr)},
         {"mfu_percent_mean", g.mfu_mean >= 0 ? json(g.mfu_mean) : json(nullptr)},
         {"mfu_denominator", any ? json(g.mfu_denominator) : json(nullptr)},
         {"peak_memory_gb", any && g.peak_memory_gb > 0 ? json(g.peak_memory_gb) : json(nullptr)},
         {"avg_power_w", g.power_w >= 0 ? json(g.power_w) : json(nullptr)},
         {"tokens_per_joule", g.tokens_per_joule >= 0 ? json(g.tokens_per_joule) : json(nullptr)},
         {"ids", g.ids}});
  }
  return {{"groups", arr}};
}

}  // namespace xv::client
