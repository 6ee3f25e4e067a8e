// AttemptLedger: applying trainer events, one named function per event type. See
// attempt_ledger.h (ApplyTrainerEvents).
#include <algorithm>
#include <array>
#include <map>
#include <string>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/bounded_json_or_discarded.h"
#include "common/flat_json_object.h"
#include "common/untrusted_text.h"
#include "daemon/sched/result_plausibility.h"
#include "daemon/store/attempt_ledger.h"
#include "daemon/store/stored_text.h"

namespace xv::store {
namespace {

using nlohmann::json;

constexpr size_t kMaxEventJson = 256 * 1024;

// A trainer event of this attempt carried an implausible figure (`why` names it): the attempt is
// marked (its failure kind and detail; the first such event wins) while it is live (assigned,
// running, or lost and possibly reporting late), and FinishAttempt ends it invalid. The event
// itself stays stored verbatim; none of its figures are applied.
Status MarkAttemptImplausible(SqliteConnection* c, const xv::v1::TrainerEvent& ev,
                              const Status& why) {
  const std::string detail = SanitizeAndTruncateUtf8(
      ev.type() + " event " + std::to_string(ev.seq()) + ": " + why.message(), kMaxDetailBytes);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE attempts SET failure_kind = ?, failure_detail = ? WHERE experiment_id = ? "
                 "AND attempt = ? AND state IN ('assigned', 'running', 'lost') AND failure_kind "
                 "!= ?",
                 &st));
  st.Bind(1, kImplausibleResult)
      .Bind(2, detail)
      .Bind(3, ev.experiment_id())
      .Bind(4, ev.attempt())
      .Bind(5, kImplausibleResult);
  return st.Run();
}

// `st` ready for its next run of `sql`: prepared on first use, reset after that (so a statement
// run once per event is looked up in the connection's cache once per transaction).
Status PrepareOrReset(SqliteConnection* c, const std::string& sql, SqliteStatement* st) {
  if (st->prepared()) return st->Reset();
  return c->Prepare(sql, st);
}

// One stored trainer event being interpreted (any type but step): its attempt, and the event as
// sent and its JSON.
struct TrainerEventContext {
  SqliteConnection* c;
  const xv::v1::TrainerEvent& ev;
  const json& j;
  int64_t exp;
  int attempt;
};

// Only the active attempt moves the experiment's live fields.
constexpr const char* kActiveAttemptOnly =
    " WHERE id = ? AND attempt = ? AND state IN ('assigned', 'running')";

// start: the experiment runs, on the device the trainer names; the attempt row says running.
Status ApplyStartEvent(const TrainerEventContext& e) {
  std::string device_name;
  if (e.j.contains("device") && e.j["device"].is_object()) {
    device_name = TextField(e.j["device"], "name");
  }
  SqliteStatement up;
  XV_RETURN_IF_ERROR(e.c->Prepare(std::string("UPDATE experiments SET state = 'running', "
                                              "started_at = " XV_NOW ", device_name = ?") +
                                      kActiveAttemptOnly,
                                  &up));
  up.Bind(1, device_name).Bind(2, e.exp).Bind(3, e.attempt);
  XV_RETURN_IF_ERROR(up.Run());
  SqliteStatement at;
  XV_RETURN_IF_ERROR(
      e.c->Prepare("UPDATE attempts SET state = 'running' WHERE experiment_id = ? AND attempt = ? "
                   "AND state = 'assigned'",
                   &at));
  at.Bind(1, e.exp).Bind(2, e.attempt);
  return at.Run();
}

// A stored step row of the attempt: counted, and kept as its latest when its step is the highest.
void NoteLatestStep(const sched::StepFigures& fig, PendingStepUpdate* update) {
  ++update->rows;
  if (update->latest && fig.step < update->latest->step) return;
  update->latest = PendingStepUpdate::LatestStep{
      fig.step, fig.loss, fig.lrm, fig.dt_ms, fig.tok_per_sec, fig.mfu_percent, fig.progress};
}

