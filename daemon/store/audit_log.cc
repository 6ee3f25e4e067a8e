// AuditLog: the audit table. See audit_log.h.
#include "daemon/store/audit_log.h"

namespace xv::store {

Status AuditLog::Append(const AuditRow& row) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "INSERT INTO audit(token_id, caller, peer, method, target, outcome, detail) "
      "VALUES (?, ?, ?, ?, ?, ?, ?)",
      &st));
  st.Bind(1, row.token_id != 0 ? std::optional<int64_t>(row.token_id) : std::nullopt)
      .Bind(2, row.caller)
      .Bind(3, row.peer)
      .Bind(4, row.method)
      .Bind(5, row.target)
      .Bind(6, row.outcome)
      .Bind(7, row.detail);
  return st.Run();
}

Status AuditLog::ListRecent(int limit, std::vector<AuditRow>* out) {
  out->clear();
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT id, at, COALESCE(token_id, 0), caller, peer, method, target, outcome, detail "
      "FROM audit ORDER BY id DESC LIMIT ?",
      &st));
  st.Bind(1, static_cast<int64_t>(limit));
  bool has_row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&has_row));
    if (!has_row) break;
    AuditRow r;
    r.id = st.ColumnInt(0);
    r.at = st.ColumnText(1);
    r.token_id = st.ColumnInt(2);
    r.caller = st.ColumnText(3);
    r.peer = st.ColumnText(4);
    r.method = st.ColumnText(5);
    r.target = st.ColumnText(6);
    r.outcome = st.ColumnText(7);
    r.detail = st.ColumnText(8);
    out->push_back(std::move(r));
  }
  return Status::Ok();
}

}  // namespace xv::store
