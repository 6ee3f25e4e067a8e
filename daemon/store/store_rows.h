// The rows the store reads and writes, as plain structs: what a submission stores, what the
// scheduler, the round decision, plans and Watch read back. No SQLite here: the tables
// (daemon/store/*_table.h, attempt_ledger.h, experiment_queries.h, event_log.h) convert between
// these and SQL rows, and only there do state, role, kind, keep rule and decision names meet text.
// Thread-safety: plain values; no shared state.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/run_states.h"
#include "daemon/sched/placement_inputs.h"
#include "xv/v1/experiments.pb.h"
#include "xv/v1/workers.pb.h"

namespace xv::store {

// The scheduler's view of the queue and of the replicates' history (placement's own inputs).
using QueuedExperiment = sched::QueuedExperiment;
using CandidateWorkerCount = sched::CandidateWorkerCount;

// One experiment row of a submission: one replicate of one candidate.
struct NewExperiment {
  std::string name;  // "matrix_lr=0.03" or "base"
  int candidate_index = 0;
  int replicate = 0;
  std::string overrides_json = "{}";
  int64_t seed = 0;
  std::string recipe_hash;                 // CanonicalHash of the resolved config (seed included)
  std::string recipe_json;                 // RecipeToJson: what the trainer receives
  std::string resolved_json;               // ResolvedConfigJson
  std::string device_requirement = "any";  // any | gpu
  double time_budget_s = 0;
  double hard_deadline_s = 0;
  RunRole role = RunRole::kCandidate;  // or kControl: a run of the round's head config
  std::string config_hash;             // CanonicalHash of the resolved config with seed 0
  int run_order = -1;  // place in the round's randomised order (-1: the round has none)
  int run_block = -1;  // its block (-1: none)
  // A code candidate's source (issue 16): a key of NewSubmission::sources; "" runs the trainer's
  // configured file. recipe_hash and config_hash cover it.
  std::string source_sha256;
};

// Whether a submission's rows may take an earlier run's result instead of running (issue 14).
enum class ResultReuse {
  // A round without a decision that compares arms (no acceptance policy, or a failure map): an
  // identical run (same resolved config and seed) of the campaign that succeeded before stands in.
  kAcrossRounds,
  // The arms of a decided round: every run is fresh, so that the controls and the candidates are
  // measured under the same conditions, interleaved.
  kNone,
};

// Everything one Submit stores, in one transaction.
struct NewSubmission {
  std::string campaign = "default";
  std::string recipe_name;
  std::string recipe_yaml;
  std::string trainer = "libtorch";
  int priority = 0;
  std::string submitter;
  RoundKind kind = RoundKind::kCandidates;
  std::string base_hash, base_recipe_json, base_resolved_json;
  std::string base_config_hash;    // the head the round compares with, seed 0
  std::string base_source_sha256;  // the base recipe's source ("" = the configured file)
  std::map<std::string, std::string> sources;  // sha256 -> text of every source named above
  std::vector<NewExperiment> experiments;
  // Plans (migrations/0003_plans.sql): the plan phase this round is built for (0: none). At most
  // one round per (plan_id, plan_phase): a second insert fails with AlreadyExists.
  int64_t plan_id = 0;
  int plan_phase = 0;
  KeepRule keep_rule = KeepRule::kBest;  // kNone: the round only records; nothing is kept
  int64_t order_seed = 0;  // the seed of the run order (rounds.order_seed; 0: no order)
  ResultReuse reuse = ResultReuse::kAcrossRounds;
  // Why reuse is sound here, for the reused rows (kAcrossRounds).
  std::string reuse_reason = "an identical run (config and seed) of the campaign has a result";
};

struct SubmissionIds {
  int64_t campaign_id = 0;
  int64_t round_id = 0;
  std::vector<int64_t> experiment_ids;
};

// An attempt handed to a worker and not finished yet (state assigned or running).
struct ActiveAttempt {
  int64_t experiment_id = 0;
  int attempt = 0;
  int64_t worker_id = 0;
  ExperimentState state = ExperimentState::kAssigned;  // assigned or running
  int64_t assigned_age_ms = 0;                         // how long ago it was assigned
  int64_t campaign_id = 0;
};

// A campaign to create (CreateCampaign): its base recipe becomes the head.
struct NewCampaign {
  std::string name;
  std::string recipe_name;
  std::string trainer = "libtorch";
  std::string policy_json = "{}";
  std::string device_filter;
  std::string budget_json = "{}";
  std::string base_hash, base_recipe_json, base_resolved_json;
  int max_attempts = 2;  // 1..10: a lost attempt is requeued while attempt < max_attempts
};

// What Submit needs to know about an existing campaign.
struct CampaignHead {
  int64_t id = 0;
  CampaignState state = CampaignState::kActive;
  std::string policy_json;  // "{}": no policy
  std::string trainer;
  std::string head_recipe_json;
  std::string base_recipe_json;  // the recipe the campaign was created with (ablations)
  std::string name;
  std::string budget_json;         // campaigns.budget_json (daemon/api/budget_contract.h)
  std::string head_source_sha256;  // the head's code candidate source ("" = none; issue 16)
};

// A round every experiment of which is terminal, still open, in a campaign with a policy.
struct RoundToDecide {
  int64_t round_id = 0;
  int64_t campaign_id = 0;
  std::string policy_json;
  std::string head_config_hash;
  RoundKind kind = RoundKind::kCandidates;  // rounds.kind
  KeepRule keep_rule = KeepRule::kBest;     // rounds.keep_rule
};

// One experiment as the decision sees it.
struct RoundRun {
  int64_t experiment_id = 0;
  int64_t recipe_id = 0;
  int64_t reused_from_id = 0;
  std::string name;
  RunRole role = RunRole::kCandidate;
  ExperimentState state = ExperimentState::kQueued;
  std::string config_hash;
  std::string device_name;
  int candidate_index = 0;
  int replicate = 0;
  bool has_val_bpb = false;  // a result row with a non-NULL val_bpb (NaN is stored as NULL)
  double val_bpb = 0;
  // Throughput (issue 14): the result's tok/s and steps (0 when none) and when the attempt
  // started, in seconds since the epoch (0 when unknown).
  double tok_per_sec = 0;
  int64_t num_steps = 0;
  bool has_result = false;
  double started_s = 0;
  std::string overrides_json;
};

// The outcome of one round, to store in one transaction.
struct RoundDecisionRecord {
  int64_t round_id = 0;
  std::string summary;        // rounds.decision_summary
  std::string decision_json;  // rounds.decision_json
  std::string kept_candidate;
  int64_t kept_experiment_id = 0;  // 0: nothing kept, the head stays
  std::string head_reason;         // head_history.reason when the head moves
  // Per candidate name: decision (keep | discard) and reason, applied to its experiments.
  std::map<std::string, std::pair<Decision, std::string>> candidates;
  std::string drift_json;  // rounds.drift_json ("" for a manual decision)
};

// A stored plan (migrations/0003_plans.sql).
struct StoredPlan {
  int64_t id = 0;
  int64_t campaign_id = 0;
  std::string campaign;
  std::string name;
  std::string yaml;
  PlanState state = PlanState::kRunning;
  int current_phase = 0;
  std::string outcomes_json = "[]";
  std::string reason;
  std::string submitter;
  std::string created_at, updated_at;
};

// A round built for a plan phase.
struct PlanRound {
  int64_t round_id = 0;
  int phase = 0;
  RoundState state = RoundState::kOpen;
  std::string decision_summary;
  std::string decision_json;
  std::string kept_candidate;  // "" when nothing was kept
  int unfinished = 0;
};

// One row of the events table as Watch sees it: the stored event plus the experiment's campaign,
// round and name (decision and head events carry campaign_id and round_id in their JSON).
struct StoredEvent {
  int64_t id = 0;
  std::string created_at;
  std::string source;  // trainer | daemon | audit
  int64_t experiment_id = 0;
  int attempt = 0;
  std::string type;
  std::string json;
  int64_t campaign_id = 0;
  std::string campaign;
  int64_t round_id = 0;
  std::string name;  // the experiment's name
};

// What the daemon must tell a worker after an event batch or a Finished was stored.
// What one Finished of a group commit (AttemptLedger::ApplyTrainerEventBatches) came to.
struct AppliedFinished {
  xv::v1::EventAck ack;  // finished set: the worker stops resending it
  // Non-empty: the worker never held this attempt (why); nothing was applied.
  std::string not_held;
  std::string state;  // the state the worker reported (for the log)
};

struct AppliedEvents {
  std::vector<xv::v1::EventAck> acks;     // one per (experiment, attempt) touched
  int duplicates = 0;                     // events already stored before (ignored)
  int rejected = 0;                       // events for attempts this worker does not hold
  std::vector<AppliedFinished> finished;  // one per Finished of the batch, in order
};

// What ReclaimLostAttempt decided about an attempt a worker reports still running.
struct ReclaimDecision {
  enum class Outcome {
    kActive,     // it is this worker's active attempt: nothing to do
    kReclaimed,  // it was lost and is this worker's active attempt again
    kRefused,    // the daemon does not hold it for this worker: the worker must cancel it
  };
  Outcome outcome = Outcome::kRefused;
  std::string reason;  // kReclaimed: what was withdrawn; kRefused: why (for the Cancel and logs)
  // kReclaimed: the experiment's state now (assigned or running).
  ExperimentState state = ExperimentState::kQueued;
};
}  // namespace xv::store