// The upsert of an attempt's latest_metrics row: its rows are added, and the figures replaced
// when this transaction's step is at least the stored one (or of a newer attempt). A step of an
// older attempt than the stored row's changes nothing.
std::string LatestMetricsUpsertSql() {
  const std::string newer = "(excluded.attempt > attempt OR excluded.step >= step)";
  std::string set =
      "rows = CASE WHEN excluded.attempt = attempt THEN rows + excluded.rows ELSE "
      "excluded.rows END";
  for (const char* col :
       {"step", "loss", "lrm", "dt_ms", "tok_per_sec", "mfu_percent", "progress"}) {
    set += std::string(", ") + col + " = CASE WHEN " + newer + " THEN excluded." + col + " ELSE " +
           col + " END";
  }
  return "INSERT INTO latest_metrics(experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec, "
         "mfu_percent, progress, rows) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
         "ON CONFLICT(experiment_id) DO UPDATE SET " +
         set + ", attempt = excluded.attempt WHERE excluded.attempt >= attempt";
}

// The attempt's latest_metrics row (migration 14), once per attempt per transaction.
Status UpsertLatestMetrics(SqliteConnection* c, int64_t exp, int attempt,
                           const PendingStepUpdate& update) {
  if (!update.latest || update.rows == 0) return Status::Ok();
  const PendingStepUpdate::LatestStep& l = *update.latest;
  static const std::string* const kUpsert = new std::string(LatestMetricsUpsertSql());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(c->Prepare(*kUpsert, &st));
  st.Bind(1, exp)
      .Bind(2, attempt)
      .Bind(3, l.step)
      .Bind(4, l.loss)
      .Bind(5, l.lrm)
      .Bind(6, l.dt_ms)
      .Bind(7, l.tok_per_sec)
      .Bind(8, l.mfu_percent)
      .Bind(9, l.progress)
      .Bind(10, update.rows);
  return st.Run();
}

// A stored step event with plausible figures (its metrics row, migration 17): the experiment's
// progress and last loss, deferred to the end of the attempt's run of step events (*update).
void NoteStepFigures(const sched::StepFigures& fig, PendingStepUpdate* update) {
  if (fig.progress) update->progress = fig.progress;
  if (fig.loss) update->loss = fig.loss;
  NoteLatestStep(fig, update);
}

// The experiment-row update of an attempt's step events (NoteStepFigures): running, its progress
// and last loss, started_at when not yet set; then its latest_metrics row (UpsertLatestMetrics).
Status WriteStepUpdate(SqliteConnection* c, int64_t exp, int attempt,
                       const PendingStepUpdate& update) {
  SqliteStatement up;
  XV_RETURN_IF_ERROR(c->Prepare(
      std::string("UPDATE experiments SET state = 'running', progress = COALESCE(?, progress), "
                  "last_loss = COALESCE(?, last_loss), started_at = COALESCE(started_at, " XV_NOW
                  ")") +
          kActiveAttemptOnly,
      &up));
  up.Bind(1, update.progress).Bind(2, update.loss).Bind(3, exp).Bind(4, attempt);
  XV_RETURN_IF_ERROR(up.Run());
  return UpsertLatestMetrics(c, exp, attempt, update);
}

// nan: a nan_events row with the experiment's knobs, for the failure summary.
Status ApplyNanEvent(const TrainerEventContext& e) {
  SqliteStatement n;
  XV_RETURN_IF_ERROR(e.c->Prepare(
      "INSERT INTO nan_events(experiment_id, attempt, step, micro_step, what, value, knobs_json) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
      "(SELECT overrides_json FROM experiments WHERE id = ?1))",
      &n));
  n.Bind(1, e.exp)
      .Bind(2, e.attempt)
      .Bind(3, IntField(e.j, "step"))
      .Bind(4, IntField(e.j, "micro_step"))
      .Bind(5, TextField(e.j, "what"))
      .Bind(6, TextField(e.j, "value"));
  return n.Run();
}

