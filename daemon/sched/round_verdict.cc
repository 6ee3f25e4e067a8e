#include "daemon/sched/round_verdict.h"

#include <cmath>
#include <cstdio>
#include <set>

namespace xv::sched {
namespace {

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

nlohmann::json SummaryJson(const FiniteSummary& f) {
  const SampleSummary& s = f.summary;
  nlohmann::json j = {{"n", s.n}, {"non_finite", f.non_finite}};
  j["mean"] = s.n >= 1 ? nlohmann::json(s.mean) : nlohmann::json();
  j["sd"] = s.n >= 2 ? nlohmann::json(s.sd) : nlohmann::json();
  return j;
}

// "1.99000 sd 0.00100" ("-" without runs; no sd below 2 runs).
std::string MeanAndSd(const SampleSummary& s) {
  return (s.n >= 1 ? Fixed(s.mean, 5) : std::string("-")) +
         (s.n >= 2 ? " sd " + Fixed(s.sd, 5) : std::string());
}

// Step 1 as stored: the decider's reasons and JSON.
void TakeDecidersVerdict(const RoundDecision& decision, size_t head_runs, RoundVerdict* verdict) {
  verdict->decision = decision;
  verdict->summary = decision.summary;
  verdict->json = decision.ToJson();
  verdict->json["mode"] = "auto";
  verdict->json["head_runs"] = head_runs;
  for (const CandidateDecision& c : decision.candidates) {
    // "<reason name>: <text>", once: the kept candidate's text already starts with "kept: ".
    const std::string prefix = std::string(DecisionReasonName(c.reason)) + ": ";
    const bool named = c.reason_text.rfind(prefix, 0) == 0;
    verdict->candidates[c.name] = {c.keep ? Decision::kKeep : Decision::kDiscard,
                                   named ? c.reason_text : prefix + c.reason_text};
  }
  if (decision.kept_index) verdict->kept = decision.candidates[*decision.kept_index].name;
}

// The decider's input with every run of this round throughput-adjusted (round_drift.h); runs of
// arms that change a step's work by design, and pooled runs of earlier rounds, stay as measured.
RoundInput ThroughputAdjustedInput(const RoundInput& input, const StepsSlope& fit,
                                   const std::set<std::string>& step_work_arms) {
  std::map<int64_t, double> steps;
  for (const DriftRun& r : input.drift_runs) {
    if (r.control || step_work_arms.count(r.arm) == 0) steps[r.experiment_id] = r.steps;
  }
  auto adjust = [&](std::vector<RunOutcome>* runs) {
    for (RunOutcome& run : *runs) {
      const auto it = steps.find(run.experiment_id);
      if (it != steps.end() && std::isfinite(run.val_bpb)) {
        run.val_bpb = ThroughputAdjustedValBpb(fit, run.val_bpb, it->second);
      }
    }
  };
  RoundInput out = input;
  adjust(&out.head_runs);
  for (CandidateRuns& c : out.candidates) adjust(&c.runs);
  return out;
}

// {"slope", "n_controls", "candidates": [{name, improvement, p, passed}]}, or {"slope": null,
// "why"} when the controls give no slope.
nlohmann::json AdjustedJson(const std::optional<StepsSlope>& fit,
                            const std::optional<RoundDecision>& adjusted) {
  if (!fit || !adjusted) {
    return {{"slope", nullptr}, {"why", "needs >= 3 controls with a val_bpb whose steps differ"}};
  }
  nlohmann::json list = nlohmann::json::array();
  for (const CandidateDecision& d : adjusted->candidates) {
    nlohmann::json c = {{"name", d.name}, {"passed", d.passed}};
    c["improvement"] = d.improvement ? nlohmann::json(*d.improvement) : nlohmann::json();
    c["p"] = d.p && std::isfinite(*d.p) ? nlohmann::json(*d.p) : nlohmann::json();
    list.push_back(c);
  }
  return {{"slope", fit->slope}, {"n_controls", fit->n}, {"candidates", list}};
}

// Candidates that change a step's work: their reason says the difference includes speed.
void NoteStepWork(const std::map<std::string, std::string>& step_work_knobs,
                  RoundVerdict* verdict) {
  for (auto& [name, v] : verdict->candidates) {
    const auto it = step_work_knobs.find(name);
    if (it == step_work_knobs.end()) continue;
    v.reason += "; the difference includes speed (" + it->second +
                " changes a step's work: compared at the time budget)";
  }
}

}  // namespace

Status DecideRound(const RoundInput& input, RoundVerdict* verdict) {
  RoundDecision raw;
  XV_RETURN_IF_ERROR(RoundDecider().Decide(input.policy, input.head_runs, input.candidates, &raw));
  std::set<std::string> step_work_arms;
  for (const auto& [name, knobs] : input.step_work_knobs) step_work_arms.insert(name);
  const std::optional<StepsSlope> fit = FitStepsSlope(input.drift_runs);
  std::optional<RoundDecision> adjusted;
  if (fit) {
    RoundInput a = ThroughputAdjustedInput(input, *fit, step_work_arms);
    adjusted.emplace();
    XV_RETURN_IF_ERROR(RoundDecider().Decide(a.policy, a.head_runs, a.candidates, &*adjusted));
  }
  const bool use_adjusted = input.policy.adjust_for_throughput && adjusted.has_value();
  RoundVerdict out;
  TakeDecidersVerdict(use_adjusted ? *adjusted : raw, input.head_runs.size(), &out);
  out.drift = MeasureRoundDrift(input.drift_runs, step_work_arms);
  out.json["drift"] = out.drift.ToJson();
  out.json["throughput_adjusted"] = AdjustedJson(fit, adjusted);
  out.json["decided_on"] = use_adjusted ? "throughput_adjusted" : "raw";
  NoteStepWork(input.step_work_knobs, &out);
  const DriftVerdict guard = CheckThroughputDrift(out.drift, input.policy.max_throughput_drift);
  if (guard.confounded) ApplyConfounded(guard.reason, &out);
  ApplyKeepRule(input.keep_rule, &out);
  switch (input.kind) {
    case RoundKind::kConfirm:
      AddConfirmSummary(input.fresh_head_runs, input.candidates, &out);
      break;
    case RoundKind::kAblation:
      AddAblationSummary(input.policy, input.head_runs, input.candidates, &out);
      break;
    case RoundKind::kCandidates:
    case RoundKind::kSweep:
    case RoundKind::kPlanPhase:
      break;
  }
  *verdict = std::move(out);
  return Status::Ok();
}

void ApplyConfounded(const std::string& reason, RoundVerdict* verdict) {
  verdict->confounded = true;
  for (size_t i = 0; i < verdict->decision.candidates.size(); ++i) {
    CandidateDecision& d = verdict->decision.candidates[i];
    d.keep = false;
    CandidateVerdict& v = verdict->candidates[d.name];
    v = {Decision::kDiscard, "confounded: " + reason + " (the test said: " + v.reason + ")"};
    verdict->json["candidates"][i]["decision"] = "discard";
    verdict->json["candidates"][i]["confounded"] = true;
  }
  verdict->decision.kept_index.reset();
  verdict->kept.reset();
  verdict->json["kept"] = nullptr;
  verdict->json["confounded"] = reason;
  verdict->summary = "confounded: " + reason + "; " + verdict->summary;
}

void ApplyKeepRule(KeepRule rule, RoundVerdict* verdict) {
  switch (rule) {
    case KeepRule::kBest:
      return;
    case KeepRule::kNone:
      break;
  }
  if (!verdict->decision.kept_index) return;
  const size_t idx = *verdict->decision.kept_index;
  const std::string& name = verdict->decision.candidates[idx].name;
  verdict->candidates[name] = {Decision::kDiscard,
                               "record_only: passed, but this round keeps nothing"};
  verdict->json["candidates"][idx]["decision"] = "discard";
  verdict->json["candidates"][idx]["reason"] = "record_only";
  verdict->json["kept"] = nullptr;
  verdict->kept.reset();
  verdict->summary = "record only: " + verdict->summary;
}

FiniteSummary SummarizeFinite(const std::vector<RunOutcome>& runs) {
  std::vector<double> values;
  FiniteSummary out;
  for (const RunOutcome& r : runs) {
    if (!r.diverged && std::isfinite(r.val_bpb)) {
      values.push_back(r.val_bpb);
    } else {
      ++out.non_finite;
    }
  }
  out.summary = Summarize(values);
  return out;
}

void AddConfirmSummary(const std::vector<RunOutcome>& fresh_head_runs,
                       const std::vector<CandidateRuns>& candidates, RoundVerdict* verdict) {
  const FiniteSummary head = SummarizeFinite(fresh_head_runs);
  nlohmann::json confirm = {{"head", SummaryJson(head)}};
  std::string line =
      "confirm: head " + MeanAndSd(head.summary) + " (n=" + std::to_string(head.summary.n) +
      " fresh seeds" +
      (head.non_finite > 0 ? ", " + std::to_string(head.non_finite) + " not finite" : "") + ")";
  for (const CandidateRuns& c : candidates) {
    const FiniteSummary cs = SummarizeFinite(c.runs);
    confirm["candidates"][c.name] = SummaryJson(cs);
    line +=
        "; " + c.name + " " + MeanAndSd(cs.summary) + " (n=" + std::to_string(cs.summary.n) + ")";
  }
  verdict->json["confirm"] = confirm;
  verdict->summary = line + (candidates.empty() ? "" : "; " + verdict->summary);
}

const char* KnobEffectName(KnobEffect effect) {
  switch (effect) {
    case KnobEffect::kMatters:
      return "matters";
    case KnobEffect::kNoEffect:
      return "no_effect";
    case KnobEffect::kUnknown:
      return "unknown";
  }
  return "unknown";
}

AblationFinding AssessDroppedKnob(const AcceptancePolicy& policy, const FiniteSummary& head,
                                  const CandidateRuns& candidate) {
  AblationFinding f;
  f.candidate = candidate.name;
  f.knob = candidate.name.size() > 1 && candidate.name[0] == '-' ? candidate.name.substr(1)
                                                                 : candidate.name;
  const FiniteSummary cs = SummarizeFinite(candidate.runs);
  const SampleSummary& hs = head.summary;
  if (cs.non_finite > 0) {
    f.effect = KnobEffect::kMatters;
    f.why = "dropping it gave " + std::to_string(cs.non_finite) + " non-finite run(s)";
    return f;
  }
  if (cs.summary.n < 2 || hs.n < 2) {
    f.effect = KnobEffect::kUnknown;
    f.why = "fewer than 2 finite runs";
    return f;
  }
  // Worse = the head is lower than the candidate: the test with the roles swapped.
  const std::optional<WelchResult> w = WelchOneSidedLower(hs, cs.summary);
  const double alpha = 1.0 - policy.confidence;
  const double worse = cs.summary.mean - hs.mean;
  f.worse_by = worse;
  f.p = w->p_one_sided;
  if (w->p_one_sided < alpha && worse >= policy.min_effect) {
    f.effect = KnobEffect::kMatters;
    f.why = "dropping it is worse by " + Fixed(worse, 5) + " (p=" + Fixed(w->p_one_sided, 4) + ")";
  } else {
    f.effect = KnobEffect::kNoEffect;
    f.why = "dropping it is not significantly worse (" + Fixed(worse, 5) +
            ", p=" + Fixed(w->p_one_sided, 4) + "): may be dropped";
  }
  return f;
}

void AddAblationSummary(const AcceptancePolicy& policy, const std::vector<RunOutcome>& head_runs,
                        const std::vector<CandidateRuns>& candidates, RoundVerdict* verdict) {
  const FiniteSummary head = SummarizeFinite(head_runs);
  nlohmann::json effects = nlohmann::json::array();
  std::map<KnobEffect, std::string> knobs;  // effect -> "a, b"
  for (const CandidateRuns& c : candidates) {
    const AblationFinding f = AssessDroppedKnob(policy, head, c);
    nlohmann::json e = {{"candidate", f.candidate}, {"knob", f.knob}};
    if (f.worse_by) e["worse_by"] = *f.worse_by;
    if (f.p) e["p"] = *f.p;
    e["effect"] = KnobEffectName(f.effect);
    effects.push_back(e);
    std::string& list = knobs[f.effect];
    list += (list.empty() ? "" : ", ") + f.knob;
    CandidateVerdict& v = verdict->candidates[c.name];
    v.reason = v.reason + "; ablation: " + KnobEffectName(f.effect) + ": " + f.why;
  }
  verdict->json["ablation"] = effects;
  const std::string& matters = knobs[KnobEffect::kMatters];
  const std::string& no_effect = knobs[KnobEffect::kNoEffect];
  const std::string& unknown = knobs[KnobEffect::kUnknown];
  verdict->summary = "ablation: matters: " + (matters.empty() ? "none" : matters) +
                     "; no effect (may be dropped): " + (no_effect.empty() ? "none" : no_effect) +
                     (unknown.empty() ? "" : "; unknown: " + unknown) + "; " + verdict->summary;
}

}  // namespace xv::sched
