// AttemptLedger: reclaiming a lost attempt whose worker came back with its trainer still running
// (docs/reliability.md § Reclaiming a lost attempt). See ReclaimLostAttempt in attempt_ledger.h.
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/run_states.h"
#include "daemon/store/attempt_ledger.h"
#include "daemon/store/event_log.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

using Outcome = ReclaimDecision::Outcome;

// What the database says about an attempt a worker reports still running.
struct ReclaimFacts {
  bool attempt_held = false;  // an attempts row of this worker
  std::string attempt_state_text;
  ExperimentState attempt_state = ExperimentState::kQueued;
  std::string lost_detail;
  std::string worker_name;
  bool experiment_exists = false;
  ExperimentState state = ExperimentState::kQueued;
  int current_attempt = 0;
  int64_t current_worker = 0;
  std::string current_worker_name;
  RoundState round_state = RoundState::kOpen;
  int64_t round_id = 0;
};

Status ReadReclaimFacts(SqliteConnection* c, int64_t worker_id, int64_t experiment_id, int attempt,
                        ReclaimFacts* f) {
  SqliteStatement at;
  XV_RETURN_IF_ERROR(c->Prepare(
      "SELECT a.state, a.failure_detail, w.name FROM attempts a JOIN workers w ON w.id = "
      "a.worker_id WHERE a.experiment_id = ? AND a.attempt = ? AND a.worker_id = ?",
      &at));
  at.Bind(1, experiment_id).Bind(2, attempt).Bind(3, worker_id);
  XV_RETURN_IF_ERROR(at.Step(&f->attempt_held));
  if (!f->attempt_held) return Status::Ok();
  f->attempt_state_text = at.ColumnText(0);
  XV_RETURN_IF_ERROR(ColumnEnum(at, 0, ParseExperimentState, "attempts.state", &f->attempt_state));
  f->lost_detail = at.ColumnText(1);
  f->worker_name = at.ColumnText(2);

  SqliteStatement ex;
  XV_RETURN_IF_ERROR(c->Prepare(
      "SELECT x.state, x.attempt, COALESCE(x.worker_id, 0), COALESCE(w.name, ''), "
      "COALESCE(r.state, 'open'), x.round_id FROM experiments x "
      "LEFT JOIN workers w ON w.id = x.worker_id LEFT JOIN rounds r ON r.id = x.round_id "
      "WHERE x.id = ?",
      &ex));
  ex.Bind(1, experiment_id);
  XV_RETURN_IF_ERROR(ex.Step(&f->experiment_exists));
  if (!f->experiment_exists) return Status::Ok();
  XV_RETURN_IF_ERROR(ColumnEnum(ex, 0, ParseExperimentState, "experiments.state", &f->state));
  f->current_attempt = static_cast<int>(ex.ColumnInt(1));
  f->current_worker = ex.ColumnInt(2);
  f->current_worker_name = ex.ColumnText(3);
  XV_RETURN_IF_ERROR(ColumnEnum(ex, 4, ParseRoundState, "rounds.state", &f->round_state));
  f->round_id = ex.ColumnInt(5);
  return Status::Ok();
}

// kActive, kRefused (with the reason) or kReclaimed (the reason is filled in when applied).
ReclaimDecision DecideReclaim(const ReclaimFacts& f, int64_t worker_id, int64_t experiment_id,
                              int attempt, const std::string& what) {
  ReclaimDecision d;
  auto refuse = [&](const std::string& reason) {
    d.outcome = Outcome::kRefused;
    d.reason = reason;
    return d;
  };
  if (!f.attempt_held) return refuse(what + " was never assigned to this worker");
  if (!f.experiment_exists) {
    return refuse("experiment " + std::to_string(experiment_id) + " does not exist");
  }
  const std::string state(ToString(f.state));
  if (f.current_attempt == attempt && f.current_worker == worker_id && IsActive(f.state)) {
    d.outcome = Outcome::kActive;
    return d;
  }
  if (f.attempt_state != ExperimentState::kLost) {
    return refuse(what + " already ended " + f.attempt_state_text);
  }
  if (f.state == ExperimentState::kCancelled) return refuse("experiment was cancelled");
  if (f.current_attempt != attempt) {
    // The requeue was assigned (to another worker, or back to this one) before it came back.
    return refuse("its requeue was assigned first: attempt " + std::to_string(f.current_attempt) +
                  (f.current_worker_name.empty() ? "" : " on worker " + f.current_worker_name) +
                  " (" + state + ")");
  }
  if (f.state != ExperimentState::kQueued) return refuse("experiment is " + state);
  if (f.round_state != RoundState::kOpen) {
    return refuse("round " + std::to_string(f.round_id) + " is " +
                  std::string(ToString(f.round_state)));
  }
  d.outcome = Outcome::kReclaimed;
  return d;
}