// summary: the attempt's result row (when plausible).
Status ApplySummaryEvent(const TrainerEventContext& e) {
  sched::ResultFigures fig;
  Status plausible = sched::ReadResultFigures(e.j, &fig);
  if (!plausible.ok()) return MarkAttemptImplausible(e.c, e.ev, plausible);
  SqliteStatement r;
  XV_RETURN_IF_ERROR(e.c->Prepare(
      "INSERT OR REPLACE INTO results(experiment_id, attempt, val_bpb, training_seconds, "
      "total_seconds, num_steps, total_tokens, tok_per_sec, mfu_percent, peak_flops, "
      "peak_flops_source, peak_vram_mb, peak_reserved_mb, num_params, flops_per_token, "
      "metric_version, attention_backend, depth, summary_json) "
      "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
      &r));
  r.Bind(1, e.exp)
      .Bind(2, e.attempt)
      .Bind(3, fig.val_bpb)
      .Bind(4, fig.training_seconds)
      .Bind(5, fig.total_seconds)
      .Bind(6, fig.num_steps)
      .Bind(7, fig.total_tokens)
      .Bind(8, fig.tok_per_sec)
      .Bind(9, fig.mfu_percent.value_or(-1.0))  // null: unknown peak
      .Bind(10, fig.peak_flops.value_or(0.0))
      .Bind(11, TextField(e.j, "peak_flops_source"))
      .Bind(12, fig.peak_vram_mb)
      .Bind(13, fig.peak_reserved_mb)
      .Bind(14, fig.num_params)
      .Bind(15, fig.flops_per_token)
      .Bind(16, TextField(e.j, "metric_version"))
      .Bind(17, TextField(e.j, "attention_backend"))
      .Bind(18, fig.depth)
      .Bind(19, e.ev.json());
  return r.Run();
}

// error: the experiment's failure kind and a bounded detail (the whole event stays in the log).
Status ApplyErrorEvent(const TrainerEventContext& e) {
  SqliteStatement up;
  XV_RETURN_IF_ERROR(
      e.c->Prepare(std::string("UPDATE experiments SET failure_kind = ?, failure_detail = ?") +
                       kActiveAttemptOnly,
                   &up));
  up.Bind(1, SanitizeAndTruncateUtf8(TextField(e.j, "kind"), kMaxKindBytes))
      .Bind(2, SanitizeAndTruncateUtf8(TextField(e.j, "message"), kMaxDetailBytes))
      .Bind(3, e.exp)
      .Bind(4, e.attempt);
  return up.Run();
}

using TrainerEventApplier = Status (*)(const TrainerEventContext&);

// The event types the daemon interprets besides step (ApplyOneEventLocked); any other (eval, log,
// future types) is stored in the event log only.
TrainerEventApplier ApplierFor(const std::string& type) {
  static const std::map<std::string, TrainerEventApplier> kAppliers = {
      {"start", &ApplyStartEvent},
      {"nan", &ApplyNanEvent},
      {"summary", &ApplySummaryEvent},
      {"error", &ApplyErrorEvent}};
  auto it = kAppliers.find(type);
  return it == kAppliers.end() ? nullptr : it->second;
}

// The row counts of the event inserts, largest first: a run of fresh step events goes in by the
// largest that fit. One INSERT of 64 rows costs about a tenth less CPU per row than 64 one-row
// INSERTs (2.95 against 3.27 us with SQLite 3.40, 64 streams, 8,192 events per transaction;
// bench/README.md).
constexpr std::array<int, 4> kRowsPerEventInsert = {64, 16, 4, 1};
constexpr int kEventInsertColumns = 14;  // bound per row (source is the literal 'trainer')

// INSERT OR IGNORE of `rows` trainer events (BindEventRow binds each).
std::string EventsInsertSql(int rows) {
  std::string sql =
      "INSERT OR IGNORE INTO events(source, experiment_id, attempt, seq, type, json, unix_ms, "
      "created_at, step, loss, lrm, dt_ms, tok_per_sec, mfu_percent, progress) VALUES ";
  for (int r = 0; r < rows; ++r) {
    sql += r == 0 ? "" : ", ";
    sql += "('trainer', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)";
  }
  return sql;
}

// `*st` ready to run the insert of kRowsPerEventInsert[index] rows: prepared on its first use in
// the transaction, reset after that.
Status PrepareEventsInsert(SqliteConnection* c, size_t index, SqliteStatement* st) {
  if (st->prepared()) return st->Reset();
  return c->Prepare(EventsInsertSql(kRowsPerEventInsert[index]), st);
}

