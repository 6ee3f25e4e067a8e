// ChildProcess: one supervised child program (the trainer) running in its own process group, with
// its stdout and stderr connected to pipes the supervisor reads. ProcessLauncher starts them; it is
// an interface so tests can inject launch failures and misbehaving children.
//
// Thread-safety: a ChildProcess is used by one thread (the attempt runner); SignalGroup may also be
// called from another thread (it only calls kill(2)). A ProcessLauncher is safe to share.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace xv::worker {

// How a child ended: exited with a code, or killed by a signal.
struct ExitStatus {
  bool exited = false;  // true: exit_code is valid; false: term_signal is valid
  int exit_code = 0;
  int term_signal = 0;
};

// What to start. argv[0] is the program path (no PATH lookup). env_overrides are set on top of the
// parent's environment (or, with inherit_environment false, make up the whole environment);
// working_dir is "" for the parent's.
struct ChildSpec {
  std::vector<std::string> argv;
  std::vector<std::pair<std::string, std::string>> env_overrides;
  std::string working_dir;
  bool inherit_environment = true;
};

class ChildProcess {
 public:
  virtual ~ChildProcess() = default;

  // Process id of the child, which is also its process group id.
  virtual pid_t pid() const = 0;
  // Read ends of the child's stdout and stderr (non-blocking). Owned by this object; -1 once
  // CloseStdout/CloseStderr was called.
  virtual int stdout_fd() const = 0;
  virtual int stderr_fd() const = 0;
  virtual void CloseStdout() = 0;
  virtual void CloseStderr() = 0;
  // Sends `sig` to the child's whole process group. Ok when the group is already gone.
  virtual Status SignalGroup(int sig) = 0;
  // Non-blocking reap: returns true and fills *status once the child has exited (after that, true
  // with the same status on every call).
  virtual bool TryReap(ExitStatus* status) = 0;
};

class ProcessLauncher {
 public:
  virtual ~ProcessLauncher() = default;
  // Starts `spec` in a new process group with stdin from /dev/null. On success *child owns the
  // process; destroying a ChildProcess whose process is still running KILLs its group and reaps it.
  virtual Status Launch(const ChildSpec& spec, std::unique_ptr<ChildProcess>* child) = 0;
};

// The real launcher: fork + setpgid + execve.
std::unique_ptr<ProcessLauncher> NewPosixProcessLauncher();

}  // namespace xv::worker
