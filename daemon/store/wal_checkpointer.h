// WalCheckpointer: PASSIVE checkpoints of a database's WAL on a thread and a connection of their
// own, so that copying committed pages back into the database file (reading them from the WAL,
// writing and syncing the file) no longer runs on the writer's thread between its transactions.
// Measured on the 2-core development machine, those copies were about a seventh of the writer
// thread's time while 64 workers streamed step events (bench/README.md).
//
// SQLite lets one checkpoint run beside the writer and the readers: it copies the frames committed
// when it starts, and the writer goes on appending. The WAL starts over from its beginning only
// when a writer finds every frame copied; Database's commit listener keeps the bound on the WAL
// (SetCommitListener): it asks for a checkpoint here from half its threshold on, and at the
// threshold waits for this one (Wait) and copies what is left itself.
//
// Thread-safety: Request and Wait may be called from any thread.
#pragma once

#include <condition_variable>
#include <memory>
#include <string>
#include <thread>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"
#include "daemon/store/sqlite_connection.h"

namespace xv::store {

class WalCheckpointer {
 public:
  // Opens a read-write connection of its own to `path` (an existing database in WAL mode) and
  // starts the thread.
  static Status Open(const std::string& path, std::unique_ptr<WalCheckpointer>* out);
  ~WalCheckpointer();  // ends the thread (a checkpoint running is finished first)
  WalCheckpointer(const WalCheckpointer&) = delete;
  WalCheckpointer& operator=(const WalCheckpointer&) = delete;

  // Asks for a PASSIVE checkpoint; never waits. Requests made while one runs are served by one
  // more checkpoint after it.
  void Request() LOCKS_EXCLUDED(mu_);
  // Waits until no checkpoint runs or is asked for.
  void Wait() LOCKS_EXCLUDED(mu_);
  // Checkpoints run so far (for tests and the debug log).
  int64_t checkpoints() LOCKS_EXCLUDED(mu_);

 private:
  explicit WalCheckpointer(std::unique_ptr<SqliteConnection> conn);
  void Run() LOCKS_EXCLUDED(mu_);

  const std::unique_ptr<SqliteConnection> conn_;  // used by the thread only
  Mutex mu_;
  std::condition_variable_any cv_;
  bool requested_ GUARDED_BY(mu_) = false;
  bool running_ GUARDED_BY(mu_) = false;
  bool stopping_ GUARDED_BY(mu_) = false;
  int64_t checkpoints_ GUARDED_BY(mu_) = 0;
  std::thread thread_;
};

}  // namespace xv::store
