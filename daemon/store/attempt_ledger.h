// AttemptLedger: the life of attempts, the one place experiments change state after submission.
// Experiment state machine: queued -> assigned -> running -> {succeeded, diverged, failed, invalid,
// cancelled, timed_out, lost}. An attempt that loses its worker may be requeued (attempt + 1).
// Trainer events are applied exactly once per (experiment_id, attempt, seq).
// Threading contract: as Database; each write is one BEGIN IMMEDIATE transaction with its mutex
// held, so that it is atomic with the other writes of the daemon.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/flat_json_object.h"
#include "common/status.h"
#include "daemon/sched/result_plausibility.h"
#include "daemon/store/database.h"
#include "daemon/store/store_rows.h"
#include "xv/v1/experiments.pb.h"
#include "xv/v1/workers.pb.h"

namespace xv::store {

// What the store's fast path reads of one trainer event: the figures of a flat step event
// (common/flat_json_object.h) whose figures are plausible; empty for any other event, which the
// transaction reads in full.
using StepEventFigures = std::optional<sched::StepFigures>;

// Reads `ev` as a transaction of ApplyTrainerEventBatches would, so that a caller with threads to
// spare reads events before they reach the one thread that stores them (the JSON reading was about
// a sixth of that thread's time). Pure, safe on any thread; `scratch` is only reused between
// calls to keep its allocation.
StepEventFigures ReadStepEventAhead(const xv::v1::TrainerEvent& ev, FlatJsonObject* scratch);

// Trainer events of one worker as they reached the daemon together (one message), for
// WorkerEvents.
struct TrainerEventChunk {
  const std::vector<xv::v1::TrainerEvent>* events = nullptr;  // not owned; null: none
  // ReadStepEventAhead of each of *events, in their order (not owned); null: the transaction
  // reads them. Of another size than *events: the batch is refused (InvalidArgument).
  const std::vector<StepEventFigures>* read_ahead = nullptr;
};

// One worker's trainer events, in the order it sent them (chunks in order, each in its order:
// the daemon's writer passes what it queued without copying it into one vector), and the Finished
// reports it sent with or after them, for ApplyTrainerEventBatches.
struct WorkerEvents {
  WorkerEvents() = default;
  // The events as one chunk, without a read-ahead.
  WorkerEvents(int64_t worker, const std::vector<xv::v1::TrainerEvent>* events,
               const std::vector<xv::v1::Finished>* finished = nullptr)
      : worker_id(worker), chunks{TrainerEventChunk{events, nullptr}}, finished(finished) {}
  WorkerEvents(int64_t worker, std::vector<TrainerEventChunk> chunks,
               const std::vector<xv::v1::Finished>* finished = nullptr)
      : worker_id(worker), chunks(std::move(chunks)), finished(finished) {}

  int64_t worker_id = 0;
  std::vector<TrainerEventChunk> chunks;
  const std::vector<xv::v1::Finished>* finished = nullptr;  // not owned; may be null
};

// What an attempt's step events of one transaction leave in its experiment row (progress and
// last loss: the last figure given of each), written once per attempt instead of once per event.
struct PendingStepUpdate {
  std::optional<double> progress;
  std::optional<double> loss;
  // The latest_metrics row of the attempt (migration 14): the highest step's figures of this
  // transaction and how many metrics rows it stored; upserted once with the update above.
  struct LatestStep {
    int64_t step = 0;
    std::optional<double> loss, lrm, dt_ms, tok_per_sec, mfu_percent, progress;
  };
  std::optional<LatestStep> latest;
  int64_t rows = 0;
};

// A plausible step event waiting in a transaction of ApplyTrainerEventBatches to be stored, and
// its figures.
struct StepEventToStore {
  const xv::v1::TrainerEvent* ev = nullptr;  // an element of the batch being applied
  sched::StepFigures fig;
};

class AttemptLedger {
 public:
  explicit AttemptLedger(Database* db) : db_(db) {}

  // queued -> assigned: attempt + 1, an attempts row, the spec to send. FailedPrecondition when the
  // experiment is no longer queued (cancelled meanwhile).
  Status AssignExperiment(int64_t experiment_id, int64_t worker_id, xv::v1::ExperimentSpec* spec);
  struct Assignment {
    int64_t experiment_id = 0;
    int64_t worker_id = 0;
  };
  // A dispatcher pass's assignments in ONE transaction, each as AssignExperiment would make it:
  // (*results)[i] answers assignments[i], Ok with (*specs)[i] set, or NotFound /
  // FailedPrecondition (the experiment is gone or no longer queued; nothing of it is written).
  // Any other error rolls back all of them and is returned.
  Status AssignExperiments(const std::vector<Assignment>& assignments,
                           std::vector<xv::v1::ExperimentSpec>* specs,
                           std::vector<Status>* results);
  // An attempt lost its worker (no contact within the lease). max_attempts <= 0: the campaign's
  // own limit (campaigns.max_attempts, default 2). When attempt < max_attempts the
  // experiment goes back to the queue (*requeued = true), else it ends in state lost. No-op (ok,
  // *requeued = false) when the attempt is no longer the active one.
  Status MarkAttemptLost(int64_t experiment_id, int attempt, const std::string& detail,
                         int max_attempts, bool* requeued);
  // Cancels a queued experiment at once, or an assigned/running one (then *worker_id is the worker
  // to tell, with *attempt). *state receives the state after the call; terminal experiments are
  // unchanged.
  Status CancelExperiment(int64_t experiment_id, ExperimentState* state, int64_t* worker_id,
                          int* attempt);
  // Applies a batch of events from `worker_id` in one transaction: each new (experiment, attempt,
  // seq) is stored once and interpreted (start -> running + device, step -> metrics + progress, nan
  // -> nan_events, summary -> results, error -> failure kind/detail); repeats are counted and
  // ignored. A step or summary with an implausible figure is stored but not interpreted, and marks
  // its attempt (failure kind implausible_result, the field in the detail) for FinishAttempt.
  Status ApplyTrainerEvents(int64_t worker_id, const std::vector<xv::v1::TrainerEvent>& events,
                            AppliedEvents* applied);
  // Group commit: the events of several workers in ONE transaction (one fsync), each batch
  // applied as ApplyTrainerEvents would, then each batch's Finished reports as FinishAttempt
  // would (a Finished for an attempt its worker never held changes nothing and is answered in
  // (*applied)[i].finished with not_held set); (*applied)[i] answers batches[i]. An error rolls
  // back all of them (the caller may then retry the batches one by one to find the one at fault).
  // Consecutive step events of an attempt update its experiment row once, with their last
  // figures, as applying them one by one would leave it.
  Status ApplyTrainerEventBatches(const std::vector<WorkerEvents>& batches,
                                  std::vector<AppliedEvents>* applied);
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
  // finished. One transaction decides (attempt_reclaim.cc), so that it is atomic with
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

