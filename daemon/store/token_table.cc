// TokenTable: the tokens and worker_credentials tables. See token_table.h.
#include "daemon/store/token_table.h"

namespace xv::store {
namespace {

constexpr const char* kTokenColumns =
    "SELECT id, name, role, worker_name, hash, created_by, created_at, COALESCE(revoked_at, '') "
    "FROM tokens";

TokenRow ReadTokenRow(const SqliteStatement& st) {
  TokenRow t;
  t.id = st.ColumnInt(0);
  t.name = st.ColumnText(1);
  // The CHECK constraint keeps role one of the names; read stays on kRead otherwise.
  ParseTokenRole(st.ColumnText(2), &t.role);
  t.worker_name = st.ColumnText(3);
  t.hash = st.ColumnText(4);
  t.created_by = st.ColumnText(5);
  t.created_at = st.ColumnText(6);
  t.revoked_at = st.ColumnText(7);
  return t;
}

// The valid token owning `worker_name` (0 when none).
Status OwnerOfWorkerName(SqliteConnection* c, const std::string& worker_name, int64_t* owner) {
  *owner = 0;
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT w.token_id FROM worker_credentials w JOIN tokens t ON t.id = w.token_id "
                 "WHERE w.worker_name = ? AND t.revoked_at IS NULL",
                 &st));
  st.Bind(1, worker_name);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (row) *owner = st.ColumnInt(0);
  return Status::Ok();
}

Status InsertClaim(SqliteConnection* c, int64_t token_id, const std::string& worker_name) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(c->Prepare(
      "INSERT OR REPLACE INTO worker_credentials(worker_name, token_id) VALUES (?, ?)", &st));
  st.Bind(1, worker_name).Bind(2, token_id);
  return st.Run();
}

}  // namespace

Status TokenTable::CreateToken(const TokenRow& token, int64_t* id) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    if (!token.worker_name.empty()) {
      int64_t owner = 0;
      XV_RETURN_IF_ERROR(OwnerOfWorkerName(c, token.worker_name, &owner));
      if (owner != 0) {
        return Status::AlreadyExists("--worker " + token.worker_name +
                                     ": the worker name belongs to token " + std::to_string(owner) +
                                     " (revoke it first)");
      }
    }
    SqliteStatement st;
    XV_RETURN_IF_ERROR(
        c->Prepare("INSERT INTO tokens(name, role, worker_name, hash, created_by) "
                   "VALUES (?, ?, ?, ?, ?)",
                   &st));
    st.Bind(1, token.name)
        .Bind(2, std::string(ToString(token.role)))
        .Bind(3, token.worker_name)
        .Bind(4, token.hash)
        .Bind(5, token.created_by);
    XV_RETURN_IF_ERROR(st.Run());
    *id = c->LastInsertRowId();
    if (token.worker_name.empty()) return Status::Ok();
    return InsertClaim(c, *id, token.worker_name);
  });
}

Status TokenTable::ListTokens(std::vector<TokenRow>* out) {
  out->clear();
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(std::string(kTokenColumns) + " ORDER BY id", &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    out->push_back(ReadTokenRow(st));
  }
  return Status::Ok();
}

Status TokenTable::RevokeToken(int64_t id, TokenRow* revoked) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement update;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE tokens SET revoked_at = " XV_NOW " WHERE id = ? AND revoked_at IS NULL", &update));
    update.Bind(1, id);
    XV_RETURN_IF_ERROR(update.Run());
    SqliteStatement forget;
    XV_RETURN_IF_ERROR(c->Prepare("DELETE FROM worker_credentials WHERE token_id = ?", &forget));
    forget.Bind(1, id);
    XV_RETURN_IF_ERROR(forget.Run());
    SqliteStatement read;
    XV_RETURN_IF_ERROR(c->Prepare(std::string(kTokenColumns) + " WHERE id = ?", &read));
    read.Bind(1, id);
    bool row = false;
    XV_RETURN_IF_ERROR(read.Step(&row));
    if (!row) return Status::NotFound("token " + std::to_string(id) + ": no such token");
    *revoked = ReadTokenRow(read);
    return Status::Ok();
  });
}

Status TokenTable::CountTokens(int64_t* count) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare("SELECT COUNT(*) FROM tokens", &st));
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *count = row ? st.ColumnInt(0) : 0;
  return Status::Ok();
}

Status TokenTable::ClaimWorkerName(int64_t token_id, const std::string& worker_name,
                                   WorkerNameClaim* out) {
  *out = WorkerNameClaim{};
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    int64_t owner = 0;
    XV_RETURN_IF_ERROR(OwnerOfWorkerName(c, worker_name, &owner));
    if (owner != 0 && owner != token_id) {
      out->owner_id = owner;
      return Status::Ok();
    }
    out->granted = true;
    if (owner == token_id) return Status::Ok();
    return InsertClaim(c, token_id, worker_name);
  });
}

}  // namespace xv::store
