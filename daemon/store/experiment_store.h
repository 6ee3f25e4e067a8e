// ExperimentStore: xvd's SQLite database (DESIGN.md § Data model) behind typed operations.
//
// Threading contract: every method may be called from any thread. One mutex (mu_) serialises all
// use of the single connection, so the store is its own single writer; each write operation is one
// BEGIN IMMEDIATE transaction. Read-only stores (OpenReadOnly, used by `xvctl results --state-dir`)
// answer the list/get queries and fail every write with FailedPrecondition; they can run beside a
// live xvd because the database is in WAL mode.
//
// Experiment state machine: queued -> assigned -> running -> {succeeded, diverged, failed, invalid,
// cancelled, timed_out, lost}. An attempt that loses its worker may be requeued (attempt + 1).
// Trainer events are applied exactly once per (experiment_id, attempt, seq).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/store/sqlite_connection.h"
#include "xv/v1/experiments.pb.h"
#include "xv/v1/workers.pb.h"

namespace xv::store {

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
  std::string role = "candidate";  // candidate | control (a run of the round's head config)
  std::string config_hash;         // CanonicalHash of the resolved config with seed 0
};

// Everything one Submit stores, in one transaction.
struct NewSubmission {
  std::string campaign = "default";
  std::string recipe_name;
  std::string recipe_yaml;
  std::string trainer = "libtorch";
  int priority = 0;
  std::string submitter;
  std::string kind = "candidates";  // candidates | sweep | ablation | confirm
  std::string base_hash, base_recipe_json, base_resolved_json;
  std::string base_config_hash;  // the head the round compares with, seed 0
  std::vector<NewExperiment> experiments;
  // Plans (migrations/0003_plans.sql): the plan phase this round is built for (0: none). At most
  // one round per (plan_id, plan_phase): a second insert fails with AlreadyExists.
  int64_t plan_id = 0;
  int plan_phase = 0;
  std::string keep_rule = "best";  // best | none (the round only records; nothing is kept)
};

struct SubmissionIds {
  int64_t campaign_id = 0;
  int64_t round_id = 0;
  std::vector<int64_t> experiment_ids;
};

// A queued experiment as the scheduler sees it.
struct QueuedExperiment {
  int64_t id = 0;
  int priority = 0;
  std::string trainer;
  std::string device_requirement;  // any | gpu
  int64_t round_id = 0;
  std::string candidate;      // candidate name within the round (replicates share it)
  std::string device_filter;  // the campaign's ("" = any device)
  int64_t campaign_id = 0;
  std::string campaign_budget_json;  // campaigns.budget_json (max_concurrent: placement limit)
};

// An attempt handed to a worker and not finished yet (state assigned or running).
struct ActiveAttempt {
  int64_t experiment_id = 0;
  int attempt = 0;
  int64_t worker_id = 0;
  std::string state;
  int64_t assigned_age_ms = 0;  // how long ago it was assigned
  int64_t campaign_id = 0;
};

// Attempts of one candidate (round + name) per worker, for spreading replicates.
struct CandidateWorkerCount {
  int64_t round_id = 0;
  std::string candidate;
  int64_t worker_id = 0;
  int count = 0;
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
  std::string state;        // active | paused | done
  std::string policy_json;  // "{}": no policy
  std::string trainer;
  std::string head_recipe_json;
  std::string base_recipe_json;  // the recipe the campaign was created with (ablations)
  std::string name;
  std::string budget_json;  // campaigns.budget_json (daemon/api/budget_contract.h)
};

// A round every experiment of which is terminal, still open, in a campaign with a policy.
struct RoundToDecide {
  int64_t round_id = 0;
  int64_t campaign_id = 0;
  std::string policy_json;
  std::string head_config_hash;
  std::string kind = "candidates";  // rounds.kind
  std::string keep_rule = "best";   // rounds.keep_rule
};

// One experiment as the decision sees it.
struct RoundRun {
  int64_t experiment_id = 0;
  int64_t recipe_id = 0;
  int64_t reused_from_id = 0;
  std::string name;
  std::string role;  // candidate | control
  std::string state;
  std::string config_hash;
  std::string device_name;
  int candidate_index = 0;
  int replicate = 0;
  bool has_val_bpb = false;  // a result row with a non-NULL val_bpb (NaN is stored as NULL)
  double val_bpb = 0;
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
  std::map<std::string, std::pair<std::string, std::string>> candidates;
};

