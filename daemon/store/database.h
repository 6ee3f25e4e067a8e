// Database: xvd's SQLite file (DESIGN.md § Data model) as one connection behind one mutex, with
// what every table of the store shares: opening (migrations, or read-only), write transactions,
// read-only connections for reads, the write fault ("read-only mode"), WAL upkeep and the
// integrity check (in the background after opening). The
// tables (daemon/store/store.h lists them) each hold a Database* and run their SQL through it.
//
// Threading contract: every method may be called from any thread. mu_ serialises all use of the
// writer connection, so the database is its own single writer; each write operation of a table is
// one BEGIN IMMEDIATE transaction taken with mu_ held. Reads that stand alone go through Read(), a
// pool of read-only connections that WAL lets run beside the writer, without mu_. Lock order:
// submissions_mu_ (held for the whole of one submission) before mu_. A read-only database (xvctl's
// --state-dir reads) answers reads and fails every write with FailedPrecondition; it can run beside
// a live xvd because the file is in WAL mode.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/store/reader_pool.h"
#include "daemon/store/sqlite_connection.h"
#include "daemon/store/wal_checkpointer.h"

// SQL text of the current UTC time with milliseconds, as every timestamp column stores it.
#define XV_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

namespace xv::store {

class Database {
 public:
  enum class Access { kReadWrite, kReadOnly };

  // kReadWrite: opens (creating) the file, applies the embedded migrations and, for a file that
  // existed, starts the full integrity check in the background (IntegrityCheck); fails when the
  // file is not an SQLite database, its schema cannot be read, or it is newer than this binary.
  // kReadOnly: opens an existing file; fails when it does not exist, or has no or a newer schema.
  static Status Open(const std::string& path, Access access, std::unique_ptr<Database>* out);
  ~Database();  // stops a background integrity check that is still running

  bool read_only() const { return read_only_; }
  int schema_version() const { return schema_version_; }
  const std::string& path() const { return path_; }

  // The connection's mutex: a table takes it (MutexLock lock(db_->mu())) around each operation.
  Mutex* mu() LOCK_RETURNED(mu_) { return &mu_; }
  // Held for the whole of one submission (SubmissionTable), taken before mu().
  Mutex* submissions_mu() LOCK_RETURNED(submissions_mu_) { return &submissions_mu_; }
  // The connection, for the SQL of a table operation that holds mu().
  SqliteConnection* conn() EXCLUSIVE_LOCKS_REQUIRED(mu_) { return conn_.get(); }
  // A read-only connection lent for one read that needs no write after it in the same
  // transaction (reader_pool.h): it runs beside the writer and other readers, never behind mu().
  ReadLease Read() { return readers_->Lend(); }

  // FailedPrecondition naming the path when the database was opened read-only.
  Status CheckWritable() const;
  // New work (submissions, campaigns, assignments) is refused while the connection has a write
  // fault: FailedPrecondition naming the cause and the path.
  Status CheckAcceptsNewWorkLocked() const EXCLUSIVE_LOCKS_REQUIRED(mu_) LOCKS_EXCLUDED(fault_mu_);

  // PRAGMA integrity_check on a read-only connection of its own, beside the writer and the
  // readers: *result is "ok" for a sound file. Any other answer also puts the database in
  // read-only mode for good (WriteFault names it, new work is refused, RetryWrites does not clear
  // it): nothing more is written into a file that needs a backup restored. A read-write Database
  // runs it once in the background from Open, so that xvd serves at once on a big file (the
  // check reads every page: 7.5 s for 677 MB from the page cache, 76 s from a busy disk).
  Status IntegrityCheck(std::string* result) LOCKS_EXCLUDED(fault_mu_);
  // After every commit `on_commit` runs on the writing thread (it must only signal). The WAL is
  // copied back into the database (PASSIVE checkpoints) by a thread of its own
  // (wal_checkpointer.h) once it holds half of `checkpoint_pages` pages; at `checkpoint_pages` the
  // committing thread waits for that one and copies the rest itself, so that the WAL holds at most
  // `checkpoint_pages` pages and one transaction. Call once, before use.
  void SetCommitListener(std::function<void()> on_commit, int checkpoint_pages = 1000)
      LOCKS_EXCLUDED(mu_);
  // Periodic WAL upkeep, called often (e.g. every scheduling tick): a PASSIVE checkpoint when
  // `interval` passed since the last one, a TRUNCATE one once nothing was committed for `idle`.
  Status MaintainWal(std::chrono::milliseconds interval, std::chrono::milliseconds idle)
      LOCKS_EXCLUDED(mu_);
  // "" while the database takes writes; else the cause of the last failed write (disk full,
  // read-only file, I/O error). While set, new work is refused (CheckAcceptsNewWorkLocked); reads
  // keep working.
  // Never waits for the writer.
  std::string WriteFault() const LOCKS_EXCLUDED(fault_mu_);
  // While a write fault is set: tries one small write (a 'writable' daemon event); when it commits
  // the fault is cleared and *writable = true.
  Status RetryWrites(bool* writable) LOCKS_EXCLUDED(mu_);

 private:
  Database(std::unique_ptr<SqliteConnection> conn, std::unique_ptr<ReaderPool> readers,
           std::unique_ptr<WalCheckpointer> checkpointer, bool read_only, int version);
  // Checkpoints now; see SqliteConnection::CheckpointWal.
  Status CheckpointWal(bool truncate, int* wal_pages, int* checkpointed) LOCKS_EXCLUDED(mu_);
  // The background integrity check started by Open: logs the outcome.
  void CheckIntegrityInBackground();

  // Taken (before mu_) for the whole of a submission: no other submission can start to use a
  // recipe row that a failing one deletes again.
  Mutex submissions_mu_ ACQUIRED_BEFORE(mu_);
  Mutex mu_;
  std::unique_ptr<SqliteConnection> conn_ GUARDED_BY(mu_);
  // Closed before conn_ (declared after it): the writer's close, the last one, checkpoints the WAL.
  const std::unique_ptr<ReaderPool> readers_;
  // Null when read-only. Stopped and closed before conn_ (declared after it).
  const std::unique_ptr<WalCheckpointer> checkpointer_;
  const bool read_only_;
  const int schema_version_;
  const std::string path_;
  std::atomic<int64_t> last_commit_ms_{0};      // steady clock, set by the commit listener
  std::atomic<int64_t> last_checkpoint_ms_{0};  // steady clock of the last periodic checkpoint
  std::atomic<bool> truncated_since_commit_{true};
  // The writer connection, for its write_fault() only (thread-safe): WriteFault() must not wait
  // behind a write (Status and every scheduling pass ask).
  SqliteConnection* const writer_;
  mutable Mutex fault_mu_ ACQUIRED_AFTER(mu_);
  // "" until an integrity check answers other than "ok"; then the cause, for good.
  std::string integrity_fault_ GUARDED_BY(fault_mu_);
  std::atomic<bool> stopping_{false};           // the destructor asks a running check to give up
  std::atomic<bool> integrity_running_{false};  // no TRUNCATE checkpoint meanwhile (it would wait)
  std::thread integrity_thread_;
};

}  // namespace xv::store
