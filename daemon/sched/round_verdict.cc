#include "daemon/sched/round_verdict.h"

#include <cmath>
#include <cstdio>

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
    verdict->candidates[c.name] = {
        c.keep ? Decision::kKeep : Decision::kDiscard,
        std::string(DecisionReasonName(c.reason)) + ": " + c.reason_text};
  }
  if (decision.kept_index) verdict->kept = decision.candidates[*decision.kept_index].name;
}

}  // namespace

Status DecideRound(const RoundInput& input, RoundVerdict* verdict) {
  RoundDecision decision;
  XV_RETURN_IF_ERROR(
      RoundDecider().Decide(input.policy, input.head_runs, input.candidates, &decision));
  RoundVerdict out;
  TakeDecidersVerdict(decision, input.head_runs.size(), &out);
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