// Binds row `row` (0-based) of an events insert: the event, created at `stored_at` (XV_NOW's
// format), with the figures of a plausible step event (`step`, else null: its metrics row). `ev`
// and `stored_at` are bound without a copy: they must outlive the run.
void BindEventRow(SqliteStatement* st, int row, const xv::v1::TrainerEvent& ev,
                  const std::string& stored_at, const sched::StepFigures* step) {
  const int at = row * kEventInsertColumns;
  st->Bind(at + 1, ev.experiment_id())
      .Bind(at + 2, ev.attempt())
      .Bind(at + 3, ev.seq())
      .BindUnowned(at + 4, ev.type())
      .Bind(at + 6, ev.unix_ms())
      .BindUnowned(at + 7, stored_at);
  // Cut on a code-point boundary when over the cap; the store edge keeps it valid UTF-8.
  st->BindUnowned(at + 5, ev.json().size() <= kMaxEventJson ? std::string_view(ev.json())
                                                            : Utf8Prefix(ev.json(), kMaxEventJson));
  if (step != nullptr) {
    st->Bind(at + 8, step->step)
        .Bind(at + 9, step->loss)
        .Bind(at + 10, step->lrm)
        .Bind(at + 11, step->dt_ms)
        .Bind(at + 12, step->tok_per_sec)
        .Bind(at + 13, step->mfu_percent)
        .Bind(at + 14, step->progress);
  } else {
    for (int i = 8; i <= kEventInsertColumns; ++i) st->BindNull(at + i);
  }
}

// Stores the event once per (experiment, attempt, seq), as BindEventRow, through *ins (the
// transaction's one-row insert); *duplicate when it was stored before.
Status StoreTrainerEvent(SqliteConnection* c, const xv::v1::TrainerEvent& ev,
                         const std::string& stored_at, const sched::StepFigures* step,
                         SqliteStatement* ins, bool* duplicate) {
  XV_RETURN_IF_ERROR(PrepareEventsInsert(c, kRowsPerEventInsert.size() - 1, ins));
  BindEventRow(ins, 0, ev, stored_at, step);
  XV_RETURN_IF_ERROR(ins->Run());
  *duplicate = c->Changes() == 0;
  return Status::Ok();
}

// The length of the run of `events` that starts at `first`: step events of one attempt with
// rising seqs, at most kRowsPerEventInsert[0] of them.
size_t RisingSeqRun(const std::vector<StepEventToStore>& events, size_t first) {
  const xv::v1::TrainerEvent& head = *events[first].ev;
  size_t end = first + 1;
  while (end < events.size() && end - first < static_cast<size_t>(kRowsPerEventInsert[0])) {
    const xv::v1::TrainerEvent& ev = *events[end].ev;
    if (ev.experiment_id() != head.experiment_id() || ev.attempt() != head.attempt() ||
        ev.seq() <= events[end - 1].ev->seq()) {
      break;
    }
    ++end;
  }
  return end - first;
}

// *stored: whether the events table holds an event of the attempt with a seq in [from, to]
// (through *st, prepared once per transaction).
Status AnyEventStoredBetween(SqliteConnection* c, int64_t experiment_id, int attempt, int64_t from,
                             int64_t to, SqliteStatement* st, bool* stored) {
  XV_RETURN_IF_ERROR(PrepareOrReset(
      c,
      "SELECT 1 FROM events WHERE experiment_id = ? AND attempt = ? AND seq BETWEEN ? AND ? "
      "LIMIT 1",
      st));
  st->Bind(1, experiment_id).Bind(2, attempt).Bind(3, from).Bind(4, to);
  return st->Step(stored);
}

// The store's clock now, in XV_NOW's format.
Status ReadStoreClock(SqliteConnection* c, std::string* now) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(c->Prepare("SELECT " XV_NOW, &st));
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (!row) return Status::Internal("SELECT " XV_NOW ": no row");
  *now = st.ColumnText(0);
  return Status::Ok();
}

}  // namespace

