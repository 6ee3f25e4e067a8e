// SqliteConnection and SqliteStatement: a thin RAII layer over the sqlite3 C API with Status
// returns. Only bound parameters reach SQL; nothing here formats values into statement text.
//
// Compiled statements are cached: a SqliteStatement returns its sqlite3_stmt to the connection
// when it is destroyed (reset, bindings cleared), and the next Prepare of the same SQL text takes
// it back instead of compiling again (at most kMaxIdleStatements idle ones are kept; the hot
// paths, e.g. one trainer event, run the same few statements thousands of times a second).
//
// Thread-safety: a SqliteConnection and its statements are NOT thread-safe; the owner serialises
// all use (Database holds one mutex around its connection). Only the idle-statement cache has a
// lock of its own, so a statement may be destroyed after the owner's lock was released.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "common/status.h"

struct sqlite3;
struct sqlite3_stmt;

namespace xv::store {

class SqliteStatement;

class SqliteConnection {
 public:
  enum class Mode { kReadWrite, kReadOnly };

  // Opens (read-write: creating) the database file at `path`. Read-write connections get WAL,
  // foreign_keys=ON, synchronous=FULL and busy_timeout; read-only ones get busy_timeout and
  // query_only.
  static Status Open(const std::string& path, Mode mode, std::unique_ptr<SqliteConnection>* out);
  ~SqliteConnection();
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  // Runs one or more statements without parameters (schema text, pragmas).
  Status Exec(const std::string& sql);
  // Compiles one statement, or takes an idle compiled one of the same text from the cache. The
  // statement must not outlive this connection.
  Status Prepare(const std::string& sql, SqliteStatement* out);
  // Idle compiled statements kept for reuse, at most.
  static constexpr size_t kMaxIdleStatements = 256;

  // BEGIN IMMEDIATE (takes the write lock now, waiting up to busy_timeout), COMMIT, ROLLBACK.
  Status BeginImmediate();
  Status Commit();
  void Rollback();

  int64_t LastInsertRowId() const;
  int Changes() const;
  bool read_only() const { return mode_ == Mode::kReadOnly; }
  const std::string& path() const { return path_; }
  sqlite3* raw() { return db_; }

  // A Status for the connection's last error, prefixed with `what`. An error that says the file
  // cannot take writes (SQLITE_FULL, SQLITE_READONLY, SQLITE_IOERR, SQLITE_CANTOPEN) is also
  // remembered as the write fault until ClearWriteFault().
  Status LastError(const std::string& what) const;
  // "" while writes work; else the cause of the last write failure, e.g. "database or disk is
  // full".
  // (Thread-safe, unlike the rest: Database reads it without its writer's mutex.)
  std::string write_fault() const {
    std::lock_guard<std::mutex> lock(fault_mu_);
    return write_fault_;
  }
  void ClearWriteFault() {
    std::lock_guard<std::mutex> lock(fault_mu_);
    write_fault_.clear();
  }

  // After every commit `on_commit` runs on the committing thread, with the WAL's size in pages. It
  // may checkpoint through this connection (CheckpointWal) and must run nothing else on it. It
  // replaces SQLite's own auto-checkpoint (a PASSIVE checkpoint from 1000 pages on): checkpoints
  // are the hook's to make.
  void SetCommitHook(std::function<void(int wal_pages)> on_commit);
  // PRAGMA wal_checkpoint(PASSIVE or TRUNCATE): *wal_pages receives the WAL's size in pages before,
  // *checkpointed how many were copied. TRUNCATE also empties the -wal file when no reader holds
  // it.
  Status CheckpointWal(bool truncate, int* wal_pages, int* checkpointed);