// Reclaim: the trainer never stopped, so the attempt goes on where its events left it (running
// once its start event is stored, else assigned), on this worker, with a 'reclaimed' event.
Status ApplyReclaim(SqliteConnection* c, int64_t worker_id, int64_t experiment_id, int attempt,
                    const ReclaimFacts& f, const std::string& what, ReclaimDecision* d) {
  SqliteStatement started;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT 1 FROM events WHERE source = 'trainer' AND experiment_id = ? AND "
                 "attempt = ? AND type = 'start'",
                 &started));
  started.Bind(1, experiment_id).Bind(2, attempt);
  bool row = false;
  XV_RETURN_IF_ERROR(started.Step(&row));
  const ExperimentState new_state = row ? ExperimentState::kRunning : ExperimentState::kAssigned;
  const std::string new_state_text(ToString(new_state));
  SqliteStatement up_attempt;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE attempts SET state = ?, failure_kind = '', failure_detail = '', "
                 "finished_at = NULL WHERE experiment_id = ? AND attempt = ?",
                 &up_attempt));
  up_attempt.Bind(1, new_state_text).Bind(2, experiment_id).Bind(3, attempt);
  XV_RETURN_IF_ERROR(up_attempt.Run());
  SqliteStatement up;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE experiments SET state = ?1, worker_id = ?2, failure_kind = '', "
                 "failure_detail = '', progress = COALESCE((SELECT progress FROM metrics WHERE "
                 "experiment_id = ?3 AND attempt = ?4 AND progress IS NOT NULL ORDER BY step DESC "
                 "LIMIT 1), 0) WHERE id = ?3 AND state = 'queued' AND attempt = ?4",
                 &up));
  up.Bind(1, new_state_text).Bind(2, worker_id).Bind(3, experiment_id).Bind(4, attempt);
  XV_RETURN_IF_ERROR(up.Run());
  if (c->Changes() != 1) return Status::Internal(what + ": reclaim changed no experiment row");
  SqliteStatement ws;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE workers SET state = 'busy' WHERE id = ? AND state = 'idle'", &ws));
  ws.Bind(1, worker_id);
  XV_RETURN_IF_ERROR(ws.Run());
  d->state = new_state;
  d->reason = "worker " + f.worker_name +
              " came back with its trainer still running; the queued requeue is withdrawn";
  const nlohmann::json ev = {{"state", new_state_text},
                             {"worker_id", worker_id},
                             {"worker", f.worker_name},
                             {"detail", d->reason},
                             {"lost_detail", f.lost_detail}};
  return InsertDaemonEvent(c, experiment_id, attempt, "reclaimed", DumpJsonLossless(ev));
}

}  // namespace

Status AttemptLedger::ReclaimLostAttempt(int64_t worker_id, int64_t experiment_id, int attempt,
                                         ReclaimDecision* decision) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  ReclaimDecision result;
  const std::string what =
      "experiment " + std::to_string(experiment_id) + " attempt " + std::to_string(attempt);
  XV_RETURN_IF_ERROR(InWriteTransaction(c, [&]() -> Status {
    ReclaimFacts facts;
    XV_RETURN_IF_ERROR(ReadReclaimFacts(c, worker_id, experiment_id, attempt, &facts));
    result = DecideReclaim(facts, worker_id, experiment_id, attempt, what);
    if (result.outcome != Outcome::kReclaimed) return Status::Ok();
    return ApplyReclaim(c, worker_id, experiment_id, attempt, facts, what, &result);
  }));
  *decision = std::move(result);
  return Status::Ok();
}

}  // namespace xv::store
