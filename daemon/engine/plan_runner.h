// PlanRunner: runs stored plans (daemon/sched/plan_spec.h, docs/plans.md). A running plan has a
// current phase; when that phase has no round yet, the runner builds one from the campaign's
// head now, through BuildCampaignRound (the Submit path: validation, reuse of identical configs),
// and stores it linked to (plan, phase). When the phase's round is decided, the runner records
// the phase's outcome (the decision summary, or a failure map's boundary) and moves on; the plan
// is done after the last phase, or earlier when a phase with stop_if: no_keep kept nothing.
//
// Skips and failures: candidates equal to the head (no-ops) are left out; a phase with nothing
// left (or an ablation of a head equal to its base) is skipped with the reason recorded. Any
// other refusal (e.g. a candidate whose batch does not divide on the new head) fails the plan,
// naming the phase.
//
// Restarts: all state is in the store. The round of a phase is looked up by (plan, phase) before
// one is built, and the store refuses a second round for the same phase, so a daemon stopped at
// any point continues where it was without losing or duplicating a phase round.
//
// Pausing: a paused plan is skipped by AdvanceAll/Advance; Resume puts it back to running.
//
// Thread-safety: AdvanceAll/Advance/Pause/Resume may be called from any thread (the dispatcher's
// tick and the Plans service); mu_ serialises them.
#pragma once

#include <cstdint>
#include <string>

#include "common/mutex.h"
#include "common/run_states.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/round_closer.h"
#include "daemon/engine/submission_builder.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon {

class PlanRunner {
 public:
  // `store`, `dispatcher` and `closer` must outlive the runner; dispatcher may be null (tests).
  PlanRunner(store::Store* store, Dispatcher* dispatcher, RoundCloser* closer,
             SubmissionLimits limits);

  // Moves every running plan as far as it can go now.
  Status AdvanceAll();
  // Moves one plan (no-op unless it is running).
  Status Advance(int64_t plan_id);

  // Pause: a running plan becomes paused (stored, so it survives a restart); no phase round
  // starts until Resume, and the round in flight is decided as usual. Resume: a paused plan
  // becomes running and is advanced at once (the next phase starts when the current round was
  // decided meanwhile). Both hold the same lock as Advance, so the phase and outcomes written
  // back are current. FAILED_PRECONDITION "plan 3 (name) is done: ..." when the plan is not
  // running (Pause) or not paused (Resume).
  Status Pause(int64_t plan_id);
  Status Resume(int64_t plan_id);
  // A running or paused plan becomes cancelled, under the same lock (its phase and outcomes stay
  // as the last step left them). FAILED_PRECONDITION "plan 3 (name) has already ended: done"
  // otherwise. The caller cancels the open round's experiments.
  Status Cancel(int64_t plan_id);

  // The API form of a stored plan: its phases with their states, rounds and outcomes.
  Status Describe(const store::StoredPlan& plan, bool with_yaml, xv::v1::Plan* out);

 private:
  struct PlanProgress;  // one AdvanceLocked call's plan, phases, outcomes and current phase

  // The steps of Advance: each phase either waits for its round or moves the plan on
  // (*moved_on).
  Status AdvanceLocked(int64_t plan_id) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status AdvancePhaseLocked(PlanProgress* p, bool* moved_on) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Status FinishPlanLocked(PlanProgress* p) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // No round yet: builds and stores it (or skips or fails the phase).
  Status StartPhaseRoundLocked(PlanProgress* p, bool* moved_on) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The round is open: records its id in the plan when a restart left it out.
  Status AwaitRoundLocked(PlanProgress* p, const store::PlanRound& round)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The round was decided or cancelled: records the phase's outcome and moves on (or stops).
  Status RecordRoundOutcomeLocked(PlanProgress* p, const store::PlanRound& round, bool* moved_on)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the plan's phase and outcomes with `state` while it is still running.
  Status SavePlan(const PlanProgress& p, PlanState state, const std::string& reason, bool* updated);
  // Moves the plan from `from` to `to` (keeping its phase and outcomes) under mu_.
  Status SetStateLocked(int64_t plan_id, PlanState from, PlanState to, const std::string& reason)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);

  store::Store* const store_;
  Dispatcher* const dispatcher_;
  RoundCloser* const closer_;
  const SubmissionLimits limits_;
  Mutex mu_;  // one plan step at a time
};

}  // namespace xv::daemon
