#include "daemon/sched/round_decider.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>

#include "daemon/sched/student_t.h"
#include "daemon/sched/welch_test.h"

namespace xv::sched {
namespace {

// bpb values and differences: fixed, 5 decimals (the noise is ~1e-3).
std::string Bpb(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.5f", v);
  return buffer;
}

// p-values, t, df, alpha, k: 3 significant digits.
std::string Short(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.3g", v);
  return buffer;
}

bool IsFinite(const RunOutcome& run) { return !run.diverged && std::isfinite(run.val_bpb); }

// Statistics and the finite values of `runs`.
RunGroupStats StatsOf(const std::vector<const RunOutcome*>& runs, std::vector<double>* values) {
  values->clear();
  for (const RunOutcome* run : runs) {
    if (IsFinite(*run)) values->push_back(run->val_bpb);
  }
  RunGroupStats stats;
  stats.n_runs = static_cast<int>(runs.size());
  stats.n = static_cast<int>(values->size());
  stats.nan_rate =
      stats.n_runs == 0 ? 0.0 : static_cast<double>(stats.n_runs - stats.n) / stats.n_runs;
  const SampleSummary summary = Summarize(*values);
  if (summary.n >= 1) stats.mean = summary.mean;
  if (summary.n >= 2) stats.sd = summary.sd;
  return stats;
}

std::vector<const RunOutcome*> Pointers(const std::vector<RunOutcome>& runs) {
  std::vector<const RunOutcome*> out;
  for (const RunOutcome& run : runs) out.push_back(&run);
  return out;
}

// noise_band: the head runs on the device classes of the candidate's runs. A run with an empty
// class matches every class; a candidate whose runs all have empty classes compares with every
// head run.
std::vector<const RunOutcome*> HeadRunsForClasses(const std::vector<RunOutcome>& head_runs,
                                                  const std::vector<RunOutcome>& candidate_runs) {
  std::set<std::string> classes;
  for (const RunOutcome& run : candidate_runs) {
    if (run.device_class.empty()) return Pointers(head_runs);
    classes.insert(run.device_class);
  }
  std::vector<const RunOutcome*> out;
  for (const RunOutcome& run : head_runs) {
    if (run.device_class.empty() || classes.count(run.device_class) > 0) out.push_back(&run);
  }
  return out;
}

nlohmann::json OptionalJson(const std::optional<double>& v) {
  if (!v.has_value() || !std::isfinite(*v)) return nullptr;
  return *v;
}

nlohmann::json StatsJson(const RunGroupStats& s) {
  return {{"n_runs", s.n_runs},
          {"n", s.n},
          {"nan_rate", s.nan_rate},
          {"mean", OptionalJson(s.mean)},
          {"sd", OptionalJson(s.sd)}};
}

// Step 3 under welch. Sets the statistics, `passed` and (when failing) the reason.
void ApplyWelch(const AcceptancePolicy& policy, const std::vector<double>& candidate_values,
                const std::vector<double>& head_values, double alpha, CandidateDecision* d) {
  const SampleSummary c = Summarize(candidate_values);
  const SampleSummary h = Summarize(head_values);
  const std::optional<WelchResult> welch = WelchOneSidedLower(c, h);  // n >= 2 checked before
  d->improvement = welch->improvement;
  d->t = welch->t;
  d->df = welch->df;
  d->p = welch->p_one_sided;
  d->alpha = alpha;
  d->band =
      std::max(policy.min_effect, StudentTQuantile(1.0 - alpha, welch->df) * welch->standard_error);
  const std::string numbers = "improvement " + Bpb(welch->improvement) + " (head " + Bpb(h.mean) +
                              " - candidate " + Bpb(c.mean) + "), " +
                              (welch->t ? "t=" + Short(*welch->t) : std::string("sd=0")) +
                              ", df=" + Short(welch->df) + ", p=" + Short(welch->p_one_sided);
  if (!(welch->p_one_sided < alpha)) {
    d->reason = DecisionReason::kNotSignificant;
    d->reason_text = "not significant: " + numbers + " >= alpha " + Short(alpha);
    return;
  }
  if (welch->improvement < policy.min_effect) {
    d->reason = DecisionReason::kBelowMinEffect;
    d->reason_text =
        "below min_effect: " + numbers + ", but improvement < min_effect " + Bpb(policy.min_effect);
    return;
  }
  d->passed = true;
  d->reason_text = numbers + " < alpha " + Short(alpha) + ", improvement >= min_effect " +
                   Bpb(policy.min_effect);
}

// Step 3 under noise_band.
void ApplyNoiseBand(const AcceptancePolicy& policy, const std::vector<double>& candidate_values,
                    const std::vector<double>& head_values, double alpha, CandidateDecision* d) {
  const SampleSummary c = Summarize(candidate_values);
  const SampleSummary h = Summarize(head_values);
  const double scale = std::sqrt(1.0 / c.n + 1.0 / h.n);  // prediction-bound spread factor
  const double df = h.n - 1;
  const double k =
      policy.band_k.has_value() ? *policy.band_k : StudentTQuantile(1.0 - alpha, df) * scale;
  const double band = std::max(policy.min_effect, k * h.sd);
  const double improvement = h.mean - c.mean;
  d->improvement = improvement;
  d->df = df;
  d->band = band;
  d->band_k = k;
  if (!policy.band_k.has_value()) d->alpha = alpha;
  if (h.sd > 0.0) {
    d->t = improvement / (h.sd * scale);
    d->p = StudentTUpperTail(*d->t, df);
  } else {
    d->p = improvement > 0.0 ? 0.0 : 1.0;
  }
  const std::string numbers = "candidate " + Bpb(c.mean) + " vs head " + Bpb(h.mean) + " - band " +
                              Bpb(band) + " = " + Bpb(h.mean - band) + " (k=" + Short(k) +
                              ", head sd " + Bpb(h.sd) + ", n_head " + std::to_string(h.n) + ")";
  if (!(c.mean < h.mean - band)) {
    d->reason = DecisionReason::kOutsideNoiseBand;
    d->reason_text = "inside the noise band: " + numbers;
    return;
  }
  d->passed = true;
  d->reason_text = "below the noise band: " + numbers;
}

std::string DescribeDecision(const RoundDecision& decision) {
  std::string text = std::string(AcceptanceModeName(decision.policy.mode)) + "@" +
                     Short(decision.policy.confidence) + ": ";
  std::map<std::string, int> discarded;
  for (const CandidateDecision& d : decision.candidates) {
    if (!d.keep) ++discarded[DecisionReasonName(d.reason)];
  }
  if (decision.kept_index.has_value()) {
    const CandidateDecision& kept = decision.candidates[*decision.kept_index];
    text += "kept " + kept.name + " (improvement " + Bpb(*kept.improvement) +
            (kept.p ? ", p=" + Short(*kept.p) : std::string()) + ")";
  } else {
    text += "no keep";
  }
  const size_t n_discarded = decision.candidates.size() - (decision.kept_index ? 1 : 0);
  text += "; " + std::to_string(n_discarded) + " discarded";
  if (!discarded.empty()) {
    text += " (";
    bool first = true;
    for (const auto& [reason, count] : discarded) {
      if (!first) text += ", ";
      first = false;
      text += std::to_string(count) + " " + reason;
    }
    text += ")";
  }
  return text;
}

}  // namespace

const char* DecisionReasonName(DecisionReason reason) {
  switch (reason) {
    case DecisionReason::kKept:
      return "kept";
    case DecisionReason::kNonFiniteReplicate:
      return "non_finite_replicate";
    case DecisionReason::kInsufficientReplicates:
      return "insufficient_replicates";
    case DecisionReason::kInsufficientHeadReplicates:
      return "insufficient_head_replicates";
    case DecisionReason::kNotSignificant:
      return "not_significant";
    case DecisionReason::kBelowMinEffect:
      return "below_min_effect";
    case DecisionReason::kOutsideNoiseBand:
      return "outside_noise_band";
    case DecisionReason::kBeatenByBetterCandidate:
      return "beaten_by_better_candidate";
  }
  return "unknown";
}

nlohmann::json RoundDecision::ToJson() const {
  nlohmann::json out;
  out["mode"] = AcceptanceModeName(policy.mode);
  out["policy"] = AcceptancePolicyToJson(policy);
  out["head"] = StatsJson(head);
  out["tested"] = tested;
  out["kept"] = kept_index ? nlohmann::json(candidates[*kept_index].name) : nlohmann::json();
  out["summary"] = summary;
  nlohmann::json list = nlohmann::json::array();
  for (const CandidateDecision& d : candidates) {
    list.push_back({{"name", d.name},
                    {"decision", d.keep ? "keep" : "discard"},
                    {"reason", DecisionReasonName(d.reason)},
                    {"reason_text", d.reason_text},
                    {"passed", d.passed},
                    {"stats", StatsJson(d.stats)},
                    {"head", StatsJson(d.head)},
                    {"improvement", OptionalJson(d.improvement)},
                    {"t", OptionalJson(d.t)},
                    {"df", OptionalJson(d.df)},
                    {"p", OptionalJson(d.p)},
                    {"alpha", OptionalJson(d.alpha)},
                    {"band", OptionalJson(d.band)},
                    {"band_k", OptionalJson(d.band_k)}});
  }
  out["candidates"] = std::move(list);
  return out;
}

Status RoundDecider::Decide(const AcceptancePolicy& policy,
                            const std::vector<RunOutcome>& head_runs,
                            const std::vector<CandidateRuns>& candidates,
                            RoundDecision* decision) const {
  XV_RETURN_IF_ERROR(ValidateAcceptancePolicy(policy).WithContext("acceptance policy: "));
  std::set<std::string> names;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const std::string& name = candidates[i].name;
    if (name.empty()) {
      return Status::InvalidArgument("candidates[" + std::to_string(i) + "].name: is empty");
    }
    if (!names.insert(name).second) {
      return Status::InvalidArgument("candidates[" + std::to_string(i) + "].name: \"" + name +
                                     "\" is given twice");
    }
  }