// A stored plan (migrations/0003_plans.sql).
struct StoredPlan {
  int64_t id = 0;
  int64_t campaign_id = 0;
  std::string campaign;
  std::string name;
  std::string yaml;
  std::string state;  // running | paused | done | failed | cancelled
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
  std::string state;  // open | decided | cancelled
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
struct AppliedEvents {
  std::vector<xv::v1::EventAck> acks;  // one per (experiment, attempt) touched
  int duplicates = 0;                  // events already stored before (ignored)
  int rejected = 0;                    // events for attempts this worker does not hold
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
  std::string state;   // kReclaimed: the experiment's state now (assigned or running)
};

class ExperimentStore {
 public:
  // Opens (creating) the database at `path` read-write, checks its integrity and applies the
  // embedded migrations. Fails when the file is corrupt or newer than this binary.
  static Status Open(const std::string& path, std::unique_ptr<ExperimentStore>* out);
  // Opens an existing database read-only. Fails when it does not exist, or has no/a newer schema.
  static Status OpenReadOnly(const std::string& path, std::unique_ptr<ExperimentStore>* out);

  bool read_only() const { return read_only_; }
  int schema_version() const { return schema_version_; }
  const std::string& path() const { return path_; }

  // PRAGMA integrity_check; *result is "ok" for a sound file.
  Status IntegrityCheck(std::string* result);

  // ---- Submissions and queries ----
  // Stores the campaign (created on first use), a round, the recipes (deduplicated by hash) and
  // every experiment, plus an audit event, in two steps so that a large submission does not hold
  // the store: the recipes in transactions of a few hundred rows with mu_ released in between,
  // then everything that refers to them in one transaction. Readers see all of the submission or
  // none of it. On failure nothing of it remains (the recipes it added are deleted again); a crash
  // between the steps leaves only unreferenced, content-addressed recipe rows. One submission at a
  // time (submissions_mu_).
  Status InsertSubmission(const NewSubmission& sub, SubmissionIds* ids);
  // Filters of `req` as documented in experiments.proto; ordered by id.
  Status ListExperiments(const xv::v1::ListExperimentsRequest& req,
                         std::vector<xv::v1::Experiment>* out);
  // NotFound when no experiment has this id.
  Status GetExperiment(int64_t id, xv::v1::Experiment* out);
  // Experiments per state ("queued" -> 3, ...).
  Status CountByState(std::map<std::string, int64_t>* out);
  // Queued experiments per trainer ("libtorch" -> 3, ...; an empty trainer counts as "libtorch"):
  // one GROUP BY over the queue, for the status line about trainers no connected worker offers.
  Status CountQueuedByTrainer(std::map<std::string, int64_t>* out);
  // Every worker ever registered, with its current experiment (0 when none).
  Status ListWorkers(std::vector<xv::v1::WorkerInfo>* out);

  // ---- Scheduling ----
  // Queued experiments, highest priority first, then oldest first.
  Status ListQueued(std::vector<QueuedExperiment>* out);
  // Attempts in state assigned or running.
  Status ListActive(std::vector<ActiveAttempt>* out);
  // How many attempts each worker ran of each candidate of the rounds that still have queued work.
  Status CountCandidateAttempts(std::vector<CandidateWorkerCount>* out);
  // queued -> assigned: attempt + 1, an attempts row, the spec to send. FailedPrecondition when the
  // experiment is no longer queued (cancelled meanwhile).
  Status AssignExperiment(int64_t experiment_id, int64_t worker_id, xv::v1::ExperimentSpec* spec);
  // An attempt lost its worker (no contact within the lease). max_attempts <= 0: the campaign's
  // own limit (campaigns.max_attempts, default 2). When attempt < max_attempts the
  // experiment goes back to the queue (*requeued = true), else it ends in state lost. No-op (ok,
  // *requeued = false) when the attempt is no longer the active one.
  Status MarkAttemptLost(int64_t experiment_id, int attempt, const std::string& detail,
                         int max_attempts, bool* requeued);
  // Cancels a queued experiment at once, or an assigned/running one (then *worker_id is the worker
  // to tell, with *attempt). *state receives the state after the call; terminal experiments are
  // unchanged.
  Status CancelExperiment(int64_t experiment_id, std::string* state, int64_t* worker_id,
                          int* attempt);

  // ---- Workers ----
  // Creates or updates the worker row named reg.worker_name(); state becomes idle.
  Status UpsertWorker(const xv::v1::Register& reg, int64_t* worker_id);
  // state: idle | busy | draining | offline. Also stamps last_heartbeat.
  Status SetWorkerState(int64_t worker_id, const std::string& state);
  // Stamps last_heartbeat only.
  Status TouchWorker(int64_t worker_id);
  // At daemon start no worker is connected yet: every worker row becomes offline.
  Status MarkAllWorkersOffline();