StepEventFigures ReadStepEventAhead(const xv::v1::TrainerEvent& ev, FlatJsonObject* scratch) {
  if (!FlatJsonObject::Parse(ev.json(), scratch)) return std::nullopt;
  const FlatJsonObject::Member* type = scratch->Find("type");
  const bool step = type != nullptr && type->kind == FlatJsonObject::Kind::kString
                        ? type->string == "step"
                        : ev.type() == "step";
  sched::StepFigures fig;
  if (!step || !sched::ReadPlausibleStepFigures(*scratch, &fig)) return std::nullopt;
  return fig;
}

Status AttemptLedger::ApplyOneEventLocked(const xv::v1::TrainerEvent& ev,
                                          const StepEventFigures* read_ahead,
                                          TrainerEventTransaction* tx, int* duplicates) {
  SqliteConnection* c = db_->conn();
  const std::pair<int64_t, int> key(ev.experiment_id(), ev.attempt());
  // The fast path: a flat step event with plausible figures (most of what trainers send), stored
  // with the next ones (StoreBufferedStepEventsLocked). The full parse below decides everything
  // else, with the same outcome for these.
  StepEventFigures read_here;
  if (read_ahead == nullptr) {
    read_here = ReadStepEventAhead(ev, &tx->flat);
    read_ahead = &read_here;
  }
  if (read_ahead->has_value()) {
    tx->buffered_steps.push_back(StepEventToStore{&ev, **read_ahead});
    if (tx->buffered_steps.size() < static_cast<size_t>(kRowsPerEventInsert[0])) {
      return Status::Ok();
    }
    return StoreBufferedStepEventsLocked(tx, duplicates);
  }
  // Any other event is stored after the step events before it.
  XV_RETURN_IF_ERROR(StoreBufferedStepEventsLocked(tx, duplicates));
  SqliteStatement* insert_one = &tx->insert_events.back();
  bool duplicate = false;
  const json j = ParseBoundedJsonOrDiscarded(ev.json());
  const std::string type = !j.is_object() ? std::string()
                           : j.contains("type") && j["type"].is_string()
                               ? j["type"].get<std::string>()
                               : ev.type();
  if (type == "step") {
    sched::StepFigures fig;
    const Status plausible = sched::ReadStepFigures(j, &fig);
    XV_RETURN_IF_ERROR(StoreTrainerEvent(c, ev, tx->stored_at, plausible.ok() ? &fig : nullptr,
                                         insert_one, &duplicate));
    if (duplicate) {
      ++*duplicates;
      return Status::Ok();
    }
    if (!plausible.ok()) return MarkAttemptImplausible(c, ev, plausible);
    NoteStepFigures(fig, &tx->pending[key]);
    return Status::Ok();
  }
  XV_RETURN_IF_ERROR(StoreTrainerEvent(c, ev, tx->stored_at, nullptr, insert_one, &duplicate));
  if (duplicate) {
    ++*duplicates;
    return Status::Ok();
  }
  const TrainerEventApplier apply = ApplierFor(type);  // none for a JSON that is no object
  if (apply == nullptr) return Status::Ok();           // stored verbatim; nothing to interpret
  // Any other event of the attempt sees (and may change) its row as the steps before left it.
  XV_RETURN_IF_ERROR(WritePendingStepUpdatesLocked(&tx->pending, &key));
  return apply(TrainerEventContext{c, ev, j, ev.experiment_id(), ev.attempt()});
}

