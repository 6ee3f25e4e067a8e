#include "daemon/store/sqlite_connection.h"

#include <sqlite3.h>

#include <spdlog/spdlog.h>

#include <utility>

#include "common/untrusted_text.h"

namespace xv::store {
namespace {

constexpr int kBusyTimeoutMs = 5000;

Status CodeToStatus(int rc, const std::string& msg) {
  switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
      return Status::Unavailable(msg);
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_AUTH:
      return Status::FailedPrecondition(msg);
    case SQLITE_FULL:
      return Status::ResourceExhausted(msg);
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB:
      return Status::DataLoss(msg);
    case SQLITE_CONSTRAINT:
      return Status::AlreadyExists(msg);
    case SQLITE_CANTOPEN:
    case SQLITE_IOERR:
      return Status::IoError(msg);
    default:
      return Status::Internal(msg);
  }
}

// SQLite's process-wide settings, before its first connection. Memory statistics off: with them
// on (the default), every allocation takes one global mutex (0.2 us of the 3.5 us of CPU that a
// one-row event insert costs with SQLite 3.40, built without lookaside as Debian's is;
// bench/README.md), and nothing here reads them. sqlite3_config refuses (SQLITE_MISUSE) once
// SQLite is initialized, e.g. by a tool in the same process that opened a database directly: it
// then runs with the defaults.
void ConfigureSqliteOnce() {
  static const int configured = sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  (void)configured;
}

}  // namespace

