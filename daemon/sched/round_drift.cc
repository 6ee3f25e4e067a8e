#include "daemon/sched/round_drift.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "daemon/sched/welch_test.h"

namespace xv::sched {
namespace {

bool Finite(double v) { return std::isfinite(v); }

nlohmann::json OptionalJson(const std::optional<double>& v) {
  if (!v.has_value() || !std::isfinite(*v)) return nullptr;
  return *v;
}

std::string Fixed(double v, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, v);
  return buffer;
}

std::string Percent(double fraction) {
  return (fraction >= 0 ? "+" : "") + Fixed(100.0 * fraction, 1) + "%";
}

// Least-squares slope of y on x; empty when x does not vary.
std::optional<double> Slope(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() < 2) return std::nullopt;
  const double mx = Summarize(x).mean;
  const double my = Summarize(y).mean;
  double sxy = 0.0, sxx = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
  }
  if (!(sxx > 0.0)) return std::nullopt;
  return sxy / sxx;
}

// Pearson correlation; empty with fewer than 3 pairs or no spread in either.
std::optional<double> Correlation(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() < 3) return std::nullopt;
  const double mx = Summarize(x).mean;
  const double my = Summarize(y).mean;
  double sxy = 0.0, sxx = 0.0, syy = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxy += (x[i] - mx) * (y[i] - my);
    sxx += (x[i] - mx) * (x[i] - mx);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (!(sxx > 0.0 && syy > 0.0)) return std::nullopt;
  return sxy / std::sqrt(sxx * syy);
}

// Mean and sd of an arm's figures.
ArmDrift MeasureArm(const std::string& arm, bool control,
                    const std::vector<const DriftRun*>& runs) {
  ArmDrift out;
  out.arm = arm;
  out.control = control;
  std::vector<double> tok, steps;
  for (const DriftRun* r : runs) {
    if (Finite(r->tok_per_sec) && r->tok_per_sec > 0) tok.push_back(r->tok_per_sec);
    if (Finite(r->steps) && r->steps >= 0) steps.push_back(r->steps);
  }
  out.n = static_cast<int>(tok.size());
  const SampleSummary t = Summarize(tok);
  const SampleSummary s = Summarize(steps);
  if (t.n >= 1) out.tok_per_sec_mean = t.mean;
  if (t.n >= 2) out.tok_per_sec_sd = t.sd;
  if (s.n >= 1) out.steps_mean = s.mean;
  if (s.n >= 2) out.steps_sd = s.sd;
  return out;
}

// The controls' tok/s trend over the round's span, relative to their mean.
std::optional<double> ControlsTrend(const std::vector<const DriftRun*>& controls, double span_s,
                                    double mean) {
  std::vector<double> t, tok;
  for (const DriftRun* r : controls) {
    if (Finite(r->started_s) && Finite(r->tok_per_sec) && r->tok_per_sec > 0) {
      t.push_back(r->started_s);
      tok.push_back(r->tok_per_sec);
    }
  }
  if (tok.size() < 2 || !(mean > 0)) return std::nullopt;
  const std::optional<double> slope = Slope(t, tok);
  if (!slope) return 0.0;  // every control started at once: no movement is measurable
  return *slope * span_s / mean;
}

}  // namespace

RoundDrift MeasureRoundDrift(const std::vector<DriftRun>& runs,
                             const std::set<std::string>& step_work_arms) {
  RoundDrift out;
  std::vector<const DriftRun*> controls;
  std::vector<std::string> arm_order;
  std::map<std::string, std::vector<const DriftRun*>> by_arm;
  double first = std::numeric_limits<double>::infinity();
  double last = -std::numeric_limits<double>::infinity();
  for (const DriftRun& r : runs) {
    if (Finite(r.started_s)) {
      first = std::min(first, r.started_s);
      last = std::max(last, r.started_s);
    }
    if (r.control) {
      controls.push_back(&r);
      continue;
    }
    if (by_arm.count(r.arm) == 0) arm_order.push_back(r.arm);
    by_arm[r.arm].push_back(&r);
  }
  if (first <= last) out.span_s = last - first;
  const ArmDrift head = MeasureArm("head", true, controls);
  out.arms.push_back(head);
  for (const std::string& arm : arm_order) {
    ArmDrift a = MeasureArm(arm, false, by_arm[arm]);
    a.step_work_by_design = step_work_arms.count(arm) > 0;
    if (a.tok_per_sec_mean && head.tok_per_sec_mean && *head.tok_per_sec_mean > 0) {
      a.vs_controls = (*a.tok_per_sec_mean - *head.tok_per_sec_mean) / *head.tok_per_sec_mean;
      if (!a.step_work_by_design) {
        out.max_arm_gap = std::max(out.max_arm_gap.value_or(0.0), std::fabs(*a.vs_controls));
      }
    }
    out.arms.push_back(std::move(a));
  }
  if (head.tok_per_sec_mean) {
    out.controls_trend = ControlsTrend(controls, out.span_s.value_or(0.0), *head.tok_per_sec_mean);
    if (head.tok_per_sec_sd && *head.tok_per_sec_mean > 0) {
      out.controls_spread = *head.tok_per_sec_sd / *head.tok_per_sec_mean;
    }
  }
  std::vector<double> bpb, tok;
  for (const DriftRun* r : controls) {
    if (Finite(r->val_bpb) && Finite(r->tok_per_sec) && r->tok_per_sec > 0) {
      bpb.push_back(r->val_bpb);
      tok.push_back(r->tok_per_sec);
    }
  }
  out.corr_val_bpb_tok_per_sec = Correlation(bpb, tok);
  return out;
}

