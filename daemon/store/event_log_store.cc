// ExperimentStore: the event log as Watch reads it, the daemon's own events, WAL upkeep and the
// write-fault ("read-only") mode. See experiment_store.h and event_log.h.
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "daemon/store/event_log.h"
#include "daemon/store/experiment_store.h"

namespace xv::store {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Status InsertDaemonEvent(SqliteConnection* c, int64_t experiment_id, int attempt,
                         const std::string& type, const std::string& json) {
  SqliteStatement ev;
  XV_RETURN_IF_ERROR(
      c->Prepare("INSERT INTO events(source, experiment_id, attempt, type, json) VALUES ('daemon', "
                 "?, ?, ?, ?)",
                 &ev));
  if (experiment_id != 0) {
    ev.Bind(1, experiment_id).Bind(2, attempt);
  } else {
    ev.BindNull(1).BindNull(2);
  }
  ev.Bind(3, type).Bind(4, json);
  return ev.Run();
}

Status InsertStateEvent(SqliteConnection* c, int64_t experiment_id, const std::string& detail) {
  SqliteStatement ev;
  XV_RETURN_IF_ERROR(
      c->Prepare("INSERT INTO events(source, experiment_id, attempt, type, json) "
                 "SELECT 'daemon', id, attempt, 'state', json_object('state', state, 'detail', ?) "
                 "FROM experiments WHERE id = ?",
                 &ev));
  ev.Bind(1, detail).Bind(2, experiment_id);
  return ev.Run();
}

Status ExperimentStore::ListEventsAfter(int64_t after_id, int64_t up_to_id, int limit,
                                        std::vector<StoredEvent>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
      "SELECT e.id, e.created_at, e.source, COALESCE(e.experiment_id, 0), COALESCE(e.attempt, 0), "
      "e.type, e.json, COALESCE(c.id, 0), COALESCE(c.name, ''), "
      "COALESCE(x.round_id, CASE WHEN json_valid(e.json) THEN json_extract(e.json, '$.round_id') "
      "END, 0), COALESCE(x.name, '') "
      "FROM events e LEFT JOIN experiments x ON x.id = e.experiment_id "
      "LEFT JOIN campaigns c ON c.id = COALESCE(x.campaign_id, CASE WHEN json_valid(e.json) THEN "
      "json_extract(e.json, '$.campaign_id') END) "
      "WHERE e.id > ? AND (? = 0 OR e.id <= ?) ORDER BY e.id LIMIT ?",
      &st));
  st.Bind(1, after_id).Bind(2, up_to_id).Bind(3, up_to_id).Bind(4, limit);
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) return Status::Ok();
    StoredEvent e;
    e.id = st.ColumnInt(0);
    e.created_at = st.ColumnText(1);
    e.source = st.ColumnText(2);
    e.experiment_id = st.ColumnInt(3);
    e.attempt = static_cast<int>(st.ColumnInt(4));
    e.type = st.ColumnText(5);
    e.json = st.ColumnText(6);
    e.campaign_id = st.ColumnInt(7);
    e.campaign = st.ColumnText(8);
    e.round_id = st.ColumnInt(9);
    e.name = st.ColumnText(10);
    out->push_back(std::move(e));
  }
}

Status ExperimentStore::MaxEventId(int64_t* id) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare("SELECT COALESCE(MAX(id), 0) FROM events", &st));
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *id = row ? st.ColumnInt(0) : 0;
  return Status::Ok();
}

Status ExperimentStore::ScopeIdle(int64_t campaign_id, bool* idle) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
      "SELECT (SELECT COUNT(*) FROM experiments WHERE state IN ('queued', 'assigned', 'running') "
      "AND (?1 = 0 OR campaign_id = ?1)) + "
      "(SELECT COUNT(*) FROM rounds rd JOIN campaigns c ON c.id = rd.campaign_id "
      "WHERE rd.state = 'open' AND c.policy_json <> '{}' AND (?1 = 0 OR c.id = ?1) "
      "AND COALESCE(CASE WHEN json_valid(c.policy_json) THEN json_extract(c.policy_json, "
      "'$.decide') END, 'auto') <> 'manual' "
      "AND EXISTS (SELECT 1 FROM experiments x WHERE x.round_id = rd.id))",
      &st));
  st.Bind(1, campaign_id);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *idle = row && st.ColumnInt(0) == 0;
  return Status::Ok();
}

void ExperimentStore::SetCommitListener(std::function<void()> on_commit, int checkpoint_pages) {
  std::lock_guard<std::mutex> lock(mu_);
  conn_->SetCommitHook(
      [this, on_commit = std::move(on_commit)] {
        last_commit_ms_ = SteadyMs();
        truncated_since_commit_ = false;
        if (on_commit) on_commit();
      },
      checkpoint_pages);
}

Status ExperimentStore::CheckpointWal(bool truncate, int* wal_pages, int* checkpointed) {
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->CheckpointWal(truncate, wal_pages, checkpointed);
}

Status ExperimentStore::MaintainWal(std::chrono::milliseconds interval,
                                    std::chrono::milliseconds idle) {
  if (read_only_) return Status::Ok();
  const int64_t now = SteadyMs();
  if (last_checkpoint_ms_ == 0) last_checkpoint_ms_ = now;
  const bool quiet = now - last_commit_ms_ >= idle.count();
  const bool truncate = quiet && !truncated_since_commit_;
  if (!truncate && now - last_checkpoint_ms_ < interval.count()) return Status::Ok();
  int pages = 0, done = 0;
  Status s = CheckpointWal(truncate, &pages, &done);
  last_checkpoint_ms_ = now;
  if (!s.ok()) return s;
  if (truncate) truncated_since_commit_ = true;
  spdlog::debug("{}: wal_checkpoint({}): {} WAL pages, {} checkpointed", path_,
                truncate ? "TRUNCATE" : "PASSIVE", pages, done);
  return Status::Ok();
}

std::string ExperimentStore::WriteFault() {
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->write_fault();
}

Status ExperimentStore::CheckAcceptsNewWorkLocked() const {
  const std::string& fault = conn_->write_fault();
  if (fault.empty()) return Status::Ok();
  return Status::FailedPrecondition("the daemon is in read-only mode: the database " + path_ +
                                    " cannot take writes (" + fault +
                                    "); new work is refused until a write succeeds again (free "
                                    "disk space or fix the file's permissions; xvd retries)");
}

Status ExperimentStore::RetryWrites(bool* writable) {
  *writable = false;
  std::lock_guard<std::mutex> lock(mu_);
  if (read_only_) return Status::Ok();
  const std::string fault = conn_->write_fault();
  if (fault.empty()) {
    *writable = true;
    return Status::Ok();
  }
  SqliteConnection* c = conn_.get();
  Status s = InWriteTransaction(c, [&]() -> Status {
    return InsertDaemonEvent(c, 0, 0, "writable", nlohmann::json{{"after", fault}}.dump());
  });
  if (!s.ok()) return s;
  conn_->ClearWriteFault();
  *writable = true;
  return Status::Ok();
}

}  // namespace xv::store
