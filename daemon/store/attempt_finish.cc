// AttemptLedger: a trainer's exit (Finished) ends its attempt. See attempt_ledger.h
// (FinishAttempt).
#include <optional>
#include <string>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "common/run_states.h"
#include "common/untrusted_text.h"
#include "daemon/sched/attempt_outcome.h"
#include "daemon/store/attempt_ledger.h"
#include "daemon/store/event_log.h"
#include "daemon/store/stored_text.h"

namespace xv::store {
namespace {

using nlohmann::json;

// Device health of a finished attempt (migration 5): on the attempt row, and on its result row
// (when the trainer produced a summary) as columns plus the worker's probed matmul FLOP/s.
// Optional figures the worker did not measure stay NULL.
Status StoreAttemptHealth(SqliteConnection* c, int64_t worker_id, const xv::v1::Finished& f) {
  std::string health_json;
  if (f.has_health()) {
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(f.health(), &health_json, opts);
    SqliteStatement at;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE attempts SET health_json = ? WHERE experiment_id = ? AND attempt = ?", &at));
    at.Bind(1, health_json).Bind(2, f.experiment_id()).Bind(3, f.attempt());
    XV_RETURN_IF_ERROR(at.Run());
  }
  const xv::v1::DeviceHealth& h = f.health();
  auto opt = [](bool has, double v) { return has ? std::optional<double>(v) : std::nullopt; };
  SqliteStatement res;
  XV_RETURN_IF_ERROR(c->Prepare(
      "UPDATE results SET measured_peak_flops = (SELECT probe_matmul_tflops * 1e12 FROM workers "
      "WHERE id = ?1), health_source = ?2, health_samples = ?3, avg_power_w = ?4, energy_j = ?5, "
      "peak_temp_c = ?6, throttle_events = ?7, throttled_seconds = ?8, throttled = ?9, "
      "health_json = ?10 WHERE experiment_id = ?11 AND attempt = ?12",
      &res));
  const bool known = f.has_health();
  const bool throttle_known = known && h.throttle_known();
  res.Bind(1, worker_id)
      .Bind(2, h.source())
      .Bind(3, known ? std::optional<int64_t>(h.sample_count()) : std::nullopt)
      .Bind(4, opt(h.has_avg_power_w(), h.avg_power_w()))
      .Bind(5, opt(h.has_energy_j(), h.energy_j()))
      .Bind(6, opt(h.has_peak_temp_c(), h.peak_temp_c()))
      .Bind(7, throttle_known ? std::optional<int64_t>(h.throttle_events()) : std::nullopt)
      .Bind(8, opt(throttle_known, h.throttled_seconds()))
      .Bind(9, throttle_known ? std::optional<int64_t>(h.throttled() ? 1 : 0) : std::nullopt)
      .Bind(10, health_json)
      .Bind(11, f.experiment_id())
      .Bind(12, f.attempt());
  return res.Run();
}

// A Finished that is not applied (its attempt had already ended) is recorded as a daemon event
// 'finished_ignored' of that attempt, with what it said.
Status RecordIgnoredFinished(SqliteConnection* c, int64_t worker_id, const xv::v1::Finished& f,
                             const std::string& attempt_state, const std::string& reason) {
  const json ev = {{"worker_id", worker_id},
                   {"state", SanitizeAndTruncateUtf8(f.state(), kMaxKindBytes)},
                   {"failure_kind", SanitizeAndTruncateUtf8(f.failure_kind(), kMaxKindBytes)},
                   {"failure_detail", SanitizeAndTruncateUtf8(f.failure_detail(), kMaxQuoteBytes)},
                   {"exit_code", f.exit_code()},
                   {"attempt_state", attempt_state},
                   {"reason", reason}};
  return InsertDaemonEvent(c, f.experiment_id(), f.attempt(), "finished_ignored", ev.dump());
}

// The attempt row a Finished report is about, as the reporting worker holds it.
struct HeldAttempt {
  std::string state_text;  // attempts.state as stored
  ExperimentState state = ExperimentState::kFailed;
  bool marked_implausible = false;  // an event carried an implausible figure (attempt_events.cc)
  std::string implausible_detail;
};

// FailedPrecondition when `worker_id` never held this attempt.
Status ReadHeldAttempt(SqliteConnection* c, int64_t worker_id, int64_t exp, int attempt,
                       HeldAttempt* out) {
  SqliteStatement own;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT state, failure_kind, failure_detail FROM attempts WHERE experiment_id "
                 "= ? AND attempt = ? AND worker_id = ?",
                 &own));
  own.Bind(1, exp).Bind(2, attempt).Bind(3, worker_id);
  bool row = false;
  XV_RETURN_IF_ERROR(own.Step(&row));
  if (!row) {
    return Status::FailedPrecondition("experiment " + std::to_string(exp) + " attempt " +
                                      std::to_string(attempt) + " is not held by this worker");
  }
  out->state_text = own.ColumnText(0);
  if (!ParseExperimentState(out->state_text, &out->state)) out->state = ExperimentState::kFailed;
  out->marked_implausible = own.ColumnText(1) == kImplausibleResult;
  out->implausible_detail = own.ColumnText(2);
  return Status::Ok();
}

