// Database: opening, the write fault and WAL upkeep. See database.h.
#include "daemon/store/database.h"

#include <spdlog/spdlog.h>
#include <sqlite3.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "daemon/store/embedded_migrations.h"
#include "daemon/store/event_log.h"
#include "daemon/store/migration_runner.h"

namespace xv::store {
namespace {

// Read-only connections of a read-write database (ReaderPool).
constexpr int kReaders = 4;

int64_t SteadyMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// PRAGMA integrity_check on a read-only connection of its own: *result is "ok" for a sound file,
// "" when it gave no answer (several problems: the first, "; " and how many more). Gives up with
// Cancelled once `stop` is set.
Status RunIntegrityCheck(const std::string& path, std::atomic<bool>* stop, std::string* result) {
  std::unique_ptr<SqliteConnection> conn;
  XV_RETURN_IF_ERROR(SqliteConnection::Open(path, SqliteConnection::Mode::kReadOnly, &conn));
  sqlite3_progress_handler(
      conn->raw(), 10000,
      [](void* flag) -> int { return static_cast<std::atomic<bool>*>(flag)->load() ? 1 : 0; },
      stop);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn->Prepare("PRAGMA integrity_check", &st));
  result->clear();
  int problems = 0;
  for (bool row = true;;) {
    Status s = st.Step(&row);
    if (!s.ok() && stop->load()) return Status::Cancelled("integrity_check: stopped");
    XV_RETURN_IF_ERROR(s);
    if (!row) break;
    if (++problems == 1) *result = st.ColumnText(0);
  }
  if (problems > 1) *result += "; " + std::to_string(problems - 1) + " more";
  return Status::Ok();
}

// Read-write: the migrations bring the file up to date (reading its schema: a file that is not a
// database, or whose schema is corrupt, fails here with DataLoss). The full integrity check runs
// after, in the background (Database::IntegrityCheck). *from: the version found (0: a new file).
Status PrepareWritable(SqliteConnection* conn, int* from, int* version) {
  return ApplyMigrations(conn, EmbeddedMigrations(), from, version);
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

Database::Database(std::unique_ptr<SqliteConnection> conn, std::unique_ptr<ReaderPool> readers,
                   std::unique_ptr<WalCheckpointer> checkpointer, bool read_only, int version)
    : conn_(std::move(conn)),
      readers_(std::move(readers)),
      checkpointer_(std::move(checkpointer)),
      read_only_(read_only),
      schema_version_(version),
      path_(conn_->path()),
      writer_(conn_.get()) {}

Status Database::Open(const std::string& path, Access access, std::unique_ptr<Database>* out) {
  const bool read_only = access == Access::kReadOnly;
  std::unique_ptr<SqliteConnection> conn;
  XV_RETURN_IF_ERROR(SqliteConnection::Open(
      path, read_only ? SqliteConnection::Mode::kReadOnly : SqliteConnection::Mode::kReadWrite,
      &conn));
  int version = 0, from = 0;
  if (read_only) {
    XV_RETURN_IF_ERROR(CheckReadableSchema(path, conn.get(), &version));
  } else {
    XV_RETURN_IF_ERROR(PrepareWritable(conn.get(), &from, &version));
    // What the migrations wrote (a new file's whole schema, or a rebuilt table) goes into the file
    // now, and the WAL starts empty: the commit listener's bound counts from there.
    if (version != from)
      XV_RETURN_IF_ERROR(conn->CheckpointWal(/*truncate=*/true, nullptr, nullptr));
  }
  // Readers open once the schema is in place. Four serve the daemon's gRPC threads and scheduler
  // on a small machine; a read waits only while all four are lent.
  std::unique_ptr<ReaderPool> readers;
  XV_RETURN_IF_ERROR(ReaderPool::Open(path, read_only ? 2 : kReaders, &readers));
  std::unique_ptr<WalCheckpointer> checkpointer;
  if (!read_only) XV_RETURN_IF_ERROR(WalCheckpointer::Open(path, &checkpointer));
  out->reset(new Database(std::move(conn), std::move(readers), std::move(checkpointer), read_only,
                          version));
  if (!read_only && from > 0) {  // a file this call created holds nothing to check
    Database* db = out->get();
    db->integrity_running_ = true;
    db->integrity_thread_ = std::thread([db] { db->CheckIntegrityInBackground(); });
  }
  return Status::Ok();
}

Database::~Database() {
  stopping_ = true;
  if (integrity_thread_.joinable()) integrity_thread_.join();
}

void Database::CheckIntegrityInBackground() {
  // Background work: this thread yields the CPU to the daemon's own (Linux nice is per thread).
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(syscall(SYS_gettid)), 19) != 0) {
    spdlog::debug("integrity_check: could not lower the thread's priority");
  }
  const auto t0 = std::chrono::steady_clock::now();
  std::string result;
  Status s = IntegrityCheck(&result);
  integrity_running_ = false;
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!s.ok()) {
    if (s.code() != Status::Code::kCancelled) {
      spdlog::error("{}: integrity_check could not run: {}", path_, s.ToString());
    }
  } else if (result == "ok") {
    spdlog::info("{}: integrity_check ok ({:.1f} s)", path_, seconds);
  } else {
    spdlog::error(
        "{}: integrity_check failed ({:.1f} s): {}; the daemon stays in read-only mode "
        "(restore a backup or move the file away)",
        path_, seconds, result);
  }
}