nlohmann::json RoundDrift::ToJson() const {
  nlohmann::json list = nlohmann::json::array();
  for (const ArmDrift& a : arms) {
    list.push_back({{"arm", a.arm},
                    {"control", a.control},
                    {"step_work_by_design", a.step_work_by_design},
                    {"n", a.n},
                    {"tok_per_sec_mean", OptionalJson(a.tok_per_sec_mean)},
                    {"tok_per_sec_sd", OptionalJson(a.tok_per_sec_sd)},
                    {"steps_mean", OptionalJson(a.steps_mean)},
                    {"steps_sd", OptionalJson(a.steps_sd)},
                    {"vs_controls", OptionalJson(a.vs_controls)}});
  }
  return {{"arms", list},
          {"span_s", OptionalJson(span_s)},
          {"controls_trend", OptionalJson(controls_trend)},
          {"controls_spread", OptionalJson(controls_spread)},
          {"corr_val_bpb_tok_per_sec", OptionalJson(corr_val_bpb_tok_per_sec)},
          {"max_arm_gap", OptionalJson(max_arm_gap)}};
}

DriftVerdict CheckThroughputDrift(const RoundDrift& drift, double max_drift) {
  DriftVerdict out;
  std::string why;
  if (drift.controls_trend && std::fabs(*drift.controls_trend) > max_drift) {
    why = "the controls' tok/s moved " + Percent(*drift.controls_trend) + " within the round (" +
          Fixed(drift.span_s.value_or(0.0), 1) + " s)";
  }
  if (drift.controls_spread && *drift.controls_spread > max_drift) {
    why += std::string(why.empty() ? "" : "; ") + "the controls' tok/s spread (sd) is " +
           Fixed(100.0 * *drift.controls_spread, 1) + "% of their mean";
  }
  for (const ArmDrift& a : drift.arms) {
    if (a.control || a.step_work_by_design || !a.vs_controls) continue;
    if (std::fabs(*a.vs_controls) <= max_drift) continue;
    why += std::string(why.empty() ? "" : "; ") + a.arm + "'s mean tok/s is " +
           Percent(*a.vs_controls) + " off the controls'";
  }
  if (why.empty()) return out;
  out.confounded = true;
  out.reason = why + ", more than max_throughput_drift " + Fixed(100.0 * max_drift, 1) +
               "%: the difference in val_bpb may be the machine's, not the change's; nothing is "
               "kept (run the round again)";
  return out;
}

std::string DescribeDrift(const RoundDrift& drift) {
  std::string text = "tok/s";
  for (const ArmDrift& a : drift.arms) {
    text += std::string(a.control ? " " : ", ") + a.arm + " " +
            (a.tok_per_sec_mean ? Fixed(*a.tok_per_sec_mean, 0) : std::string("-"));
    if (a.tok_per_sec_sd) text += " sd " + Fixed(*a.tok_per_sec_sd, 0);
    if (a.vs_controls) text += " (" + Percent(*a.vs_controls) + ")";
    if (a.step_work_by_design) text += " [changes step work]";
  }
  if (drift.controls_trend) {
    text += "; controls' trend " + Percent(*drift.controls_trend) + " over " +
            Fixed(drift.span_s.value_or(0.0), 1) + " s";
  }
  if (drift.controls_spread) text += ", spread " + Fixed(100.0 * *drift.controls_spread, 1) + "%";
  if (drift.corr_val_bpb_tok_per_sec) {
    text += "; corr(val_bpb, tok/s) " + Fixed(*drift.corr_val_bpb_tok_per_sec, 2);
  }
  return text;
}

std::optional<StepsSlope> FitStepsSlope(const std::vector<DriftRun>& runs) {
  std::vector<double> log_steps, bpb;
  for (const DriftRun& r : runs) {
    if (!r.control || !Finite(r.val_bpb) || !Finite(r.steps) || !(r.steps > 0)) continue;
    log_steps.push_back(std::log(r.steps));
    bpb.push_back(r.val_bpb);
  }
  if (log_steps.size() < 3) return std::nullopt;
  const std::optional<double> slope = Slope(log_steps, bpb);
  if (!slope) return std::nullopt;
  StepsSlope fit;
  fit.slope = *slope;
  fit.mean_log_steps = Summarize(log_steps).mean;
  fit.n = static_cast<int>(log_steps.size());
  return fit;
}

double ThroughputAdjustedValBpb(const StepsSlope& fit, double val_bpb, double steps) {
  if (!Finite(steps) || !(steps > 0)) return val_bpb;
  return val_bpb - fit.slope * (std::log(steps) - fit.mean_log_steps);
}

}  // namespace xv::sched
