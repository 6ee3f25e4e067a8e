// ProcessHarness: real processes for end-to-end tests. ChildGuard starts a long-running program
// (xvd, xv-worker) with its output in a log file and stops it (TERM, then KILL) when it goes out of
// scope, so a failing test never leaves processes behind. RunCommand runs a short program (xvctl)
// to completion and captures its output.
// Thread-safety: none; one test thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <utility>
#include <vector>

namespace xv::e2e {

// $XV_BINARY_DIR/bin/<name> (or ./bin/<name> when unset).
std::string BinaryPath(const std::string& name);
// $XV_SOURCE_DIR/<relative>.
std::string SourcePath(const std::string& relative);

class ChildGuard {
 public:
  ChildGuard() = default;
  // Starts argv[0] with extra environment, stdout and stderr appended to `log_path`.
  ChildGuard(const std::vector<std::string>& argv,
             const std::vector<std::pair<std::string, std::string>>& env,
             const std::string& log_path);
  ~ChildGuard();
  ChildGuard(ChildGuard&& other) noexcept;
  ChildGuard& operator=(ChildGuard&& other) noexcept;
  ChildGuard(const ChildGuard&) = delete;
  ChildGuard& operator=(const ChildGuard&) = delete;

  pid_t pid() const { return pid_; }
  // Still running (not reaped)?
  bool Alive();
  // SIGTERM, wait up to `grace_s`, then SIGKILL; returns the wait status (or -1 if not started).
  int Stop(double grace_s = 5.0);
  const std::string& log_path() const { return log_path_; }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
  int status_ = 0;
  std::string log_path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal or timed out
  std::string out;
  std::string err;
};

// Runs argv to completion (killed after timeout_s).
CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s = 60,
                         const std::vector<std::pair<std::string, std::string>>& env = {});

// Waits until `path` exists (a socket, a pid file); false after timeout_s.
bool WaitForPath(const std::string& path, double timeout_s);

// Last `max_bytes` of a file, for failure messages.
std::string FileTail(const std::string& path, size_t max_bytes = 4000);

}  // namespace xv::e2e