Status Database::CheckWritable() const {
  if (read_only_) return Status::FailedPrecondition(path_ + ": store opened read-only");
  return Status::Ok();
}

Status Database::IntegrityCheck(std::string* result) {
  XV_RETURN_IF_ERROR(RunIntegrityCheck(path_, &stopping_, result));
  if (*result == "ok") return Status::Ok();
  MutexLock lock(&fault_mu_);
  if (!read_only_ && integrity_fault_.empty()) {
    integrity_fault_ = "integrity_check failed: " + (result->empty() ? "no answer" : *result) +
                       " (restore a backup or move the file away)";
  }
  return Status::Ok();
}

void Database::SetCommitListener(std::function<void()> on_commit, int checkpoint_pages) {
  MutexLock lock(&mu_);
  conn_->SetCommitHook([this, on_commit = std::move(on_commit), checkpoint_pages](int wal_pages) {
    last_commit_ms_ = SteadyMs();
    truncated_since_commit_ = false;
    if (on_commit) on_commit();
    if (checkpoint_pages <= 0 || checkpointer_ == nullptr) return;
    if (wal_pages < checkpoint_pages) {
      if (wal_pages >= checkpoint_pages / 2) checkpointer_->Request();
      return;
    }
    // The bound: one checkpoint runs at a time, so the background one ends first. This runs inside
    // the writer's COMMIT, under mu_ (the analysis cannot see it): writer_ is conn_.
    checkpointer_->Wait();
    int pages = 0, copied = 0;
    const Status s = writer_->CheckpointWal(/*truncate=*/false, &pages, &copied);
    spdlog::debug("{}: WAL at {} pages: checkpoint(PASSIVE) copied {} ({})", path_, pages, copied,
                  s.ToString());
  });
}

Status Database::CheckpointWal(bool truncate, int* wal_pages, int* checkpointed) {
  MutexLock lock(&mu_);
  // One checkpoint runs at a time: a background one still running would make this one BUSY. No
  // new one is asked for meanwhile (only commits ask, and they need mu_).
  if (checkpointer_ != nullptr) checkpointer_->Wait();
  return conn_->CheckpointWal(truncate, wal_pages, checkpointed);
}

Status Database::MaintainWal(std::chrono::milliseconds interval, std::chrono::milliseconds idle) {
  if (read_only_) return Status::Ok();
  const int64_t now = SteadyMs();
  if (last_checkpoint_ms_ == 0) last_checkpoint_ms_ = now;
  const bool quiet = now - last_commit_ms_ >= idle.count();
  // A TRUNCATE checkpoint waits (busy_timeout, holding mu_) for every reader to leave the WAL:
  // not while the integrity check reads for seconds.
  const bool truncate = quiet && !truncated_since_commit_ && !integrity_running_;
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

std::string Database::WriteFault() const {
  {
    MutexLock lock(&fault_mu_);
    if (!integrity_fault_.empty()) return integrity_fault_;
  }
  return writer_->write_fault();
}

Status Database::CheckAcceptsNewWorkLocked() const {
  const std::string fault = WriteFault();
  if (fault.empty()) return Status::Ok();
  return Status::FailedPrecondition("the daemon is in read-only mode: the database " + path_ +
                                    " cannot take writes (" + fault +
                                    "); new work is refused until a write succeeds again (free "
                                    "disk space or fix the file's permissions; xvd retries)");
}

Status Database::RetryWrites(bool* writable) {
  *writable = false;
  if (read_only_) return Status::Ok();
  {
    MutexLock lock(&fault_mu_);
    if (!integrity_fault_.empty()) return Status::Ok();  // for good
  }
  MutexLock lock(&mu_);
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
