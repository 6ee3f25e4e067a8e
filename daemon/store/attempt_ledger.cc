// AttemptLedger: assignment, loss, cancellation and the contiguous event sequence of attempts.
// Trainer events: attempt_events.cc; Finished: attempt_finish.cc; reclaiming: attempt_reclaim.cc.
#include "daemon/store/attempt_ledger.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/run_states.h"
#include "daemon/store/event_log.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

using nlohmann::json;

}  // namespace

Status AttemptLedger::AssignExperiment(int64_t experiment_id, int64_t worker_id,
                                       xv::v1::ExperimentSpec* spec) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  XV_RETURN_IF_ERROR(db_->CheckAcceptsNewWorkLocked());
  return InWriteTransaction(db_->conn(), [&]() -> Status {
    db_->mu()->AssertHeld();  // the lambda runs inside this function, under `lock`
    return AssignExperimentLocked(experiment_id, worker_id, spec);
  });
}

Status AttemptLedger::AssignExperiments(const std::vector<Assignment>& assignments,
                                        std::vector<xv::v1::ExperimentSpec>* specs,
                                        std::vector<Status>* results) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  XV_RETURN_IF_ERROR(db_->CheckAcceptsNewWorkLocked());
  std::vector<xv::v1::ExperimentSpec> out_specs(assignments.size());
  std::vector<Status> out(assignments.size());
  XV_RETURN_IF_ERROR(InWriteTransaction(db_->conn(), [&]() -> Status {
    db_->mu()->AssertHeld();  // the lambda runs inside this function, under `lock`
    for (size_t i = 0; i < assignments.size(); ++i) {
      out[i] = AssignExperimentLocked(assignments[i].experiment_id, assignments[i].worker_id,
                                      &out_specs[i]);
      // Refusals come before any write of that assignment: the others go on.
      const Status::Code code = out[i].code();
      if (!out[i].ok() && code != Status::Code::kNotFound &&
          code != Status::Code::kFailedPrecondition) {
        return out[i];
      }
    }
    return Status::Ok();
  }));
  *specs = std::move(out_specs);
  *results = std::move(out);
  return Status::Ok();
}

Status AttemptLedger::AssignExperimentLocked(int64_t experiment_id, int64_t worker_id,
                                             xv::v1::ExperimentSpec* spec) {
  SqliteConnection* c = db_->conn();
  SqliteStatement sel;
  XV_RETURN_IF_ERROR(c->Prepare(
      "SELECT e.state, e.attempt, e.trainer, r.recipe_json, r.hash, e.seed, e.time_budget_s, "
      "e.hard_deadline_s, e.campaign_id, e.round_id, COALESCE(s.sha256, ''), "
      "COALESCE(s.text, '') FROM experiments e JOIN recipes r ON r.id = e.recipe_id "
      "LEFT JOIN sources s ON s.id = r.source_id WHERE e.id = ?",
      &sel));
  sel.Bind(1, experiment_id);
  bool row = false;
  XV_RETURN_IF_ERROR(sel.Step(&row));
  if (!row) return Status::NotFound("experiment " + std::to_string(experiment_id));
  ExperimentState state = ExperimentState::kQueued;
  XV_RETURN_IF_ERROR(ColumnEnum(sel, 0, ParseExperimentState, "experiments.state", &state));
  if (state != ExperimentState::kQueued) {
    return Status::FailedPrecondition("experiment " + std::to_string(experiment_id) + " is " +
                                      sel.ColumnText(0) + ", not queued");
  }
  const int attempt = static_cast<int>(sel.ColumnInt(1)) + 1;
  spec->set_experiment_id(experiment_id);
  spec->set_attempt(attempt);
  spec->set_trainer(sel.ColumnText(2));
  spec->set_recipe_json(sel.ColumnText(3));
  spec->set_recipe_hash(sel.ColumnText(4));
  spec->set_seed(sel.ColumnInt(5));
  spec->set_time_budget_s(sel.ColumnDouble(6));
  spec->set_hard_deadline_s(sel.ColumnDouble(7));
  spec->set_campaign_id(sel.ColumnInt(8));
  spec->set_round_id(sel.ColumnInt(9));
  // A code candidate (issue 16): the worker runs this text instead of its configured file.
  spec->set_source_sha256(sel.ColumnText(10));
  spec->set_source_text(sel.ColumnText(11));
  SqliteStatement up;
  XV_RETURN_IF_ERROR(c->Prepare(
      "UPDATE experiments SET state = 'assigned', attempt = ?, worker_id = ?, progress = 0, "
      "last_loss = NULL, failure_kind = '', failure_detail = '', assigned_at = " XV_NOW
      " WHERE id = ?",
      &up));
  up.Bind(1, attempt).Bind(2, worker_id).Bind(3, experiment_id);
  XV_RETURN_IF_ERROR(up.Run());
  SqliteStatement ins;
  XV_RETURN_IF_ERROR(
      c->Prepare("INSERT INTO attempts(experiment_id, attempt, worker_id, state) VALUES (?, ?, "
                 "?, 'assigned')",
                 &ins));
  ins.Bind(1, experiment_id).Bind(2, attempt).Bind(3, worker_id);
  XV_RETURN_IF_ERROR(ins.Run());
  XV_RETURN_IF_ERROR(InsertStateEvent(c, experiment_id, "worker " + std::to_string(worker_id)));
  SqliteStatement ws;
  XV_RETURN_IF_ERROR(c->Prepare("UPDATE workers SET state = 'busy' WHERE id = ?", &ws));
  ws.Bind(1, worker_id);
  return ws.Run();
}

