// RoundVerdict: the final, stored decision of one campaign round (DESIGN.md § Keep/discard
// semantics), as pure functions over the runs RoundCloser loads from the store:
//  1. RoundDecider decides keep/discard for every candidate (round_decider.h);
//  2. the round's keep rule applies: under keep_rule none (plans' failure maps) the round only
//     records, so a candidate that passed is discarded as "record_only" and nothing is kept;
//  3. the round's kind adds its own summary: a confirm round the means of its fresh runs (the
//     head's controls of this round alone and each candidate's replicates); an ablation round
//     which of the head's changes matter (see AssessDroppedKnob).
// Around them, the round's throughput (issue 14, round_drift.h): its drift figures are measured
// and stored ("drift" in the JSON); a throughput-adjusted Welch test is reported beside the raw one
// ("throughput_adjusted") and decides instead of it when the policy says adjust_for_throughput;
// a candidate that changes a step's work by design has "; the difference includes speed (...)"
// added to its reason; and when the drift guard finds the round confounded, nothing is kept:
// every candidate is discarded with reason "confounded: ..." and "confounded" holds the reason.
// The verdict holds what the store writes: each candidate's decision and reason, the one-line
// summary, the decision JSON and the kept candidate.
// Thread-safety: stateless; pure functions.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/run_states.h"
#include "common/status.h"
#include "daemon/sched/acceptance_policy.h"
#include "daemon/sched/round_decider.h"
#include "daemon/sched/round_drift.h"
#include "daemon/sched/welch_test.h"

namespace xv::sched {

struct RoundInput {
  RoundKind kind = RoundKind::kCandidates;
  KeepRule keep_rule = KeepRule::kBest;
  AcceptancePolicy policy;
  // The head runs the candidates are compared with: this round's controls and, when the policy
  // pools head runs, earlier runs of the same head config (each original run once).
  std::vector<RunOutcome> head_runs;
  // This round's controls alone (each original run once): what a confirm round summarises.
  std::vector<RunOutcome> fresh_head_runs;
  std::vector<CandidateRuns> candidates;  // in submission order
  // This round's own runs with their throughput (controls and candidates, reuse rows left out):
  // the drift figures and the throughput-adjusted estimate read them.
  std::vector<DriftRun> drift_runs;
  // Candidates that change a step's work by design, with those knobs ("depth, sequence_len").
  std::map<std::string, std::string> step_work_knobs;
};

struct CandidateVerdict {
  Decision decision = Decision::kDiscard;  // kKeep or kDiscard
  std::string reason;                      // "<reason name>: <numbers>", for experiments.reason
};

struct RoundVerdict {
  RoundDecision decision;                              // the decider's statistics and summary
  std::optional<std::string> kept;                     // the kept candidate, after the keep rule
  std::map<std::string, CandidateVerdict> candidates;  // by candidate name
  std::string summary;                                 // rounds.decision_summary
  RoundDrift drift;                                    // the round's drift figures
  bool confounded = false;                             // the drift guard refused a decision
  // rounds.decision_json: RoundDecision::ToJson plus {"mode": "auto", "head_runs": n} and, by
  // kind, "confirm" or "ablation" (below).
  nlohmann::json json;
};

// Steps 1 to 3 and the throughput checks. Errors: those of RoundDecider::Decide (the policy,
// candidate names).
Status DecideRound(const RoundInput& input, RoundVerdict* verdict);

// The guard's outcome applied: every candidate discarded ("confounded: <reason>"), nothing kept,
// "confounded" set in the JSON and the summary prefixed "confounded: ".
void ApplyConfounded(const std::string& reason, RoundVerdict* verdict);

// Step 2: keep_rule none turns a keep into a discard ("record_only: passed, but this round keeps
// nothing"), clears the kept candidate, marks the JSON and prefixes the summary "record only: ".
// keep_rule best changes nothing.
void ApplyKeepRule(KeepRule rule, RoundVerdict* verdict);

// The finite val_bpb of `runs` summarised, and how many runs were not finite (diverged or NaN).
struct FiniteSummary {
  SampleSummary summary;
  int non_finite = 0;
};
FiniteSummary SummarizeFinite(const std::vector<RunOutcome>& runs);

// Step 3, confirm: JSON {"head": {n, non_finite, mean, sd}, "candidates": {name: {...}}} and the
// line "confirm: head 1.99000 sd 0.00100 (n=3 fresh seeds); c 1.98000 (n=2)" (mean "-" when
// n = 0, sd only when n >= 2) prefixed to the summary.
void AddConfirmSummary(const std::vector<RunOutcome>& fresh_head_runs,
                       const std::vector<CandidateRuns>& candidates, RoundVerdict* verdict);

// Ablation: dropping knob k (candidate "-k") matters when it made a run non-finite, or when the
// candidate is worse than the head by a one-sided Welch test at the policy's confidence (no
// correction: calling a change "matters" errs on keeping it) and by at least min_effect. With
// fewer than 2 finite runs on either side the effect is unknown; otherwise the change shows no
// effect and may be dropped (simplification). The head only moves when dropping a knob is
// significantly better (the usual keep rule).
enum class KnobEffect { kMatters, kNoEffect, kUnknown };
const char* KnobEffectName(KnobEffect effect);  // "matters", "no_effect", "unknown"

struct AblationFinding {
  std::string candidate;
  std::string knob;  // the candidate's name without its leading '-'
  KnobEffect effect = KnobEffect::kUnknown;
  std::string why;                 // one line for people
  std::optional<double> worse_by;  // candidate mean - head mean, when tested
  std::optional<double> p;         // one-sided Welch p, when tested
};
AblationFinding AssessDroppedKnob(const AcceptancePolicy& policy, const FiniteSummary& head,
                                  const CandidateRuns& candidate);

// Step 3, ablation: the findings of every candidate in JSON ("ablation": [{candidate, knob,
// effect, worse_by, p}]), appended to each candidate's reason ("; ablation: matters: ...") and
// summarised first in the line ("ablation: matters: a; no effect (may be dropped): b; ...").
void AddAblationSummary(const AcceptancePolicy& policy, const std::vector<RunOutcome>& head_runs,
                        const std::vector<CandidateRuns>& candidates, RoundVerdict* verdict);

}  // namespace xv::sched