// Attempt rows change only from a live state: assigned, running, or lost (the worker's own report
// of a lost attempt, arriving late, replaces the daemon's verdict once).
bool AttemptIsLive(ExperimentState state) {
  return IsActive(state) || state == ExperimentState::kLost;
}

// What the results table holds for the attempt.
Status ReadStoredSummary(SqliteConnection* c, int64_t exp, int attempt, sched::StoredSummary* out) {
  SqliteStatement has;
  XV_RETURN_IF_ERROR(c->Prepare(
      "SELECT val_bpb IS NOT NULL FROM results WHERE experiment_id = ? AND attempt = ?", &has));
  has.Bind(1, exp).Bind(2, attempt);
  bool row = false;
  XV_RETURN_IF_ERROR(has.Step(&row));
  if (!row) {
    *out = sched::StoredSummary::kNone;
  } else {
    *out = has.ColumnInt(0) == 0 ? sched::StoredSummary::kWithoutValBpb
                                 : sched::StoredSummary::kWithValBpb;
  }
  return Status::Ok();
}

// The experiment's state and attempt number; *found = false when there is no such row.
Status ReadExperimentAtFinish(SqliteConnection* c, int64_t exp, sched::ExperimentAtFinish* out,
                              bool* found) {
  SqliteStatement sel;
  XV_RETURN_IF_ERROR(c->Prepare("SELECT state, attempt FROM experiments WHERE id = ?", &sel));
  sel.Bind(1, exp);
  XV_RETURN_IF_ERROR(sel.Step(found));
  if (!*found) return Status::Ok();
  if (!ParseExperimentState(sel.ColumnText(0), &out->state)) {
    return Status::DataLoss("experiment " + std::to_string(exp) + ": unknown state '" +
                            sel.ColumnText(0) + "'");
  }
  out->attempt = static_cast<int>(sel.ColumnInt(1));
  return Status::Ok();
}

// The experiment takes the attempt's outcome: its state, failure (cleared by a success, kept when
// the outcome names none), log tail, progress (1 on success), worker, attempt number and end time.
Status EndExperiment(SqliteConnection* c, int64_t exp, int attempt, int64_t worker_id,
                     const sched::AttemptOutcome& outcome, const std::string& tail) {
  SqliteStatement up;
  XV_RETURN_IF_ERROR(c->Prepare(
      "UPDATE experiments SET state = ?1, "
      "failure_kind = CASE WHEN ?1 = 'succeeded' THEN '' WHEN ?2 = '' THEN failure_kind ELSE ?2 "
      "END, failure_detail = CASE WHEN ?1 = 'succeeded' THEN '' WHEN ?3 = '' THEN failure_detail "
      "ELSE ?3 END, stderr_tail = ?4, progress = CASE WHEN ?1 = 'succeeded' THEN 1 ELSE "
      "progress END, worker_id = ?6, attempt = ?7, finished_at = " XV_NOW " WHERE id = ?5",
      &up));
  up.Bind(1, std::string(ToString(outcome.state)))
      .Bind(2, outcome.failure_kind)
      .Bind(3, outcome.failure_detail)
      .Bind(4, tail)
      .Bind(5, exp)
      .Bind(6, worker_id)
      .Bind(7, attempt);
  return up.Run();
}

// The attempt row records how it ended.
Status EndAttemptRow(SqliteConnection* c, const xv::v1::Finished& f,
                     const sched::AttemptOutcome& outcome, const std::string& tail) {
  SqliteStatement at;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE attempts SET state = ?, exit_code = ?, signal = ?, failure_kind = ?, "
                 "failure_detail = ?, stderr_tail = ?, wall_seconds = ?, finished_at = " XV_NOW
                 " WHERE experiment_id = ? AND attempt = ?",
                 &at));
  at.Bind(1, std::string(ToString(outcome.state)))
      .Bind(2, f.exit_code())
      .Bind(3, f.signal())
      .Bind(4, outcome.failure_kind)
      .Bind(5, outcome.failure_detail)
      .Bind(6, tail)
      .Bind(7, f.wall_seconds())
      .Bind(8, f.experiment_id())
      .Bind(9, f.attempt());
  return at.Run();
}