Status AttemptLedger::StoreBufferedStepEventsLocked(TrainerEventTransaction* tx, int* duplicates) {
  static_assert(std::tuple_size<decltype(tx->insert_events)>::value == kRowsPerEventInsert.size());
  SqliteConnection* c = db_->conn();
  const std::vector<StepEventToStore>& events = tx->buffered_steps;
  size_t i = 0;
  while (i < events.size()) {
    const xv::v1::TrainerEvent& head = *events[i].ev;
    const size_t run = RisingSeqRun(events, i);
    // A multi-row INSERT OR IGNORE cannot say which of its rows were repeats: it is used only
    // when none of the run's seqs is stored (rising seqs: none repeats another in the run).
    bool stored = true;
    if (run >= static_cast<size_t>(kRowsPerEventInsert[kRowsPerEventInsert.size() - 2])) {
      XV_RETURN_IF_ERROR(AnyEventStoredBetween(c, head.experiment_id(), head.attempt(), head.seq(),
                                               events[i + run - 1].ev->seq(), &tx->find_stored_seq,
                                               &stored));
    }
    const size_t end = i + run;
    const std::pair<int64_t, int> key(head.experiment_id(), head.attempt());
    if (stored) {  // one row at a time: each says whether it was a repeat
      SqliteStatement* insert_one = &tx->insert_events.back();
      for (; i < end; ++i) {
        bool duplicate = false;
        XV_RETURN_IF_ERROR(StoreTrainerEvent(c, *events[i].ev, tx->stored_at, &events[i].fig,
                                             insert_one, &duplicate));
        if (duplicate) {
          ++*duplicates;
        } else {
          NoteStepFigures(events[i].fig, &tx->pending[key]);  // an attempt with none stays out
        }
      }
      continue;
    }
    PendingStepUpdate* update = &tx->pending[key];
    while (i < end) {  // the largest inserts that fit
      size_t index = 0;
      while (static_cast<size_t>(kRowsPerEventInsert[index]) > end - i) ++index;
      const int rows = kRowsPerEventInsert[index];
      SqliteStatement* insert = &tx->insert_events[index];
      XV_RETURN_IF_ERROR(PrepareEventsInsert(c, index, insert));
      for (int r = 0; r < rows; ++r) {
        BindEventRow(insert, r, *events[i + r].ev, tx->stored_at, &events[i + r].fig);
      }
      XV_RETURN_IF_ERROR(insert->Run());
      if (c->Changes() != rows) {
        return Status::Internal("events insert of " + std::to_string(rows) + " rows stored " +
                                std::to_string(c->Changes()) + " (experiment " +
                                std::to_string(head.experiment_id()) + ", attempt " +
                                std::to_string(head.attempt()) + ")");
      }
      for (int r = 0; r < rows; ++r) NoteStepFigures(events[i + r].fig, update);
      i += rows;
    }
  }
  tx->buffered_steps.clear();
  return Status::Ok();
}

Status AttemptLedger::WritePendingStepUpdatesLocked(PendingStepUpdates* pending,
                                                    const std::pair<int64_t, int>* key) {
  if (key != nullptr) {
    auto it = pending->find(*key);
    if (it == pending->end()) return Status::Ok();
    XV_RETURN_IF_ERROR(WriteStepUpdate(db_->conn(), key->first, key->second, it->second));
    pending->erase(it);
    return Status::Ok();
  }
  for (const auto& [k, update] : *pending) {
    XV_RETURN_IF_ERROR(WriteStepUpdate(db_->conn(), k.first, k.second, update));
  }
  pending->clear();
  return Status::Ok();
}

