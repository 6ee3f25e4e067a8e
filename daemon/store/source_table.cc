// SourceTable: code candidates' sources, content-addressed. See source_table.h.
#include "daemon/store/source_table.h"

#include "common/sha256.h"
#include "common/untrusted_text.h"

namespace xv::store {

Status CheckSourceText(const std::string& field, const std::string& text) {
  if (text.empty()) return Status::InvalidArgument(field + ": empty (send the file's text)");
  if (text.size() > kMaxSourceBytes) {
    return Status::InvalidArgument(field + ": " + std::to_string(text.size()) + " bytes, at most " +
                                   std::to_string(kMaxSourceBytes));
  }
  if (!IsValidUtf8(text)) return Status::InvalidArgument(field + ": not valid UTF-8 text");
  if (text.find('\0') != std::string::npos) {
    return Status::InvalidArgument(field + ": holds a NUL byte (not a Python source)");
  }
  return Status::Ok();
}

Status InsertSourceRow(SqliteConnection* conn, const std::string& sha256, const std::string& text,
                       int64_t* id, bool* inserted) {
  SqliteStatement ins;
  XV_RETURN_IF_ERROR(
      conn->Prepare("INSERT OR IGNORE INTO sources(sha256, text, bytes) VALUES (?, ?, ?)", &ins));
  ins.Bind(1, sha256).Bind(2, text).Bind(3, static_cast<int64_t>(text.size()));
  XV_RETURN_IF_ERROR(ins.Run());
  *inserted = conn->Changes() > 0;
  SqliteStatement sel;
  XV_RETURN_IF_ERROR(conn->Prepare("SELECT id FROM sources WHERE sha256 = ?", &sel));
  sel.Bind(1, sha256);
  bool row = false;
  XV_RETURN_IF_ERROR(sel.Step(&row));
  if (!row) return Status::Internal("source " + sha256 + " vanished after insert");
  *id = sel.ColumnInt(0);
  return Status::Ok();
}

Status SourceTable::RecordTrainerSource(const std::string& trainer, const std::string& worker_name,
                                        const std::string& sha256, const std::string& text) {
  XV_RETURN_IF_ERROR(CheckSourceText("trainer_sources[" + QuoteExcerpt(trainer) + "]", text));
  if (Sha256Hex(text) != sha256) {
    return Status::InvalidArgument("trainer_sources[" + QuoteExcerpt(trainer) +
                                   "]: sha256 is not the text's");
  }
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    int64_t id = 0;
    bool inserted = false;
    XV_RETURN_IF_ERROR(InsertSourceRow(c, sha256, text, &id, &inserted));
    SqliteStatement st;
    XV_RETURN_IF_ERROR(
        c->Prepare("INSERT INTO trainer_sources(trainer, source_id, worker_name) VALUES (?, ?, ?) "
                   "ON CONFLICT(trainer) DO UPDATE SET source_id = excluded.source_id, "
                   "worker_name = excluded.worker_name, registered_at = "
                   "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
                   &st));
    st.Bind(1, trainer).Bind(2, id).Bind(3, worker_name);
    return st.Run();
  });
}

namespace {

Status FindOne(Database* db, const std::string& sql, const std::string& key, bool* found,
               StoredSource* out) {
  MutexLock lock(db->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db->conn()->Prepare(sql, &st));
  st.Bind(1, key);
  XV_RETURN_IF_ERROR(st.Step(found));
  if (*found) {
    out->sha256 = st.ColumnText(0);
    out->text = st.ColumnText(1);
  }
  return Status::Ok();
}

}  // namespace

Status SourceTable::FindTrainerSource(const std::string& trainer, bool* found, StoredSource* out) {
  return FindOne(db_,
                 "SELECT s.sha256, s.text FROM trainer_sources t JOIN sources s ON s.id = "
                 "t.source_id WHERE t.trainer = ?",
                 trainer, found, out);
}

Status SourceTable::FindSource(const std::string& sha256, bool* found, StoredSource* out) {
  return FindOne(db_, "SELECT sha256, text FROM sources WHERE sha256 = ?", sha256, found, out);
}

}  // namespace xv::store