  // ---- Trainer events ----
  // Applies a batch of events from `worker_id` in one transaction: each new (experiment, attempt,
  // seq) is stored once and interpreted (start -> running + device, step -> metrics + progress, nan
  // -> nan_events, summary -> results, error -> failure kind/detail); repeats are counted and
  // ignored. A step or summary with an implausible figure is stored but not interpreted, and marks
  // its attempt (failure kind implausible_result, the field in the detail) for FinishAttempt.
  Status ApplyTrainerEvents(int64_t worker_id, const std::vector<xv::v1::TrainerEvent>& events,
                            AppliedEvents* applied);
  // The trainer of an attempt exited: stores the attempt's outcome and moves the experiment to its
  // terminal state (when the attempt is still the active one). *ack acknowledges it. Only an
  // attempt still live (assigned, running, or lost) changes: a Finished for one that already
  // ended is recorded as a finished_ignored event and changes nothing. An attempt whose trainer
  // reported implausible figures (ApplyTrainerEvents; daemon/sched/result_plausibility.h) ends
  // invalid (failure kind implausible_result) whatever it reports, unless cancelled, and so does
  // a success whose summary has no val_bpb.
  Status FinishAttempt(int64_t worker_id, const xv::v1::Finished& finished, xv::v1::EventAck* ack);
  // Highest seq such that every event 1..seq of the attempt is stored (0 when none).
  Status HighestContiguousSeq(int64_t experiment_id, int attempt, int64_t* seq);
  // Does the attempts table say `worker_id` holds this attempt and it is still active?
  Status IsActiveAttemptOf(int64_t worker_id, int64_t experiment_id, int attempt, bool* active);
  // A worker reports (Register or Heartbeat) that it still runs this attempt, its trainer not
  // finished. One transaction decides (attempt_reclaim_store.cc), so that it is atomic with
  // assignment, cancellation and the round decision:
  //  - kActive when it is this worker's active attempt;
  //  - kReclaimed when the attempt was this worker's, was marked lost, and the experiment is still
  //    queued at that attempt number (its requeue not assigned to anyone) in an open round: the
  //    attempt and the experiment become active again on this worker (assigned, or running once
  //    the trainer's start event is stored), with the same attempt number, progress from its last
  //    stored step, and a 'reclaimed' daemon event. The loss costs no attempt: the requeue that
  //    would have counted was never assigned (max_attempts counts assigned attempts);
  //  - kRefused otherwise (the requeue was assigned, the experiment cancelled or ended, the round
  //    decided or cancelled, the attempt finished or never this worker's), *reason saying which.
  Status ReclaimLostAttempt(int64_t worker_id, int64_t experiment_id, int attempt,
                            ReclaimDecision* decision);

  // ---- Campaigns, rounds and decisions (campaign_store.cc) ----
  // Creates a campaign and its first head_history row. AlreadyExists when the name is taken.
  Status CreateCampaign(const NewCampaign& c, int64_t* id);
  // By id, or by name when id is 0. NotFound names what was asked. With `detail`, fills rounds
  // and head_history too.
  Status GetCampaign(int64_t id, const std::string& name, bool detail, xv::v1::Campaign* out);
  Status ListCampaigns(std::vector<xv::v1::Campaign>* out);
  // state: active | paused. NotFound as GetCampaign.
  Status SetCampaignState(int64_t id, const std::string& name, const std::string& state);
  // *found = false when no campaign has this name.
  Status FindCampaignHead(const std::string& name, bool* found, CampaignHead* out);
  // Open rounds of campaigns with a policy whose experiments are all terminal.
  Status ListRoundsToDecide(std::vector<RoundToDecide>* out);
  // The round's campaign id, policy, state and the number of unfinished experiments.
  Status GetRoundState(int64_t round_id, RoundToDecide* round, std::string* state, int* unfinished);
  // Every experiment of the round.
  Status ListRoundRuns(int64_t round_id, std::vector<RoundRun>* out);
  // Finished (succeeded or diverged) runs of `config_hash` in the campaign outside `round_id`,
  // originals only (not reuse rows), for pooling earlier head runs.
  Status ListEarlierConfigRuns(int64_t campaign_id, const std::string& config_hash,
                               int64_t round_id, std::vector<RoundRun>* out);
  // Stores the decision when the round is still open (FailedPrecondition otherwise): the round
  // becomes decided, candidate experiments get decision/decision_reason, and when a candidate is
  // kept the campaign head becomes its recipe with a head_history row.
  Status StoreRoundDecision(const RoundDecisionRecord& record);
  // Per knob value of the overrides: runs ending diverged, failed/invalid/lost, timed_out, and
  // the NaN rate. campaign_id 0 and name "" = every campaign.
  Status FailureSummary(int64_t campaign_id, const std::string& name,
                        std::vector<xv::v1::KnobFailure>* out);