Status AttemptLedger::ApplyWorkerEventsLocked(const WorkerEvents& batch,
                                              TrainerEventTransaction* tx, AppliedEvents* out) {
  SqliteConnection* c = db_->conn();
  // The attempts the batch stored events of, in their first event's order, and those events'
  // seqs (stored now or found stored: each has its row once the buffered steps are stored).
  std::vector<std::pair<std::pair<int64_t, int>, std::vector<int64_t>>> touched;
  std::map<std::pair<int64_t, int>, bool> owned;  // per attempt of the batch, looked up once
  for (const TrainerEventChunk& chunk : batch.chunks) {
    if (chunk.events == nullptr) continue;
    const std::vector<xv::v1::TrainerEvent>& events = *chunk.events;
    if (chunk.read_ahead != nullptr && chunk.read_ahead->size() != events.size()) {
      return Status::InvalidArgument("worker " + std::to_string(batch.worker_id) + ": " +
                                     std::to_string(chunk.read_ahead->size()) +
                                     " read-ahead figures for " + std::to_string(events.size()) +
                                     " events");
    }
    for (size_t i = 0; i < events.size(); ++i) {
      const xv::v1::TrainerEvent& ev = events[i];
      // The worker must hold (or have held) this attempt.
      std::pair<int64_t, int> key(ev.experiment_id(), ev.attempt());
      auto own_it = owned.find(key);
      if (own_it == owned.end()) {
        SqliteStatement own;
        XV_RETURN_IF_ERROR(c->Prepare(
            "SELECT 1 FROM attempts WHERE experiment_id = ? AND attempt = ? AND worker_id = ?",
            &own));
        own.Bind(1, ev.experiment_id()).Bind(2, ev.attempt()).Bind(3, batch.worker_id);
        bool found = false;
        XV_RETURN_IF_ERROR(own.Step(&found));
        own_it = owned.emplace(key, found).first;
      }
      if (!own_it->second || ev.seq() <= 0) {
        ++out->rejected;
        continue;
      }
      XV_RETURN_IF_ERROR(
          ApplyOneEventLocked(ev, chunk.read_ahead != nullptr ? &(*chunk.read_ahead)[i] : nullptr,
                              tx, &out->duplicates));
      auto t = std::find_if(touched.begin(), touched.end(),
                            [&key](const auto& attempt) { return attempt.first == key; });
      if (t == touched.end()) t = touched.insert(touched.end(), {key, {}});
      t->second.push_back(ev.seq());
    }
  }
  XV_RETURN_IF_ERROR(StoreBufferedStepEventsLocked(tx, &out->duplicates));
  XV_RETURN_IF_ERROR(WritePendingStepUpdatesLocked(&tx->pending, nullptr));
  for (auto& [key, seqs] : touched) {
    const auto [exp, attempt] = key;
    xv::v1::EventAck ack;
    ack.set_experiment_id(exp);
    ack.set_attempt(attempt);
    int64_t seq = 0;
    XV_RETURN_IF_ERROR(HighestContiguousSeqLocked(exp, attempt, &seq, &seqs));
    ack.set_seq(seq);
    out->acks.push_back(ack);
  }
  return Status::Ok();
}

Status AttemptLedger::ApplyTrainerEvents(int64_t worker_id,
                                         const std::vector<xv::v1::TrainerEvent>& events,
                                         AppliedEvents* applied) {
  std::vector<AppliedEvents> results;
  XV_RETURN_IF_ERROR(ApplyTrainerEventBatches({WorkerEvents(worker_id, &events)}, &results));
  *applied = std::move(results.front());
  return Status::Ok();
}

Status AttemptLedger::ApplyTrainerEventBatches(const std::vector<WorkerEvents>& batches,
                                               std::vector<AppliedEvents>* applied) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  std::vector<AppliedEvents> results(batches.size());
  XV_RETURN_IF_ERROR(InWriteTransaction(db_->conn(), [&]() -> Status {
    db_->mu()->AssertHeld();  // the lambda runs inside this function, under `lock`
    TrainerEventTransaction tx;
    XV_RETURN_IF_ERROR(ReadStoreClock(db_->conn(), &tx.stored_at));
    for (size_t i = 0; i < batches.size(); ++i) {
      XV_RETURN_IF_ERROR(ApplyWorkerEventsLocked(batches[i], &tx, &results[i]));
    }
    // Each worker's Finished reports after every event of the transaction (a worker sends an
    // attempt's Finished after its events).
    for (size_t i = 0; i < batches.size(); ++i) {
      if (batches[i].finished == nullptr) continue;
      for (const xv::v1::Finished& f : *batches[i].finished) {
        AppliedFinished out;
        out.state = f.state();
        Status s = FinishAttemptLocked(batches[i].worker_id, f, &out.ack);
        if (s.code() == Status::Code::kFailedPrecondition) {
          // Never this worker's attempt (nothing was written): acknowledged all the same.
          out.not_held = s.message();
          out.ack.set_experiment_id(f.experiment_id());
          out.ack.set_attempt(f.attempt());
          out.ack.set_finished(true);
        } else if (!s.ok()) {
          return s;
        }
        results[i].finished.push_back(std::move(out));
      }
    }
    return Status::Ok();
  }));
  // Committed: the acknowledged seqs are where the next batch's search starts.
  for (const AppliedEvents& result : results) {
    for (const xv::v1::EventAck& ack : result.acks) {
      NoteContiguousSeqLocked(ack.experiment_id(), ack.attempt(), ack.seq());
    }
  }
  *applied = std::move(results);
  return Status::Ok();
}

}  // namespace xv::store