// A cancelled experiment keeps its state but gains the attempt's log tail.
Status KeepCancelledTail(SqliteConnection* c, int64_t exp, int attempt, const std::string& tail) {
  SqliteStatement tail_only;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE experiments SET stderr_tail = ? WHERE id = ? AND attempt = ? AND state = "
                 "'cancelled'",
                 &tail_only));
  tail_only.Bind(1, tail).Bind(2, exp).Bind(3, attempt);
  return tail_only.Run();
}

}  // namespace

Status AttemptLedger::AcknowledgeFinishedLocked(int64_t worker_id, int64_t exp, int attempt,
                                                xv::v1::EventAck* ack) {
  SqliteConnection* c = db_->conn();
  SqliteStatement ws;
  XV_RETURN_IF_ERROR(c->Prepare("UPDATE workers SET state = 'idle', last_heartbeat = " XV_NOW
                                " WHERE id = ? AND state = 'busy'",
                                &ws));
  ws.Bind(1, worker_id);
  XV_RETURN_IF_ERROR(ws.Run());
  int64_t seq = 0;
  XV_RETURN_IF_ERROR(HighestContiguousSeqLocked(exp, attempt, &seq));
  ack->set_experiment_id(exp);
  ack->set_attempt(attempt);
  ack->set_seq(seq);
  ack->set_finished(true);
  return Status::Ok();
}

Status AttemptLedger::FinishAttempt(int64_t worker_id, const xv::v1::Finished& f,
                                    xv::v1::EventAck* ack) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  return InWriteTransaction(db_->conn(), [&]() -> Status {
    db_->mu()->AssertHeld();  // the lambda runs inside this function, under `lock`
    return FinishAttemptLocked(worker_id, f, ack);
  });
}

Status AttemptLedger::FinishAttemptLocked(int64_t worker_id, const xv::v1::Finished& f,
                                          xv::v1::EventAck* ack) {
  SqliteConnection* c = db_->conn();
  const int64_t exp = f.experiment_id();
  const int attempt = f.attempt();
  HeldAttempt held;
  XV_RETURN_IF_ERROR(ReadHeldAttempt(c, worker_id, exp, attempt, &held));
  // The acknowledgement ends the worker's resending whether or not the report is applied: a
  // second or late Finished for an attempt that already ended is recorded, not applied.
  if (!AttemptIsLive(held.state)) {
    XV_RETURN_IF_ERROR(RecordIgnoredFinished(c, worker_id, f, held.state_text,
                                             "the attempt had already ended " + held.state_text));
    return AcknowledgeFinishedLocked(worker_id, exp, attempt, ack);
  }
  sched::FinishedReport report;
  report.state = f.state();
  report.failure_kind = f.failure_kind();
  report.failure_detail = f.failure_detail();
  report.marked_implausible = held.marked_implausible;
  report.implausible_detail = held.implausible_detail;
  XV_RETURN_IF_ERROR(ReadStoredSummary(c, exp, attempt, &report.summary));
  const sched::AttemptOutcome outcome = sched::DecideFinishedOutcome(report);
  const std::string tail = Tail(f.stderr_tail(), kMaxStderrTail);
  sched::ExperimentAtFinish experiment;
  bool found = false;
  XV_RETURN_IF_ERROR(ReadExperimentAtFinish(c, exp, &experiment, &found));
  const bool experiment_moved =
      found && sched::ExperimentTakesOutcome(experiment, attempt, outcome.state);
  if (experiment_moved) {
    XV_RETURN_IF_ERROR(EndExperiment(c, exp, attempt, worker_id, outcome, tail));
  }
  XV_RETURN_IF_ERROR(EndAttemptRow(c, f, outcome, tail));
  XV_RETURN_IF_ERROR(StoreAttemptHealth(c, worker_id, f));
  if (experiment_moved) {
    const std::string& kind = outcome.failure_kind;
    const std::string& detail = outcome.failure_detail;
    XV_RETURN_IF_ERROR(InsertStateEvent(
        c, exp, kind.empty() ? detail : kind + (detail.empty() ? "" : ": " + detail)));
  }
  XV_RETURN_IF_ERROR(KeepCancelledTail(c, exp, attempt, tail));
  return AcknowledgeFinishedLocked(worker_id, exp, attempt, ack);
}

}  // namespace xv::store
