// StateDirLock: one live xvd per state directory. Holds an exclusive flock on DIR/xvd.pid (which
// holds the daemon's pid) for the life of the object; the kernel drops the lock if the process
// dies. Thread-safety: not shared.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace xv::daemon {

class StateDirLock {
 public:
  // Creates `state_dir` (0700) if needed and locks DIR/xvd.pid. FailedPrecondition naming the pid
  // when another live xvd holds it.
  static Status Acquire(const std::string& state_dir, std::unique_ptr<StateDirLock>* out);
  ~StateDirLock();  // removes the pid file and releases the lock
  StateDirLock(const StateDirLock&) = delete;
  StateDirLock& operator=(const StateDirLock&) = delete;

 private:
  StateDirLock(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}
  int fd_;
  std::string path_;
};

// Removes a stale unix socket file at `path`: only when nothing accepts connections on it. Ok when
// no file exists; FailedPrecondition when a server answers there or the path is not a socket.
Status RemoveStaleSocket(const std::string& path);

}  // namespace xv::daemon