  RoundDecision out;
  out.policy = policy;
  std::vector<double> all_head_values;
  out.head = StatsOf(Pointers(head_runs), &all_head_values);
  const bool welch = policy.mode == AcceptanceMode::kWelch;
  const int min_candidate_runs = welch ? 2 : 1;

  // Steps 1 and 2; remember which candidates reach the test and with which values.
  struct Tested {
    size_t index;
    std::vector<double> candidate_values;
    std::vector<double> head_values;
  };
  std::vector<Tested> tested;
  for (size_t i = 0; i < candidates.size(); ++i) {
    CandidateDecision d;
    d.name = candidates[i].name;
    std::vector<double> values;
    d.stats = StatsOf(Pointers(candidates[i].runs), &values);
    std::vector<double> head_values;
    d.head =
        welch ? out.head : StatsOf(HeadRunsForClasses(head_runs, candidates[i].runs), &head_values);
    if (welch) head_values = all_head_values;
    if (d.stats.n < d.stats.n_runs) {
      d.reason = DecisionReason::kNonFiniteReplicate;
      d.reason_text = std::to_string(d.stats.n_runs - d.stats.n) + " of " +
                      std::to_string(d.stats.n_runs) + " runs non-finite or diverged (NaN rate " +
                      Short(d.stats.nan_rate) + "); never kept";
    } else if (d.stats.n < min_candidate_runs) {
      d.reason = DecisionReason::kInsufficientReplicates;
      d.reason_text = "insufficient replicates: " + std::to_string(d.stats.n) + " finite run(s), " +
                      AcceptanceModeName(policy.mode) +
                      " needs >= " + std::to_string(min_candidate_runs);
    } else if (d.head.n < 2) {
      d.reason = DecisionReason::kInsufficientHeadReplicates;
      d.reason_text = "insufficient head replicates: " + std::to_string(d.head.n) +
                      " finite head run(s)" + (welch ? "" : " on this device class") +
                      ", need >= 2";
    } else {
      tested.push_back({i, std::move(values), std::move(head_values)});
    }
    out.candidates.push_back(std::move(d));
  }

