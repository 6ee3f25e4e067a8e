// SqliteConnection and SqliteStatement: a thin RAII layer over the sqlite3 C API with Status
// returns. Only bound parameters reach SQL; nothing here formats values into statement text.
//
// Thread-safety: a SqliteConnection and its statements are NOT thread-safe; the owner serialises
// all use (ExperimentStore holds one mutex around its connection).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

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
  // Compiles one statement. The statement must not outlive this connection.
  Status Prepare(const std::string& sql, SqliteStatement* out);

  // BEGIN IMMEDIATE (takes the write lock now, waiting up to busy_timeout), COMMIT, ROLLBACK.
  Status BeginImmediate();
  Status Commit();
  void Rollback();

  int64_t LastInsertRowId() const;
  int Changes() const;
  bool read_only() const { return mode_ == Mode::kReadOnly; }
  const std::string& path() const { return path_; }
  sqlite3* raw() { return db_; }

  // A Status for the connection's last error, prefixed with `what`.
  Status LastError(const std::string& what) const;

 private:
  SqliteConnection(sqlite3* db, std::string path, Mode mode)
      : db_(db), path_(std::move(path)), mode_(mode) {}
  sqlite3* db_;
  std::string path_;
  Mode mode_;
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
  SqliteStatement& Bind(int index, const std::string& v);
  SqliteStatement& Bind(int index, const char* v) { return Bind(index, std::string(v)); }
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

  bool IsNull(int col) const;
  int64_t ColumnInt(int col) const;
  double ColumnDouble(int col) const;
  std::string ColumnText(int col) const;

 private:
  friend class SqliteConnection;
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