Status AttemptLedger::MarkAttemptLost(int64_t experiment_id, int attempt, const std::string& detail,
                                      int max_attempts, bool* requeued) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  *requeued = false;
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT x.state, x.attempt, c.max_attempts FROM experiments x "
                   "JOIN campaigns c ON c.id = x.campaign_id WHERE x.id = ?",
                   &sel));
    sel.Bind(1, experiment_id);
    bool row = false;
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row) return Status::NotFound("experiment " + std::to_string(experiment_id));
    ExperimentState state = ExperimentState::kQueued;
    XV_RETURN_IF_ERROR(ColumnEnum(sel, 0, ParseExperimentState, "experiments.state", &state));
    if (max_attempts <= 0) max_attempts = static_cast<int>(sel.ColumnInt(2));
    if (sel.ColumnInt(1) != attempt || !IsActive(state)) {
      return Status::Ok();
    }
    SqliteStatement at;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE attempts SET state = 'lost', failure_kind = 'lost', failure_detail = ?, "
                   "finished_at = " XV_NOW " WHERE experiment_id = ? AND attempt = ?",
                   &at));
    at.Bind(1, detail).Bind(2, experiment_id).Bind(3, attempt);
    XV_RETURN_IF_ERROR(at.Run());
    SqliteStatement up;
    if (attempt < max_attempts) {
      *requeued = true;
      XV_RETURN_IF_ERROR(
          c->Prepare("UPDATE experiments SET state = 'queued', worker_id = NULL, progress = 0, "
                     "failure_detail = ? WHERE id = ?",
                     &up));
      up.Bind(1, "attempt " + std::to_string(attempt) + " lost: " + detail).Bind(2, experiment_id);
    } else {
      XV_RETURN_IF_ERROR(c->Prepare(
          "UPDATE experiments SET state = 'lost', failure_kind = 'lost', failure_detail = ?, "
          "finished_at = " XV_NOW " WHERE id = ?",
          &up));
      up.Bind(1, detail).Bind(2, experiment_id);
    }
    XV_RETURN_IF_ERROR(up.Run());
    SqliteStatement ev;
    XV_RETURN_IF_ERROR(
        c->Prepare("INSERT INTO events(source, experiment_id, attempt, type, json) "
                   "VALUES ('daemon', ?, ?, 'lost', ?)",
                   &ev));
    ev.Bind(1, experiment_id)
        .Bind(2, attempt)
        .Bind(3, DumpJsonLossless(json{{"detail", detail}, {"requeued", *requeued}}));
    return ev.Run();
  });
}

