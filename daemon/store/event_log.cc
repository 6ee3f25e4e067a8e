// EventLog: the event log as Watch reads it and the daemon's own events. See event_log.h.
#include "daemon/store/event_log.h"

#include <nlohmann/json.hpp>

#include "daemon/store/statement_rows.h"

namespace xv::store {

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

namespace {

// Positions in kEventSelect.
struct EventColumn {
  enum : int {
    kId,
    kCreatedAt,
    kSource,
    kExperimentId,
    kAttempt,
    kType,
    kJson,
    kCampaignId,
    kCampaign,
    kRoundId,
    kName,
    kCount
  };
};

constexpr SelectColumn kEventSelect[] = {
    {EventColumn::kId, "e.id"},
    {EventColumn::kCreatedAt, "e.created_at"},
    {EventColumn::kSource, "e.source"},
    {EventColumn::kExperimentId, "COALESCE(e.experiment_id, 0)"},
    {EventColumn::kAttempt, "COALESCE(e.attempt, 0)"},
    {EventColumn::kType, "e.type"},
    {EventColumn::kJson, "e.json"},
    {EventColumn::kCampaignId, "COALESCE(c.id, 0)"},
    {EventColumn::kCampaign, "COALESCE(c.name, '')"},
    {EventColumn::kRoundId,
     "COALESCE(x.round_id, CASE WHEN json_valid(e.json) THEN json_extract(e.json, '$.round_id') "
     "END, 0)"},
    {EventColumn::kName, "COALESCE(x.name, '')"},
};
static_assert(ColumnsInOrder(kEventSelect, EventColumn::kCount),
              "kEventSelect lists EventColumn in order");

const std::string& EventSelectSql() {
  static const std::string kSql = SelectList(kEventSelect);
  return kSql;
}

}  // namespace

namespace {

Status ReadEventRows(SqliteStatement* st, std::vector<StoredEvent>* out) {
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st->Step(&row));
    if (!row) return Status::Ok();
    StoredEvent e;
    e.id = st->ColumnInt(EventColumn::kId);
    e.created_at = st->ColumnText(EventColumn::kCreatedAt);
    e.source = st->ColumnText(EventColumn::kSource);
    e.experiment_id = st->ColumnInt(EventColumn::kExperimentId);
    e.attempt = static_cast<int>(st->ColumnInt(EventColumn::kAttempt));
    e.type = st->ColumnText(EventColumn::kType);
    e.json = st->ColumnText(EventColumn::kJson);
    e.campaign_id = st->ColumnInt(EventColumn::kCampaignId);
    e.campaign = st->ColumnText(EventColumn::kCampaign);
    e.round_id = st->ColumnInt(EventColumn::kRoundId);
    e.name = st->ColumnText(EventColumn::kName);
    out->push_back(std::move(e));
  }
}

const char kEventJoins[] =
    "FROM events e LEFT JOIN experiments x ON x.id = e.experiment_id "
    "LEFT JOIN campaigns c ON c.id = COALESCE(x.campaign_id, CASE WHEN "
    "json_valid(e.json) THEN json_extract(e.json, '$.campaign_id') END) ";

}  // namespace

Status EventLog::ListEventsAfter(int64_t after_id, int64_t up_to_id, int limit,
                                 std::vector<StoredEvent>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      db_->conn()->Prepare(EventSelectSql() + kEventJoins +
                               "WHERE e.id > ? AND (? = 0 OR e.id <= ?) ORDER BY e.id LIMIT ?",
                           &st));
  st.Bind(1, after_id).Bind(2, up_to_id).Bind(3, up_to_id).Bind(4, limit);
  return ReadEventRows(&st, out);
}

Status EventLog::ListExperimentEventsAfter(int64_t experiment_id, int64_t after_id,
                                           int64_t up_to_id, int limit,
                                           std::vector<StoredEvent>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  // The experiment's rows come from the UNIQUE (experiment_id, attempt, seq) index; sorting them
  // by id is a sort of that experiment's rows only.
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      EventSelectSql() + kEventJoins +
          "WHERE e.experiment_id = ? AND +e.id > ? AND (? = 0 OR +e.id <= ?) ORDER BY e.id LIMIT ?",
      &st));
  st.Bind(1, experiment_id).Bind(2, after_id).Bind(3, up_to_id).Bind(4, up_to_id).Bind(5, limit);
  return ReadEventRows(&st, out);
}

Status EventLog::MaxEventId(int64_t* id) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare("SELECT COALESCE(MAX(id), 0) FROM events", &st));
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *id = row ? st.ColumnInt(0) : 0;
  return Status::Ok();
}

Status EventLog::ScopeIdle(int64_t campaign_id, bool* idle) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
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

Status EventLog::AppendAudit(const std::string& type, const std::string& json_text) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      db_->conn()->Prepare("INSERT INTO events(source, type, json) VALUES ('daemon', ?, ?)", &st));
  st.Bind(1, type).Bind(2, json_text);
  return st.Run();
}

}  // namespace xv::store