  // Step 3.
  out.tested = static_cast<int>(tested.size());
  const double alpha_round = 1.0 - policy.confidence;
  const double alpha =
      policy.correction == MultipleComparisonCorrection::kBonferroni && !tested.empty()
          ? alpha_round / static_cast<double>(tested.size())
          : alpha_round;
  for (const Tested& t : tested) {
    CandidateDecision* d = &out.candidates[t.index];
    if (welch) {
      ApplyWelch(policy, t.candidate_values, t.head_values, alpha, d);
    } else {
      ApplyNoiseBand(policy, t.candidate_values, t.head_values, alpha, d);
    }
  }

  // Step 4: the passing candidate with the lowest mean (the first on ties).
  for (size_t i = 0; i < out.candidates.size(); ++i) {
    const CandidateDecision& d = out.candidates[i];
    if (!d.passed) continue;
    if (!out.kept_index || *d.stats.mean < *out.candidates[*out.kept_index].stats.mean) {
      out.kept_index = i;
    }
  }
  if (out.kept_index) {
    CandidateDecision& kept = out.candidates[*out.kept_index];
    kept.keep = true;
    kept.reason = DecisionReason::kKept;
    kept.reason_text = "kept: " + kept.reason_text;
    for (CandidateDecision& d : out.candidates) {
      if (!d.passed || d.keep) continue;
      d.reason = DecisionReason::kBeatenByBetterCandidate;
      d.reason_text = "passed, but " + kept.name + " has the lower mean (" + Bpb(*kept.stats.mean) +
                      " vs " + Bpb(*d.stats.mean) +
                      "); at most one keep per round: " + d.reason_text;
    }
  }
  out.summary = DescribeDecision(out);
  *decision = std::move(out);
  return Status::Ok();
}

}  // namespace xv::sched
