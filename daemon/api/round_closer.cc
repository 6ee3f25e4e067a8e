#include "daemon/api/round_closer.h"

#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/run_states.h"
#include "daemon/api/campaign_policy.h"
#include "daemon/sched/round_decider.h"
#include "daemon/sched/welch_test.h"

namespace xv::daemon {
namespace {

// A terminal experiment as a decider run; false when it produced no measurement.
bool ToRunOutcome(const store::RoundRun& run, sched::RunOutcome* out) {
  out->experiment_id = run.experiment_id;
  out->device_class = run.device_name;
  if (run.state == ExperimentState::kSucceeded) {
    // A val_bpb that cannot be true (stored before results were judged) counts as non-finite.
    out->val_bpb =
        run.has_val_bpb && run.val_bpb > 0 ? run.val_bpb : std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (run.state == ExperimentState::kDiverged) {
    out->diverged = true;
    if (run.has_val_bpb) out->val_bpb = run.val_bpb;
    return true;
  }
  return false;
}

// Summary of the finite val_bpb of `runs` and how many were not finite.
sched::SampleSummary FiniteSummary(const std::vector<sched::RunOutcome>& runs, int* non_finite) {
  std::vector<double> values;
  int bad = 0;
  for (const auto& r : runs) {
    if (!r.diverged && std::isfinite(r.val_bpb)) {
      values.push_back(r.val_bpb);
    } else {
      ++bad;
    }
  }
  if (non_finite) *non_finite = bad;
  return sched::Summarize(values);
}

nlohmann::json SummaryJson(const sched::SampleSummary& s, int non_finite) {
  nlohmann::json j = {{"n", s.n}, {"non_finite", non_finite}};
  j["mean"] = s.n >= 1 ? nlohmann::json(s.mean) : nlohmann::json();
  j["sd"] = s.n >= 2 ? nlohmann::json(s.sd) : nlohmann::json();
  return j;
}

std::string Fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// The run a row stands for: reuse rows count as the run they copy.
int64_t OriginalRun(const store::RoundRun& run) {
  return run.reused_from_id != 0 ? run.reused_from_id : run.experiment_id;
}

}  // namespace

Status RoundCloser::DecideReadyRounds(int* decided) {
  std::vector<store::RoundToDecide> ready;
  XV_RETURN_IF_ERROR(store_->rounds().ListRoundsToDecide(&ready));
  int n = 0;
  for (const auto& round : ready) {
    CampaignPolicy policy;
    XV_RETURN_IF_ERROR(ParseStoredCampaignPolicy(round.policy_json, &policy));
    if (!policy.set || policy.manual) continue;
    Status s = Decide(round);
    if (!s.ok()) {
      spdlog::error("round {}: decision failed: {}", round.round_id, s.ToString());
      continue;
    }
    ++n;
  }
  if (decided) *decided = n;
  return Status::Ok();
}

Status RoundCloser::DecideRound(int64_t round_id) {
  store::RoundToDecide round;
  RoundState state = RoundState::kOpen;
  int unfinished = 0;
  XV_RETURN_IF_ERROR(store_->rounds().GetRoundState(round_id, &round, &state, &unfinished));
  if (state != RoundState::kOpen) {
    return Status::FailedPrecondition("round " + std::to_string(round_id) + " is " +
                                      std::string(ToString(state)));
  }
  if (unfinished > 0) {
    return Status::FailedPrecondition("round " + std::to_string(round_id) + " has " +
                                      std::to_string(unfinished) + " unfinished experiment(s)");
  }
  return Decide(round);
}

Status RoundCloser::Decide(const store::RoundToDecide& round) {
  CampaignPolicy policy;
  XV_RETURN_IF_ERROR(ParseStoredCampaignPolicy(round.policy_json, &policy));
  if (!policy.set) {
    return Status::FailedPrecondition("round " + std::to_string(round.round_id) +
                                      ": its campaign has no acceptance policy");
  }
  std::vector<store::RoundRun> runs;
  XV_RETURN_IF_ERROR(store_->rounds().ListRoundRuns(round.round_id, &runs));

  std::set<int64_t> counted;  // original runs already among the head runs
  std::vector<sched::RunOutcome> head_runs;
  std::vector<sched::CandidateRuns> candidates;
  std::map<std::string, size_t> candidate_index;
  std::map<std::string, int64_t> first_experiment;  // candidate -> lowest-replicate experiment
  std::map<std::string, int> first_replicate;
  for (const auto& run : runs) {
    sched::RunOutcome outcome;
    const bool measured = ToRunOutcome(run, &outcome);
    if (run.role == RunRole::kControl) {
      if (measured && counted.insert(OriginalRun(run)).second) head_runs.push_back(outcome);
      continue;
    }
    auto [it, inserted] = candidate_index.emplace(run.name, candidates.size());
    if (inserted) {
      candidates.push_back({run.name, {}});
      first_experiment[run.name] = run.experiment_id;
      first_replicate[run.name] = run.replicate;
    } else if (run.replicate < first_replicate[run.name]) {
      first_experiment[run.name] = run.experiment_id;
      first_replicate[run.name] = run.replicate;
    }
    if (measured) candidates[it->second].runs.push_back(outcome);
  }
  if (policy.pool_head_runs && !round.head_config_hash.empty()) {
    std::vector<store::RoundRun> earlier;
    XV_RETURN_IF_ERROR(store_->rounds().ListEarlierConfigRuns(
        round.campaign_id, round.head_config_hash, round.round_id, &earlier));
    for (const auto& run : earlier) {
      sched::RunOutcome outcome;
      if (ToRunOutcome(run, &outcome) && counted.insert(OriginalRun(run)).second) {
        head_runs.push_back(outcome);
      }
    }
  }

  sched::RoundDecision decision;
  XV_RETURN_IF_ERROR(
      sched::RoundDecider().Decide(policy.acceptance, head_runs, candidates, &decision));
  store::RoundDecisionRecord record;
  record.round_id = round.round_id;
  record.summary = decision.summary;
  nlohmann::json j = decision.ToJson();
  j["mode"] = "auto";
  j["head_runs"] = head_runs.size();
  for (const auto& c : decision.candidates) {
    record.candidates[c.name] = {
        c.keep ? Decision::kKeep : Decision::kDiscard,
        std::string(sched::DecisionReasonName(c.reason)) + ": " + c.reason_text};
  }
  // keep_rule none (failure maps): the round records; nothing is kept whatever the test says.
  if (round.keep_rule == KeepRule::kNone && decision.kept_index) {
    const size_t idx = *decision.kept_index;
    const std::string& name = decision.candidates[idx].name;
    record.candidates[name] = {Decision::kDiscard,
                               "record_only: passed, but this round keeps nothing"};
    j["candidates"][idx]["decision"] = "discard";
    j["candidates"][idx]["reason"] = "record_only";
    decision.kept_index.reset();
    j["kept"] = nullptr;
    record.summary = "record only: " + record.summary;
  }
  if (round.kind == RoundKind::kConfirm) {
    // The fresh runs of this round alone: the head's controls and each candidate's replicates.
    std::vector<sched::RunOutcome> fresh_head;
    std::set<int64_t> seen;
    for (const auto& run : runs) {
      sched::RunOutcome outcome;
      if (run.role == RunRole::kControl && ToRunOutcome(run, &outcome) &&
          seen.insert(OriginalRun(run)).second) {
        fresh_head.push_back(outcome);
      }
    }
    int bad = 0;
    const sched::SampleSummary hs = FiniteSummary(fresh_head, &bad);
    nlohmann::json confirm = {{"head", SummaryJson(hs, bad)}};
    std::string line = "confirm: head " + (hs.n >= 1 ? Fixed(hs.mean, 5) : std::string("-")) +
                       (hs.n >= 2 ? " sd " + Fixed(hs.sd, 5) : std::string()) +
                       " (n=" + std::to_string(hs.n) + " fresh seeds" +
                       (bad > 0 ? ", " + std::to_string(bad) + " not finite" : "") + ")";
    for (const auto& c : candidates) {
      int cbad = 0;
      const sched::SampleSummary cs = FiniteSummary(c.runs, &cbad);
      confirm["candidates"][c.name] = SummaryJson(cs, cbad);
      line += "; " + c.name + " " + (cs.n >= 1 ? Fixed(cs.mean, 5) : std::string("-")) +
              (cs.n >= 2 ? " sd " + Fixed(cs.sd, 5) : std::string()) +
              " (n=" + std::to_string(cs.n) + ")";
    }
    j["confirm"] = confirm;
    record.summary = line + (candidates.empty() ? "" : "; " + record.summary);
  }
  if (round.kind == RoundKind::kAblation) {
    // Which of the head's changes matter: dropping knob k ("-k") matters when the candidate is
    // worse than the head by a one-sided Welch test at the policy's confidence (no correction:
    // calling a change "matters" errs on keeping it) and by at least min_effect, or when it made
    // a run non-finite. Otherwise the change shows no effect and may be dropped (simplification);
    // the head only moves when dropping a knob is significantly better (the usual keep rule).
    int head_bad = 0;
    const sched::SampleSummary hs = FiniteSummary(head_runs, &head_bad);
    const double alpha = 1.0 - policy.acceptance.confidence;
    nlohmann::json effects = nlohmann::json::array();
    std::string matters, no_effect, unknown;
    for (const auto& c : candidates) {
      int cbad = 0;
      const sched::SampleSummary cs = FiniteSummary(c.runs, &cbad);
      const std::string knob = c.name.size() > 1 && c.name[0] == '-' ? c.name.substr(1) : c.name;
      nlohmann::json e = {{"candidate", c.name}, {"knob", knob}};
      std::string effect, why;
      if (cbad > 0) {
        effect = "matters";
        why = "dropping it gave " + std::to_string(cbad) + " non-finite run(s)";
      } else if (cs.n < 2 || hs.n < 2) {
        effect = "unknown";
        why = "fewer than 2 finite runs";
      } else {
        // Worse = the head is lower than the candidate: the test with the roles swapped.
        const auto w = sched::WelchOneSidedLower(hs, cs);
        const double worse = cs.mean - hs.mean;
        e["worse_by"] = worse;
        e["p"] = w->p_one_sided;
        if (w->p_one_sided < alpha && worse >= policy.acceptance.min_effect) {
          effect = "matters";
          why = "dropping it is worse by " + Fixed(worse, 5) + " (p=" + Fixed(w->p_one_sided, 4) +
                ")";
        } else {
          effect = "no_effect";
          why = "dropping it is not significantly worse (" + Fixed(worse, 5) +
                ", p=" + Fixed(w->p_one_sided, 4) + "): may be dropped";
        }
      }
      e["effect"] = effect;
      effects.push_back(e);
      std::string& list = effect == "matters"     ? matters
                          : effect == "no_effect" ? no_effect
                                                  : unknown;
      list += (list.empty() ? "" : ", ") + knob;
      auto& d = record.candidates[c.name];
      d.second = d.second + "; ablation: " + effect + ": " + why;
    }
    j["ablation"] = effects;
    record.summary = "ablation: matters: " + (matters.empty() ? "none" : matters) +
                     "; no effect (may be dropped): " + (no_effect.empty() ? "none" : no_effect) +
                     (unknown.empty() ? "" : "; unknown: " + unknown) + "; " + record.summary;
  }
  record.decision_json = DumpJsonLossless(j);
  if (decision.kept_index) {
    const std::string& name = decision.candidates[*decision.kept_index].name;
    record.kept_candidate = name;
    record.kept_experiment_id = first_experiment[name];
    record.head_reason = "kept";
  }
  XV_RETURN_IF_ERROR(store_->rounds().StoreRoundDecision(record));
  spdlog::info("round {} decided: {}", round.round_id, decision.summary);
  return Status::Ok();
}

Status RoundCloser::DecideManually(int64_t round_id, int64_t keep_experiment_id,
                                   const std::string& reason) {
  store::RoundToDecide round;
  RoundState state = RoundState::kOpen;
  int unfinished = 0;
  XV_RETURN_IF_ERROR(store_->rounds().GetRoundState(round_id, &round, &state, &unfinished));
  CampaignPolicy policy;
  XV_RETURN_IF_ERROR(ParseStoredCampaignPolicy(round.policy_json, &policy));
  if (policy.set && !policy.manual) {
    return Status::FailedPrecondition("round " + std::to_string(round_id) +
                                      ": the campaign's policy decides automatically (decide: "
                                      "auto)");
  }
  if (state != RoundState::kOpen) {
    return Status::FailedPrecondition("round " + std::to_string(round_id) + " is already " +
                                      std::string(ToString(state)));
  }
  if (unfinished > 0) {
    return Status::FailedPrecondition("round " + std::to_string(round_id) + " has " +
                                      std::to_string(unfinished) + " unfinished experiment(s)");
  }
  if (reason.size() > 2000) return Status::InvalidArgument("reason: longer than 2000 bytes");
  std::vector<store::RoundRun> runs;
  XV_RETURN_IF_ERROR(store_->rounds().ListRoundRuns(round_id, &runs));
  std::string kept_name;
  if (keep_experiment_id != 0) {
    for (const auto& run : runs) {
      if (run.experiment_id != keep_experiment_id) continue;
      if (run.role != RunRole::kCandidate) {
        return Status::InvalidArgument("keep_experiment_id: " + std::to_string(keep_experiment_id) +
                                       " is a head control, not a candidate");
      }
      if (run.state != ExperimentState::kSucceeded) {
        return Status::InvalidArgument("keep_experiment_id: " + std::to_string(keep_experiment_id) +
                                       " ended " + std::string(ToString(run.state)) +
                                       "; only a succeeded run can be kept");
      }
      kept_name = run.name;
    }
    if (kept_name.empty()) {
      return Status::InvalidArgument("keep_experiment_id: " + std::to_string(keep_experiment_id) +
                                     " is not an experiment of round " + std::to_string(round_id));
    }
  }
  store::RoundDecisionRecord record;
  record.round_id = round_id;
  const std::string why = reason.empty() ? std::string("no reason given") : reason;
  record.summary =
      (kept_name.empty() ? "manual: kept nothing" : "manual: kept " + kept_name) + " (" + why + ")";
  record.decision_json = DumpJsonLossless(
      nlohmann::json{{"mode", "manual"},
                     {"kept", kept_name.empty() ? nlohmann::json() : nlohmann::json(kept_name)},
                     {"kept_experiment_id", keep_experiment_id},
                     {"reason", why}});
  for (const auto& run : runs) {
    if (run.role != RunRole::kCandidate) continue;
    const bool keep = run.name == kept_name;
    record.candidates[run.name] = {keep ? Decision::kKeep : Decision::kDiscard,
                                   std::string(keep ? "manual_keep: " : "manual_discard: ") + why};
  }
  if (!kept_name.empty()) {
    record.kept_candidate = kept_name;
    record.kept_experiment_id = keep_experiment_id;
    record.head_reason = "manual: " + why;
  }
  return store_->rounds().StoreRoundDecision(record);
}

}  // namespace xv::daemon