 private:
  // HighestContiguousSeq. `stored_now` (may be null; sorted here): seqs of the attempt that the
  // caller's transaction stored or found stored, which extend the committed hint without a search.
  Status HighestContiguousSeqLocked(int64_t experiment_id, int attempt, int64_t* seq,
                                    std::vector<int64_t>* stored_now = nullptr)
      EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  using PendingStepUpdates = std::map<std::pair<int64_t, int>, PendingStepUpdate>;
  // One transaction of ApplyTrainerEventBatches: the step updates not yet written, and when its
  // events are stored (the created_at of their rows: one reading of the clock per transaction).
  struct TrainerEventTransaction {
    PendingStepUpdates pending;
    std::string stored_at;
    FlatJsonObject flat;  // scratch of ApplyOneEventLocked, reused so its members stay allocated
    // Plausible step events of the worker batch being applied, not stored yet: they go in by
    // multi-row INSERTs (StoreBufferedStepEventsLocked), at most 64 at a time.
    std::vector<StepEventToStore> buffered_steps;
    // The inserts of events, one per row count of attempt_events.cc's kRowsPerEventInsert (64,
    // 16, 4, 1), prepared once per transaction; the last, one row, also stores every event that
    // is not buffered.
    std::array<SqliteStatement, 4> insert_events;
    SqliteStatement find_stored_seq;  // StoreBufferedStepEventsLocked's check for repeats
  };
  // One worker's batch inside the transaction of ApplyTrainerEventBatches.
  Status ApplyWorkerEventsLocked(const WorkerEvents& batch, TrainerEventTransaction* tx,
                                 AppliedEvents* out) EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // Stores and interprets one event of the batch, or buffers it (a plausible flat step event);
  // *duplicates counts the events found stored before. `read_ahead`: ReadStepEventAhead(ev), or
  // null (then read here).
  Status ApplyOneEventLocked(const xv::v1::TrainerEvent& ev, const StepEventFigures* read_ahead,
                             TrainerEventTransaction* tx, int* duplicates)
      EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // Stores tx->buffered_steps in their order, as storing them one by one would (each once; a
  // repeat is counted in *duplicates and changes nothing), and notes their figures in
  // tx->pending. Runs of one attempt with rising seqs, none stored before, go in by multi-row
  // INSERTs; any other row goes in alone.
  Status StoreBufferedStepEventsLocked(TrainerEventTransaction* tx, int* duplicates)
      EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // Writes the pending step update of (experiment, attempt), or of every attempt when key is null.
  Status WritePendingStepUpdatesLocked(PendingStepUpdates* pending,
                                       const std::pair<int64_t, int>* key)
      EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // AssignExperiment inside the caller's transaction. NotFound / FailedPrecondition before any
  // write.
  Status AssignExperimentLocked(int64_t experiment_id, int64_t worker_id,
                                xv::v1::ExperimentSpec* spec) EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // FinishAttempt inside the caller's transaction. FailedPrecondition (before any write) when
  // the worker never held the attempt.
  Status FinishAttemptLocked(int64_t worker_id, const xv::v1::Finished& f, xv::v1::EventAck* ack)
      EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // Ends the worker's resending of a Finished: the worker goes idle, *ack carries the attempt's
  // contiguous seq with finished set.
  Status AcknowledgeFinishedLocked(int64_t worker_id, int64_t experiment_id, int attempt,
                                   xv::v1::EventAck* ack) EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // Remembers a committed contiguous seq of (experiment, attempt) as the next search's start.
  void NoteContiguousSeqLocked(int64_t experiment_id, int attempt, int64_t seq)
      EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  Database* db_;
  // (experiment, attempt) -> a seq up to which its events are stored without a gap, as of the
  // last commit that stored some: HighestContiguousSeqLocked searches from there instead of from
  // seq 1, so acknowledging a batch costs the batch, not the run so far. Only committed values
  // enter (events are never deleted, so a value stays true); at most kMaxSeqHints entries (then
  // cleared: a missing entry only means a search from seq 1).
  static constexpr size_t kMaxSeqHints = 4096;
  std::map<std::pair<int64_t, int>, int64_t> contiguous_seq_ GUARDED_BY(db_->mu());
};

}  // namespace xv::store