Status SqliteConnection::Open(const std::string& path, Mode mode,
                              std::unique_ptr<SqliteConnection>* out) {
  ConfigureSqliteOnce();
  sqlite3* db = nullptr;
  int flags = SQLITE_OPEN_FULLMUTEX;
  flags |=
      mode == Mode::kReadOnly ? SQLITE_OPEN_READONLY : (SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE);
  int rc = sqlite3_open_v2(path.c_str(), &db, flags, nullptr);
  if (rc != SQLITE_OK) {
    std::string msg =
        path + ": cannot open database: " + (db ? sqlite3_errmsg(db) : sqlite3_errstr(rc));
    sqlite3_close(db);
    return CodeToStatus(rc, msg);
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  std::unique_ptr<SqliteConnection> conn(new SqliteConnection(db, path, mode));
  if (mode == Mode::kReadWrite) {
    XV_RETURN_IF_ERROR(conn->Exec("PRAGMA journal_mode=WAL"));
    XV_RETURN_IF_ERROR(conn->Exec("PRAGMA synchronous=FULL"));
    XV_RETURN_IF_ERROR(conn->Exec("PRAGMA foreign_keys=ON"));
  } else {
    XV_RETURN_IF_ERROR(conn->Exec("PRAGMA query_only=ON"));
  }
  *out = std::move(conn);
  return Status::Ok();
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, stmt] : idle_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

sqlite3_stmt* SqliteConnection::TakeIdle(const std::string& sql) {
  std::lock_guard<std::mutex> lock(idle_mu_);
  auto it = idle_.find(sql);
  if (it == idle_.end()) return nullptr;
  sqlite3_stmt* stmt = it->second;
  idle_.erase(it);
  return stmt;
}

void SqliteConnection::ReturnIdle(sqlite3_stmt* stmt) {
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  {
    std::lock_guard<std::mutex> lock(idle_mu_);
    if (idle_.size() < kMaxIdleStatements) {
      idle_.emplace(sqlite3_sql(stmt), stmt);
      return;
    }
  }
  sqlite3_finalize(stmt);
}

void SqliteConnection::NoteFault(int rc, const std::string& msg) const {
  switch (rc & 0xff) {
    case SQLITE_FULL:
    case SQLITE_READONLY:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
      if (mode_ == Mode::kReadWrite) {
        std::lock_guard<std::mutex> lock(fault_mu_);
        write_fault_ = msg;
      }
      break;
    default:
      break;
  }
}

Status SqliteConnection::LastError(const std::string& what) const {
  const int rc = sqlite3_extended_errcode(db_);
  NoteFault(rc, sqlite3_errmsg(db_));
  return CodeToStatus(rc, path_ + ": " + what + ": " + sqlite3_errmsg(db_));
}

Status SqliteConnection::Exec(const std::string& sql) {
  char* err = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
  if (rc != SQLITE_OK) {
    std::string cause = err ? err : sqlite3_errstr(rc);
    sqlite3_free(err);
    NoteFault(sqlite3_extended_errcode(db_), cause);
    return CodeToStatus(rc, path_ + ": " + cause);
  }
  return Status::Ok();
}

void SqliteConnection::SetCommitHook(std::function<void(int wal_pages)> on_commit) {
  on_commit_ = std::move(on_commit);
  sqlite3_wal_hook(db_, &SqliteConnection::WalHook, this);
}

int SqliteConnection::WalHook(void* self, sqlite3* /*db*/, const char* /*name*/, int pages) {
  auto* conn = static_cast<SqliteConnection*>(self);
  if (conn->on_commit_) conn->on_commit_(pages);
  return SQLITE_OK;
}

Status SqliteConnection::CheckpointWal(bool truncate, int* wal_pages, int* checkpointed) {
  int log = 0, done = 0;
  int rc = sqlite3_wal_checkpoint_v2(
      db_, nullptr, truncate ? SQLITE_CHECKPOINT_TRUNCATE : SQLITE_CHECKPOINT_PASSIVE, &log, &done);
  if (wal_pages) *wal_pages = log;
  if (checkpointed) *checkpointed = done;
  // SQLITE_BUSY: a reader or writer kept it from finishing; the next one catches up.
  if (rc != SQLITE_OK && rc != SQLITE_BUSY) return LastError("wal_checkpoint");
  return Status::Ok();
}

Status SqliteConnection::Prepare(const std::string& sql, SqliteStatement* out) {
  sqlite3_stmt* stmt = TakeIdle(sql);
  if (stmt == nullptr) {
    const int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                                      SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    if (rc != SQLITE_OK) return LastError("prepare \"" + sql.substr(0, 60) + "\"");
  }
  *out = SqliteStatement();
  out->stmt_ = stmt;
  out->conn_ = this;
  return Status::Ok();
}

Status SqliteConnection::BeginImmediate() { return Exec("BEGIN IMMEDIATE"); }
Status SqliteConnection::Commit() { return Exec("COMMIT"); }
void SqliteConnection::Rollback() {
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
}

int64_t SqliteConnection::LastInsertRowId() const { return sqlite3_last_insert_rowid(db_); }
int SqliteConnection::Changes() const { return sqlite3_changes(db_); }

SqliteStatement::~SqliteStatement() { Release(); }

void SqliteStatement::Release() {
  if (stmt_ == nullptr) return;
  if (conn_ != nullptr) {
    conn_->ReturnIdle(std::exchange(stmt_, nullptr));
  } else {
    sqlite3_finalize(std::exchange(stmt_, nullptr));
  }
}

SqliteStatement::SqliteStatement(SqliteStatement&& o) noexcept
    : stmt_(std::exchange(o.stmt_, nullptr)),
      conn_(o.conn_),
      bind_error_(std::move(o.bind_error_)) {}

SqliteStatement& SqliteStatement::operator=(SqliteStatement&& o) noexcept {
  if (this != &o) {
    Release();
    stmt_ = std::exchange(o.stmt_, nullptr);
    conn_ = o.conn_;
    bind_error_ = std::move(o.bind_error_);
  }
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, int64_t v) {
  if (sqlite3_bind_int64(stmt_, index, v) != SQLITE_OK && bind_error_.ok())
    bind_error_ = conn_->LastError("bind parameter " + std::to_string(index));
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, double v) {
  if (sqlite3_bind_double(stmt_, index, v) != SQLITE_OK && bind_error_.ok())
    bind_error_ = conn_->LastError("bind parameter " + std::to_string(index));
  return *this;
}

// The store edge: nothing stored as text can be invalid UTF-8 (a row that cannot be put in a
// proto3 string would fail every listing holding it). Valid text is bound as is, copied by SQLite
// when `copy`; invalid text is repaired into a copy.
SqliteStatement& SqliteStatement::BindText(int index, std::string_view v, bool copy) {
  const bool valid = IsValidUtf8(v);
  const std::string repaired = valid ? std::string() : SanitizeUtf8(v);
  const std::string_view text = valid ? v : std::string_view(repaired);
  if (sqlite3_bind_text(stmt_, index, text.data(), static_cast<int>(text.size()),
                        copy || !valid ? SQLITE_TRANSIENT : SQLITE_STATIC) != SQLITE_OK &&
      bind_error_.ok())
    bind_error_ = conn_->LastError("bind parameter " + std::to_string(index));
  return *this;
}

SqliteStatement& SqliteStatement::Bind(int index, const std::string& v) {
  return BindText(index, v, /*copy=*/true);
}

SqliteStatement& SqliteStatement::BindUnowned(int index, std::string_view v) {
  return BindText(index, v, /*copy=*/false);
}

SqliteStatement& SqliteStatement::BindNull(int index) {
  if (sqlite3_bind_null(stmt_, index) != SQLITE_OK && bind_error_.ok())
    bind_error_ = conn_->LastError("bind parameter " + std::to_string(index));
  return *this;
}

Status SqliteStatement::Step(bool* has_row) {
  if (!bind_error_.ok()) return bind_error_;
  int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) {
    *has_row = true;
    return Status::Ok();
  }
  *has_row = false;
  if (rc == SQLITE_DONE) return Status::Ok();
  return conn_->LastError("step \"" + std::string(sqlite3_sql(stmt_)).substr(0, 60) + "\"");
}

Status SqliteStatement::Run() {
  bool row = false;
  do {
    XV_RETURN_IF_ERROR(Step(&row));
  } while (row);
  return Status::Ok();
}

Status SqliteStatement::Reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
  bind_error_ = Status::Ok();
  return Status::Ok();
}

bool SqliteStatement::IsNull(int col) const {
  return sqlite3_column_type(stmt_, col) == SQLITE_NULL;
}
int64_t SqliteStatement::ColumnInt(int col) const { return sqlite3_column_int64(stmt_, col); }
double SqliteStatement::ColumnDouble(int col) const { return sqlite3_column_double(stmt_, col); }
std::string SqliteStatement::ColumnText(int col) const {
  const unsigned char* t = sqlite3_column_text(stmt_, col);
  int n = sqlite3_column_bytes(stmt_, col);
  if (t == nullptr) return std::string();
  std::string_view text(reinterpret_cast<const char*>(t), static_cast<size_t>(n));
  // A database written before the store edge sanitized (issue 11) may hold invalid UTF-8: it
  // heals on read.
  return IsValidUtf8(text) ? std::string(text) : SanitizeUtf8(text);
}

}  // namespace xv::store