 private:
  friend class SqliteStatement;  // gives its compiled statement back (ReturnIdle)
  SqliteConnection(sqlite3* db, std::string path, Mode mode)
      : db_(db), path_(std::move(path)), mode_(mode) {}
  static int WalHook(void* self, sqlite3* db, const char* name, int pages);
  void NoteFault(int rc, const std::string& msg) const;
  // Takes an idle statement of text `sql` from the cache; nullptr when none.
  sqlite3_stmt* TakeIdle(const std::string& sql);
  // A statement's owner is done with it: reset, kept for the next Prepare of its text (finalized
  // when the cache is full).
  void ReturnIdle(sqlite3_stmt* stmt);

  sqlite3* db_;
  std::string path_;
  Mode mode_;
  mutable std::mutex fault_mu_;  // guards write_fault_ only (a leaf lock)
  mutable std::string write_fault_;
  std::function<void(int wal_pages)> on_commit_;
  std::mutex idle_mu_;  // guards idle_ only (a leaf lock: nothing is called while it is held)
  std::unordered_multimap<std::string, sqlite3_stmt*> idle_;  // by SQL text
};

// One compiled statement. Bind indexes are 1-based (sqlite convention). Step() returns true while a
// row is available; Column* read the current row (0-based).
class SqliteStatement {
 public:
  SqliteStatement() = default;
  ~SqliteStatement();
  SqliteStatement(SqliteStatement&& o) noexcept;
  SqliteStatement& operator=(SqliteStatement&& o) noexcept;
  SqliteStatement(const SqliteStatement&) = delete;
  SqliteStatement& operator=(const SqliteStatement&) = delete;

  SqliteStatement& Bind(int index, int64_t v);
  SqliteStatement& Bind(int index, int v) { return Bind(index, static_cast<int64_t>(v)); }
  SqliteStatement& Bind(int index, double v);
  // Text is bound as valid UTF-8: invalid sequences are replaced by U+FFFD
  // (common/untrusted_text.h).
  SqliteStatement& Bind(int index, const std::string& v);
  SqliteStatement& Bind(int index, const char* v) { return Bind(index, std::string(v)); }
  // Bind(index, std::string) without the copy: `v` must stay alive and unchanged until the
  // statement has run or is reset (invalid UTF-8 is still repaired, into a copy).
  SqliteStatement& BindUnowned(int index, std::string_view v);
  SqliteStatement& BindNull(int index);
  SqliteStatement& Bind(int index, const std::optional<double>& v) {
    return v ? Bind(index, *v) : BindNull(index);
  }
  SqliteStatement& Bind(int index, const std::optional<int64_t>& v) {
    return v ? Bind(index, *v) : BindNull(index);
  }

  // Advances to the next row: *has_row is true when a row is available, false when done.
  Status Step(bool* has_row);
  // Runs a statement that returns no rows (INSERT/UPDATE/DELETE) to completion.
  Status Run();
  Status Reset();
  // True once Prepare filled it (until it is moved from).
  bool prepared() const { return stmt_ != nullptr; }

  bool IsNull(int col) const;
  int64_t ColumnInt(int col) const;
  double ColumnDouble(int col) const;
  // Always valid UTF-8: text stored before the store edge sanitized is repaired on read.
  std::string ColumnText(int col) const;

 private:
  friend class SqliteConnection;
  // Gives the compiled statement back to its connection's cache.
  void Release();
  // Bind and BindUnowned: `copy` false binds valid text without a copy.
  SqliteStatement& BindText(int index, std::string_view v, bool copy);
  sqlite3_stmt* stmt_ = nullptr;
  SqliteConnection* conn_ = nullptr;
  Status bind_error_;
};

// Runs `body` inside BEGIN IMMEDIATE .. COMMIT; rolls back when it returns an error.
template <typename Body>
Status InWriteTransaction(SqliteConnection* conn, Body&& body) {
  XV_RETURN_IF_ERROR(conn->BeginImmediate());
  Status s = body();
  if (!s.ok()) {
    conn->Rollback();
    return s;
  }
  s = conn->Commit();
  if (!s.ok()) conn->Rollback();
  return s;
}

}  // namespace xv::store
