#include "daemon/engine/round_closer.h"

#include <limits>
#include <map>
#include <set>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "common/run_states.h"
#include "daemon/sched/step_work_knobs.h"

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

bool IsControl(const store::RoundRun& run) { return run.role == RunRole::kControl; }

// A run of this round with its throughput, for the drift figures (reuse rows measured nothing
// here and are left out by the caller).
sched::DriftRun ToDriftRun(const store::RoundRun& run, const sched::RunOutcome& outcome) {
  constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
  sched::DriftRun d;
  d.experiment_id = run.experiment_id;
  d.control = IsControl(run);
  d.arm = d.control ? "head" : run.name;
  d.val_bpb = outcome.diverged ? kNaN : outcome.val_bpb;
  d.tok_per_sec = run.has_result && run.tok_per_sec > 0 ? run.tok_per_sec : kNaN;
  d.steps = run.has_result ? static_cast<double>(run.num_steps) : kNaN;
  d.started_s = run.started_s > 0 ? run.started_s : kNaN;
  return d;
}

// The step-work knobs (sched/step_work_knobs.h) among a candidate's overrides, "a, b"; "" when
// none.
std::string StepWorkKnobsOf(const std::string& overrides_json) {
  const nlohmann::json overrides = ParseBoundedJsonOrDiscarded(overrides_json);
  std::string knobs;
  if (!overrides.is_object()) return knobs;
  for (const auto& item : overrides.items()) {
    if (!sched::IsStepWorkKnob(item.key())) continue;
    knobs += (knobs.empty() ? "" : ", ") + item.key();
  }
  return knobs;
}

bool IsCandidate(const store::RoundRun& run) { return run.role == RunRole::kCandidate; }

// The run a row stands for: reuse rows count as the run they copy.
int64_t OriginalRun(const store::RoundRun& run) {
  return run.reused_from_id != 0 ? run.reused_from_id : run.experiment_id;
}

// "round 7 is decided" / "round 7 has 2 unfinished experiment(s)" unless the round is open and
// finished.
Status CheckOpenAndFinished(int64_t round_id, RoundState state, int unfinished,
                            const std::string& is) {
  if (state != RoundState::kOpen) {
    return Status::FailedPrecondition("round " + std::to_string(round_id) + is +
                                      std::string(ToString(state)));
  }
  if (unfinished > 0) {
    return Status::FailedPrecondition("round " + std::to_string(round_id) + " has " +
                                      std::to_string(unfinished) + " unfinished experiment(s)");
  }
  return Status::Ok();
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
  XV_RETURN_IF_ERROR(CheckOpenAndFinished(round_id, state, unfinished, " is "));
  return Decide(round);
}

Status RoundCloser::Decide(const store::RoundToDecide& round) {
  CampaignPolicy policy;
  XV_RETURN_IF_ERROR(ParseStoredCampaignPolicy(round.policy_json, &policy));
  if (!policy.set) {
    return Status::FailedPrecondition("round " + std::to_string(round.round_id) +
                                      ": its campaign has no acceptance policy");
  }
  LoadedRound loaded;
  XV_RETURN_IF_ERROR(LoadRound(round, policy, &loaded));
  sched::RoundVerdict verdict;
  XV_RETURN_IF_ERROR(sched::DecideRound(loaded.input, &verdict));
  XV_RETURN_IF_ERROR(StoreVerdict(round.round_id, verdict, loaded.first_experiment));
  spdlog::info("round {} decided: {}; {}", round.round_id, verdict.summary,
               sched::DescribeDrift(verdict.drift));
  return Status::Ok();
}

Status RoundCloser::LoadRound(const store::RoundToDecide& round, const CampaignPolicy& policy,
                              LoadedRound* out) {
  sched::RoundInput& input = out->input;
  input.policy = policy.acceptance;
  input.kind = round.kind;
  input.keep_rule = round.keep_rule;
  std::vector<store::RoundRun> runs;
  XV_RETURN_IF_ERROR(store_->rounds().ListRoundRuns(round.round_id, &runs));

  std::set<int64_t> counted;  // original runs already among the head runs
  std::map<std::string, size_t> candidate_index;
  std::map<std::string, int> first_replicate;
  for (const auto& run : runs) {
    sched::RunOutcome outcome;
    const bool measured = ToRunOutcome(run, &outcome);
    if (measured && run.reused_from_id == 0) input.drift_runs.push_back(ToDriftRun(run, outcome));
    if (IsControl(run)) {
      if (measured && counted.insert(OriginalRun(run)).second) {
        input.head_runs.push_back(outcome);
        input.fresh_head_runs.push_back(outcome);
      }
      continue;
    }
    auto [it, inserted] = candidate_index.emplace(run.name, input.candidates.size());
    if (inserted || run.replicate < first_replicate[run.name]) {
      out->first_experiment[run.name] = run.experiment_id;
      first_replicate[run.name] = run.replicate;
    }
    if (inserted) input.candidates.push_back({run.name, {}});
    const std::string step_work = StepWorkKnobsOf(run.overrides_json);
    if (!step_work.empty()) input.step_work_knobs[run.name] = step_work;
    if (measured) input.candidates[it->second].runs.push_back(outcome);
  }
  if (policy.pool_head_runs && !round.head_config_hash.empty()) {
    std::vector<store::RoundRun> earlier;
    XV_RETURN_IF_ERROR(store_->rounds().ListEarlierConfigRuns(
        round.campaign_id, round.head_config_hash, round.round_id, &earlier));
    for (const auto& run : earlier) {
      sched::RunOutcome outcome;
      if (ToRunOutcome(run, &outcome) && counted.insert(OriginalRun(run)).second) {
        input.head_runs.push_back(outcome);
      }
    }
  }
  return Status::Ok();
}

Status RoundCloser::StoreVerdict(int64_t round_id, const sched::RoundVerdict& verdict,
                                 const std::map<std::string, int64_t>& first_experiment) {
  store::RoundDecisionRecord record;
  record.round_id = round_id;
  record.summary = verdict.summary;
  record.decision_json = DumpJsonLossless(verdict.json);
  record.drift_json = DumpJsonLossless(verdict.drift.ToJson());
  for (const auto& [name, v] : verdict.candidates) {
    record.candidates[name] = {v.decision, v.reason};
  }
  if (verdict.kept) {
    record.kept_candidate = *verdict.kept;
    record.kept_experiment_id = first_experiment.at(*verdict.kept);
    record.head_reason = "kept";
  }
  return store_->rounds().StoreRoundDecision(record);
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
  XV_RETURN_IF_ERROR(CheckOpenAndFinished(round_id, state, unfinished, " is already "));
  if (reason.size() > 2000) return Status::InvalidArgument("reason: longer than 2000 bytes");
  std::vector<store::RoundRun> runs;
  XV_RETURN_IF_ERROR(store_->rounds().ListRoundRuns(round_id, &runs));
  std::string kept_name;
  if (keep_experiment_id != 0) {
    for (const auto& run : runs) {
      if (run.experiment_id != keep_experiment_id) continue;
      if (!IsCandidate(run)) {
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
    if (!IsCandidate(run)) continue;
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