Status AttemptLedger::CancelExperiment(int64_t experiment_id, ExperimentState* state,
                                       int64_t* worker_id, int* attempt) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  *worker_id = 0;
  *attempt = 0;
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT state, attempt, worker_id FROM experiments WHERE id = ?", &sel));
    sel.Bind(1, experiment_id);
    bool row = false;
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row)
      return Status::NotFound("experiment " + std::to_string(experiment_id) + " does not exist");
    XV_RETURN_IF_ERROR(ColumnEnum(sel, 0, ParseExperimentState, "experiments.state", state));
    if (IsTerminal(*state)) return Status::Ok();
    if (*state != ExperimentState::kQueued) {
      *attempt = static_cast<int>(sel.ColumnInt(1));
      *worker_id = sel.IsNull(2) ? 0 : sel.ColumnInt(2);
    }
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE experiments SET state = 'cancelled', failure_detail = 'cancelled by request', "
        "finished_at = " XV_NOW " WHERE id = ?",
        &up));
    up.Bind(1, experiment_id);
    XV_RETURN_IF_ERROR(up.Run());
    *state = ExperimentState::kCancelled;
    SqliteStatement ev;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO events(source, experiment_id, type, json) VALUES ('audit', ?, 'cancel', '{}')",
        &ev));
    ev.Bind(1, experiment_id);
    return ev.Run();
  });
}

Status AttemptLedger::HighestContiguousSeqLocked(int64_t experiment_id, int attempt, int64_t* seq,
                                                 std::vector<int64_t>* stored_now) {
  auto hint = contiguous_seq_.find({experiment_id, attempt});
  int64_t from = hint == contiguous_seq_.end() ? 0 : hint->second;
  if (stored_now != nullptr) {  // the seqs right after `from` need no search
    std::sort(stored_now->begin(), stored_now->end());
    for (const int64_t s : *stored_now) {
      if (s > from + 1) break;
      from = std::max(from, s);
    }
  }
  // The first stored seq (from the known contiguous one on) whose successor is missing. Only
  // trainer events have a seq (others leave it null), so the UNIQUE index on (experiment_id,
  // attempt, seq) answers it alone.
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT e.seq FROM events e WHERE e.experiment_id = ?1 AND e.attempt = ?2 AND e.seq >= ?3 "
      "AND NOT EXISTS (SELECT 1 FROM events f WHERE f.experiment_id = ?1 AND f.attempt = ?2 AND "
      "f.seq = e.seq + 1) ORDER BY e.seq LIMIT 1",
      &st));
  st.Bind(1, experiment_id).Bind(2, attempt).Bind(3, from);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (!row) {
    *seq = from;
    return Status::Ok();
  }
  int64_t end = st.ColumnInt(0);
  if (from > 0) {  // 1..from are known to be stored
    *seq = end;
    return Status::Ok();
  }
  // Without a hint the run must start at 1.
  SqliteStatement one;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT 1 FROM events WHERE experiment_id = ? AND attempt = ? AND seq = 1", &one));
  one.Bind(1, experiment_id).Bind(2, attempt);
  XV_RETURN_IF_ERROR(one.Step(&row));
  *seq = row ? end : 0;
  return Status::Ok();
}

void AttemptLedger::NoteContiguousSeqLocked(int64_t experiment_id, int attempt, int64_t seq) {
  if (seq <= 0) return;
  if (contiguous_seq_.size() >= kMaxSeqHints) contiguous_seq_.clear();
  int64_t& known = contiguous_seq_[{experiment_id, attempt}];
  known = std::max(known, seq);
}

Status AttemptLedger::HighestContiguousSeq(int64_t experiment_id, int attempt, int64_t* seq) {
  MutexLock lock(db_->mu());
  return HighestContiguousSeqLocked(experiment_id, attempt, seq);
}

Status AttemptLedger::IsActiveAttemptOf(int64_t worker_id, int64_t experiment_id, int attempt,
                                        bool* active) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT 1 FROM experiments WHERE id = ? AND attempt = ? AND worker_id = ? "
      "AND state IN ('assigned', 'running')",
      &st));
  st.Bind(1, experiment_id).Bind(2, attempt).Bind(3, worker_id);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *active = row;
  return Status::Ok();
}

}  // namespace xv::store
