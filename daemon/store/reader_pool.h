// ReaderPool and ReadLease: read-only connections to the database file, lent one read at a time,
// so that reads (the API's lists and lookups, Status, the scheduler's queue) run beside the single
// writer and beside each other instead of queueing behind the writer's mutex. SQLite's WAL mode
// lets a reader see every transaction committed before each of its statements starts while the
// writer goes on; a reader never sees a write transaction that is still open.
//
// A lease gives its connection back when destroyed. Statements prepared on a lease's connection
// must be destroyed before the lease (declare the lease first). A read of several statements on
// one lease is not one snapshot: each statement sees what was committed when it started.
//
// Thread-safety: ReaderPool::Lend may be called from any thread; it waits while every connection
// is lent. A ReadLease belongs to one thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/store/sqlite_connection.h"

namespace xv::store {

class ReaderPool;

class ReadLease {
 public:
  ReadLease(ReaderPool* pool, std::unique_ptr<SqliteConnection> conn)
      : pool_(pool), conn_(std::move(conn)) {}
  ~ReadLease();
  ReadLease(ReadLease&& o) noexcept = default;
  ReadLease(const ReadLease&) = delete;
  ReadLease& operator=(const ReadLease&) = delete;
  ReadLease& operator=(ReadLease&&) = delete;

  // The lent connection (read-only: every write fails).
  SqliteConnection* conn() const { return conn_.get(); }

 private:
  ReaderPool* pool_;
  std::unique_ptr<SqliteConnection> conn_;
};

class ReaderPool {
 public:
  // Opens `size` read-only connections to the existing database at `path`.
  static Status Open(const std::string& path, int size, std::unique_ptr<ReaderPool>* out);

  // Lends a connection for one read; waits while all are lent.
  ReadLease Lend() LOCKS_EXCLUDED(mu_);

 private:
  friend class ReadLease;  // gives its connection back
  ReaderPool() = default;
  void GiveBack(std::unique_ptr<SqliteConnection> conn) LOCKS_EXCLUDED(mu_);

  Mutex mu_;
  std::condition_variable_any returned_;  // signalled when a connection is given back
  std::vector<std::unique_ptr<SqliteConnection>> idle_ GUARDED_BY(mu_);
};

}  // namespace xv::store
