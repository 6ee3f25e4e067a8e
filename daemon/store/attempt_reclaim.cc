// AttemptLedger: reclaiming a lost attempt whose worker came back with its trainer still running
// (docs/reliability.md § Reclaiming a lost attempt). See ReclaimLostAttempt in attempt_ledger.h.
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "daemon/store/attempt_ledger.h"
#include "daemon/store/event_log.h"

namespace xv::store {

Status AttemptLedger::ReclaimLostAttempt(int64_t worker_id, int64_t experiment_id, int attempt,
                                         ReclaimDecision* decision) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  using Outcome = ReclaimDecision::Outcome;
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  ReclaimDecision result;
  const std::string what =
      "experiment " + std::to_string(experiment_id) + " attempt " + std::to_string(attempt);
  XV_RETURN_IF_ERROR(InWriteTransaction(c, [&]() -> Status {
    auto refuse = [&](const std::string& reason) {
      result.outcome = Outcome::kRefused;
      result.reason = reason;
      return Status::Ok();
    };
    SqliteStatement at;
    XV_RETURN_IF_ERROR(c->Prepare(
        "SELECT a.state, a.failure_detail, w.name FROM attempts a JOIN workers w ON w.id = "
        "a.worker_id WHERE a.experiment_id = ? AND a.attempt = ? AND a.worker_id = ?",
        &at));
    at.Bind(1, experiment_id).Bind(2, attempt).Bind(3, worker_id);
    bool row = false;
    XV_RETURN_IF_ERROR(at.Step(&row));
    if (!row) return refuse(what + " was never assigned to this worker");
    const std::string attempt_state = at.ColumnText(0);
    const std::string lost_detail = at.ColumnText(1);
    const std::string worker_name = at.ColumnText(2);

    SqliteStatement ex;
    XV_RETURN_IF_ERROR(c->Prepare(
        "SELECT x.state, x.attempt, COALESCE(x.worker_id, 0), COALESCE(w.name, ''), "
        "COALESCE(r.state, 'open'), x.round_id FROM experiments x "
        "LEFT JOIN workers w ON w.id = x.worker_id LEFT JOIN rounds r ON r.id = x.round_id "
        "WHERE x.id = ?",
        &ex));
    ex.Bind(1, experiment_id);
    XV_RETURN_IF_ERROR(ex.Step(&row));
    if (!row) return refuse("experiment " + std::to_string(experiment_id) + " does not exist");
    const std::string state = ex.ColumnText(0);
    const int current_attempt = static_cast<int>(ex.ColumnInt(1));
    const int64_t current_worker = ex.ColumnInt(2);
    const std::string current_worker_name = ex.ColumnText(3);
    const std::string round_state = ex.ColumnText(4);
    const int64_t round_id = ex.ColumnInt(5);

    if (current_attempt == attempt && current_worker == worker_id &&
        (state == "assigned" || state == "running")) {
      result.outcome = Outcome::kActive;
      return Status::Ok();
    }
    if (attempt_state != "lost") return refuse(what + " already ended " + attempt_state);
    if (state == "cancelled") return refuse("experiment was cancelled");
    if (current_attempt != attempt) {
      // The requeue was assigned (to another worker, or back to this one) before it came back.
      return refuse("its requeue was assigned first: attempt " + std::to_string(current_attempt) +
                    (current_worker_name.empty() ? "" : " on worker " + current_worker_name) +
                    " (" + state + ")");
    }
    if (state != "queued") return refuse("experiment is " + state);
    if (round_state != "open") {
      return refuse("round " + std::to_string(round_id) + " is " + round_state);
    }

    // Reclaim: the trainer never stopped, so the attempt goes on where its events left it.
    SqliteStatement started;
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT 1 FROM events WHERE source = 'trainer' AND experiment_id = ? AND "
                   "attempt = ? AND type = 'start'",
                   &started));
    started.Bind(1, experiment_id).Bind(2, attempt);
    XV_RETURN_IF_ERROR(started.Step(&row));
    const std::string new_state = row ? "running" : "assigned";
    SqliteStatement up_attempt;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE attempts SET state = ?, failure_kind = '', failure_detail = '', "
                   "finished_at = NULL WHERE experiment_id = ? AND attempt = ?",
                   &up_attempt));
    up_attempt.Bind(1, new_state).Bind(2, experiment_id).Bind(3, attempt);
    XV_RETURN_IF_ERROR(up_attempt.Run());
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE experiments SET state = ?1, worker_id = ?2, failure_kind = '', "
        "failure_detail = '', progress = COALESCE((SELECT progress FROM metrics WHERE "
        "experiment_id = ?3 AND attempt = ?4 AND progress IS NOT NULL ORDER BY step DESC "
        "LIMIT 1), 0) WHERE id = ?3 AND state = 'queued' AND attempt = ?4",
        &up));
    up.Bind(1, new_state).Bind(2, worker_id).Bind(3, experiment_id).Bind(4, attempt);
    XV_RETURN_IF_ERROR(up.Run());
    if (c->Changes() != 1) return Status::Internal(what + ": reclaim changed no experiment row");
    SqliteStatement ws;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE workers SET state = 'busy' WHERE id = ? AND state = 'idle'", &ws));
    ws.Bind(1, worker_id);
    XV_RETURN_IF_ERROR(ws.Run());
    result.outcome = Outcome::kReclaimed;
    result.state = new_state;
    result.reason = "worker " + worker_name +
                    " came back with its trainer still running; the queued requeue is withdrawn";
    const nlohmann::json ev = {{"state", new_state},
                               {"worker_id", worker_id},
                               {"worker", worker_name},
                               {"detail", result.reason},
                               {"lost_detail", lost_detail}};
    return InsertDaemonEvent(c, experiment_id, attempt, "reclaimed", DumpJsonLossless(ev));
  }));
  *decision = std::move(result);
  return Status::Ok();
}

}  // namespace xv::store
