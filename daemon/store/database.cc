// Database: opening, the write fault and WAL upkeep. See database.h.
#include "daemon/store/database.h"

#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>

#include "daemon/store/embedded_migrations.h"
#include "daemon/store/event_log.h"
#include "daemon/store/migration_runner.h"

namespace xv::store {
namespace {

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// PRAGMA integrity_check on `conn`: *result is "ok" for a sound file, "" when it gave no answer.
Status RunIntegrityCheck(SqliteConnection* conn, std::string* result) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn->Prepare("PRAGMA integrity_check", &st));
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *result = row ? st.ColumnText(0) : "";
  return Status::Ok();
}

// Read-write: the file must pass the integrity check; then the migrations bring it up to date.
Status PrepareWritable(const std::string& path, SqliteConnection* conn, int* version) {
  std::string result;
  XV_RETURN_IF_ERROR(RunIntegrityCheck(conn, &result));
  if (result.empty()) result = "no answer";
  if (result != "ok") {
    return Status::DataLoss(path + ": integrity_check failed: " + result +
                            " (restore a backup or move the file away)");
  }
  return ApplyMigrations(conn, EmbeddedMigrations(), nullptr, version);
}

// Read-only: the file must have a schema this binary knows.
Status CheckReadableSchema(const std::string& path, SqliteConnection* conn, int* version) {
  XV_RETURN_IF_ERROR(ReadSchemaVersion(conn, version));
  const int newest = static_cast<int>(EmbeddedMigrations().size());
  if (*version == 0) return Status::FailedPrecondition(path + ": not an xv database (no schema)");
  if (*version > newest) {
    return Status::FailedPrecondition(
        path + ": database schema version " + std::to_string(*version) +
        " is newer than this binary (knows " + std::to_string(newest) + ")");
  }
  return Status::Ok();
}

}  // namespace

Database::Database(std::unique_ptr<SqliteConnection> conn, bool read_only, int version)
    : conn_(std::move(conn)),
      read_only_(read_only),
      schema_version_(version),
      path_(conn_->path()) {}

Status Database::Open(const std::string& path, Access access, std::unique_ptr<Database>* out) {
  const bool read_only = access == Access::kReadOnly;
  std::unique_ptr<SqliteConnection> conn;
  XV_RETURN_IF_ERROR(SqliteConnection::Open(
      path, read_only ? SqliteConnection::Mode::kReadOnly : SqliteConnection::Mode::kReadWrite,
      &conn));
  int version = 0;
  if (read_only) {
    XV_RETURN_IF_ERROR(CheckReadableSchema(path, conn.get(), &version));
  } else {
    XV_RETURN_IF_ERROR(PrepareWritable(path, conn.get(), &version));
  }
  out->reset(new Database(std::move(conn), read_only, version));
  return Status::Ok();
}

Status Database::CheckWritable() const {
  if (read_only_) return Status::FailedPrecondition(path_ + ": store opened read-only");
  return Status::Ok();
}

Status Database::IntegrityCheck(std::string* result) {
  MutexLock lock(&mu_);
  return RunIntegrityCheck(conn_.get(), result);
}

void Database::SetCommitListener(std::function<void()> on_commit, int checkpoint_pages) {
  MutexLock lock(&mu_);
  conn_->SetCommitHook(
      [this, on_commit = std::move(on_commit)] {
        last_commit_ms_ = SteadyMs();
        truncated_since_commit_ = false;
        if (on_commit) on_commit();
      },
      checkpoint_pages);
}

Status Database::CheckpointWal(bool truncate, int* wal_pages, int* checkpointed) {
  MutexLock lock(&mu_);
  return conn_->CheckpointWal(truncate, wal_pages, checkpointed);
}

Status Database::MaintainWal(std::chrono::milliseconds interval, std::chrono::milliseconds idle) {
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

std::string Database::WriteFault() {
  MutexLock lock(&mu_);
  return conn_->write_fault();
}

Status Database::CheckAcceptsNewWorkLocked() const {
  const std::string& fault = conn_->write_fault();
  if (fault.empty()) return Status::Ok();
  return Status::FailedPrecondition("the daemon is in read-only mode: the database " + path_ +
                                    " cannot take writes (" + fault +
                                    "); new work is refused until a write succeeds again (free "
                                    "disk space or fix the file's permissions; xvd retries)");
}

Status Database::RetryWrites(bool* writable) {
  *writable = false;
  MutexLock lock(&mu_);
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
