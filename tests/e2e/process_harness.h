// ProcessHarness: real processes for end-to-end tests. ChildGuard starts a long-running program
// (xvd, xv-worker) with its output in a log file and stops it (TERM, then KILL) when it goes out of
// scope, so a failing test never leaves processes behind. RunCommand runs a short program (xvctl)
// to completion and captures its output.
// Thread-safety: none; one test thread.
#pragma once

#include <gtest/gtest.h>
#include <sys/types.h>

#include <filesystem>
#include <functional>
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

// The whole of a file ("" when it cannot be read).
std::string ReadFileText(const std::string& path);

// Last `max_bytes` of a file, for failure messages.
std::string FileTail(const std::string& path, size_t max_bytes = 4000);

// Polls `pred` every 50 ms until it holds or `timeout_s` passes; returns its last value.
bool WaitUntil(const std::function<bool()>& pred, double timeout_s);

// `pid` names a live process that is not a zombie.
bool ProcessRunning(int pid);

using Env = std::vector<std::pair<std::string, std::string>>;

// How Sandbox::StartWorker starts an xv-worker; every field left empty takes the default named.
struct WorkerOptions {
  std::string trainer_bin;           // --trainer-bin; default: tests/fixtures/fake_trainer.sh
  std::string data_dir;              // --data; default: the sandbox's data()
  std::string daemon;                // --daemon; default: the sandbox's daemon() (unix socket)
  std::vector<std::string> extra;    // more xv-worker arguments, appended
  std::vector<std::string> wrapper;  // a command the worker runs under, e.g. ip netns exec NS
  std::string log_name;              // output appended to <dir>/<log_name>; default <name>.log
};

// Sandbox: the scratch space of one e2e test and how its processes are started there.
//  - dir(): /tmp/xv-<tag>-<pid>-<current test name>, made fresh by the constructor with state/ (the
//    daemon's --state-dir) and data/ (the workers' --data) in it; the destructor removes it unless
//    the test failed (kept to look at). Unix socket paths are limited to 108 bytes: keep `tag`
//    short.
//  - the daemon: `xvd --state-dir <dir>/state --listen none`, socket <dir>/state/xvd.sock (address
//    daemon()), database <dir>/state/xv.db, log <dir>/xvd.log.
//  - workers: `xv-worker --device cpu`, by default running the scripted fake trainer
//    (tests/fixtures/fake_trainer.sh), work dir <dir>/work-<name>.
// The processes belong to the test's ChildGuards: declare the Sandbox before them, so that they are
// stopped before the directory goes. Construct it inside a test (it reads the running test's name).
class Sandbox {
 public:
  explicit Sandbox(const std::string& tag);
  ~Sandbox();
  Sandbox(const Sandbox&) = delete;
  Sandbox& operator=(const Sandbox&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  // <dir>/<name>, e.g. a log file.
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  const std::string& state() const { return state_; }
  std::string data() const { return Path("data"); }
  std::string socket_path() const { return state_ + "/xvd.sock"; }
  // The daemon's SQLite file, <state>/xv.db.
  std::string database_path() const { return state_ + "/xv.db"; }
  // A worker's --work-dir, <dir>/work-<worker>.
  std::string work_dir(const std::string& worker) const { return Path("work-" + worker); }
  // "unix:<state>/xvd.sock", for --daemon.
  const std::string& daemon() const { return daemon_; }

  // Success when xvd, xv-worker and xvctl are built; else a failure naming the missing one.
  static ::testing::AssertionResult BinariesBuilt();

  // Starts xvd (with `extra` appended to its arguments; a `--listen ADDR` pair there replaces the
  // default `--listen none`) into *xvd, its output appended to <dir>/xvd.log, and waits up to 30 s
  // until it accepts connections on its socket (a stale socket file left by a killed daemon does
  // not count); a failure carries the log's tail. Called again with the same `extra` after a kill,
  // it restarts the daemon on the same state directory.
  ::testing::AssertionResult StartDaemon(ChildGuard* xvd,
                                         const std::vector<std::string>& extra = {}) const;

  // xv-worker --daemon <daemon_address, default daemon()> --data <data_dir, default data()>
  //   --name <name> --device cpu --trainer-bin <trainer_bin, default the fake trainer>
  //   --work-dir <work_dir(name)>
  std::vector<std::string> WorkerArgv(const std::string& name, const std::string& trainer_bin = "",
                                      const std::string& data_dir = "",
                                      const std::string& daemon_address = "") const;
  // Starts options.wrapper + WorkerArgv(name, options...) + options.extra with `env`.
  ChildGuard StartWorker(const std::string& name, const Env& env,
                         const WorkerOptions& options) const;
  // StartWorker with the fake trainer, the arguments `extra` and the log <dir>/<log_name> (default
  // <name>.log).
  ChildGuard StartFakeWorker(const std::string& name, const Env& env,
                             const std::vector<std::string>& extra = {},
                             const std::string& log_name = "") const;

  // `xvctl prepare` into data(): a 512-token BPE vocabulary and token shards (a fifth held out for
  // validation) from the license texts every Debian system ships (/usr/share/common-licenses), the
  // small corpus the real-trainer tests train on. A failure carries xvctl's output.
  ::testing::AssertionResult PrepareTinyData() const;

  // xvctl --daemon <daemon()> --state-dir <state()> args...
  std::vector<std::string> XvctlArgv(std::vector<std::string> args) const;
  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) const;

  // For failure messages: "\n--- <name> ---\n" and the last `max_bytes` of <dir>/<name>, for each
  // name in `log_names` (e.g. {"xvd.log", "w1.log"}).
  std::string LogTails(const std::vector<std::string>& log_names, size_t max_bytes = 4000) const;

 private:
  std::filesystem::path dir_;
  std::string state_;
  std::string daemon_;
};

}  // namespace xv::e2e
