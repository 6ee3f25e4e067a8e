// ProcessHarness: real processes for end-to-end tests. ChildGuard starts a long-running program
// (xvd, xv-worker) with its output in a log file and stops it (TERM, then KILL) when it goes out of
// scope, so a failing test never leaves processes behind. RunCommand runs a short program (xvctl)
// to completion and captures its output.
// Thread-safety: none; one test thread.
#pragma once

#include <sys/types.h>

#include <string>
#include <thread>
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
  // Fault injection: sends `sig` to the process only (not its group, so a worker's trainer lives
  // on) and, for SIGKILL, reaps it; returns the wait status (0 when it is still running, -1 if
  // not started). The guard then owns nothing.
  int Kill(int sig);
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

// Runs argv to completion (killed after timeout_s). argv[0] without a '/' is looked up in PATH.
CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s = 60,
                         const std::vector<std::pair<std::string, std::string>>& env = {});

// Waits until `path` exists (a socket, a pid file); false after timeout_s.
bool WaitForPath(const std::string& path, double timeout_s);

// Waits until something accepts connections on the unix socket `path` (a stale socket file left by
// a killed daemon does not count); false after timeout_s.
bool WaitForUnixListener(const std::string& path, double timeout_s);

// TcpRelay: forwards every TCP connection accepted on listen_host:port to target_host:target_port,
// byte for byte, on its own thread (one poll loop for all connections). For tests that need a
// daemon reachable on an address it does not listen on (a veth address, while xvd only listens on
// loopback). Stop() (and the destructor) closes the listener and every connection.
class TcpRelay {
 public:
  TcpRelay() = default;
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;
  // Binds listen_host:listen_port (0: the kernel picks; see port()). False with `error` set when
  // the address cannot be bound.
  bool Start(const std::string& listen_host, int listen_port, const std::string& target_host,
             int target_port, std::string* error);
  int port() const { return port_; }
  void Stop();

 private:
  void Loop();
  int listen_fd_ = -1;
  int wake_fd_[2] = {-1, -1};
  int port_ = 0;
  std::string target_host_;
  int target_port_ = 0;
  std::thread thread_;
};

// Last `max_bytes` of a file, for failure messages.
std::string FileTail(const std::string& path, size_t max_bytes = 4000);

}  // namespace xv::e2e