  // The largest seed of any experiment of the campaign (*any = false when it has none), so that
  // confirm rounds can run fresh seeds.
  Status MaxCampaignSeed(int64_t campaign_id, bool* any, int64_t* max_seed);

  // ---- Plans (plan_store.cc) ----
  // Stores a new plan (state running, phase 0) of an existing campaign; *id receives its id.
  Status InsertPlan(const StoredPlan& plan, int64_t* id);
  // By id, or the newest plan of that name when id is 0. NotFound names what was asked.
  Status GetPlan(int64_t id, const std::string& name, StoredPlan* out);
  // Every plan (state "" = all), oldest first.
  Status ListPlans(const std::string& state, std::vector<StoredPlan>* out);
  // The rounds built for the plan, by phase.
  Status ListPlanRounds(int64_t plan_id, std::vector<PlanRound>* out);
  // Records progress when the plan is still in `expected_state` (*updated = false otherwise, e.g.
  // cancelled meanwhile): state, current phase, outcomes and reason in one write.
  Status UpdatePlan(int64_t plan_id, const std::string& expected_state, const std::string& state,
                    int current_phase, const std::string& outcomes_json, const std::string& reason,
                    bool* updated);

  // ---- Event log, WAL upkeep and write faults (event_log_store.cc) ----
  // Events with after_id < id (and id <= up_to_id unless it is 0), oldest first, at most `limit`.
  Status ListEventsAfter(int64_t after_id, int64_t up_to_id, int limit,
                         std::vector<StoredEvent>* out);
  // The newest event id (0 when there is none).
  Status MaxEventId(int64_t* id);
  // True when the campaign (0 = every campaign) has no experiment queued, assigned or running and
  // no open round that the daemon decides automatically once its experiments are terminal.
  Status ScopeIdle(int64_t campaign_id, bool* idle);
  // After every commit `on_commit` runs on the writing thread (it must only signal); the WAL is
  // checkpointed (PASSIVE) whenever it reaches `checkpoint_pages` pages. Call once, before use.
  void SetCommitListener(std::function<void()> on_commit, int checkpoint_pages = 1000);
  // Periodic WAL upkeep, called often (e.g. every scheduling tick): a PASSIVE checkpoint when
  // `interval` passed since the last one, a TRUNCATE one once nothing was committed for `idle`.
  Status MaintainWal(std::chrono::milliseconds interval, std::chrono::milliseconds idle);
  // Checkpoints now; see SqliteConnection::CheckpointWal.
  Status CheckpointWal(bool truncate, int* wal_pages, int* checkpointed);
  // "" while the database takes writes; else the cause of the last failed write (disk full,
  // read-only file, I/O error). While set, new work (submissions, campaigns, assignments) is
  // refused with FailedPrecondition naming the cause and the path; reads keep working.
  std::string WriteFault();
  // While a write fault is set: tries one small write (a 'writable' daemon event); when it commits
  // the fault is cleared and *writable = true.
  Status RetryWrites(bool* writable);

  // Appends an audit/daemon event (not a trainer event).
  Status AppendAudit(const std::string& type, const std::string& json);

 private:
  ExperimentStore(std::unique_ptr<SqliteConnection> conn, bool read_only, int version);
  Status CheckWritable() const;
  // InsertSubmission's two steps; *added_recipes receives the recipe rows committed by step 1.
  Status InsertSubmissionSteps(const NewSubmission& sub, SubmissionIds* ids,
                               std::vector<int64_t>* added_recipes);
  Status HighestContiguousSeqLocked(int64_t experiment_id, int attempt, int64_t* seq);
  Status ApplyOneEventLocked(const xv::v1::TrainerEvent& ev, bool* duplicate);

  // Taken (before mu_) for the whole of InsertSubmission: no other submission can start to use a
  // recipe row that a failing one deletes again.
  std::mutex submissions_mu_;
  std::mutex mu_;
  std::unique_ptr<SqliteConnection> conn_;  // guarded by mu_
  const bool read_only_;
  const int schema_version_;
  const std::string path_;
  // New work (submissions, campaigns, assignments) is refused while the connection has a write
  // fault. Call with mu_ held.
  Status CheckAcceptsNewWorkLocked() const;
  std::atomic<int64_t> last_commit_ms_{0};      // steady clock, set by the commit listener
  std::atomic<int64_t> last_checkpoint_ms_{0};  // steady clock of the last periodic checkpoint
  std::atomic<bool> truncated_since_commit_{true};
};

}  // namespace xv::store
