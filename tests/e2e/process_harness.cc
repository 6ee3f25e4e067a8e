#include "tests/e2e/process_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

namespace xv::e2e {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// fork + exec with stdout/stderr to the given fds; the child gets its own process group.
pid_t Spawn(const std::vector<std::string>& argv,
            const std::vector<std::pair<std::string, std::string>>& env, int out_fd, int err_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
    int devnull = ::open("/dev/null", O_RDONLY);
    ::dup2(devnull, 0);
    ::dup2(out_fd, 1);
    ::dup2(err_fd, 2);
    ::execvp(args[0], args.data());  // a name without '/' is looked up in PATH
    ::_exit(127);
  }
  return pid;
}

// Waits up to timeout_s for the child `pid` to exit: true, with its *status, when it did. A pidfd
// (Linux 5.3) wakes the wait at the exit itself, so a command is timed to its exit and not to a
// polling step (xv-bench-daemon times xvctl processes through RunCommand, and ChildGuard::Stop
// returns at the exit); without one it polls every millisecond.
bool WaitForExit(pid_t pid, double timeout_s, int* status) {
  const int pidfd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  const auto t0 = Clock::now();
  bool exited = false;
  while (true) {
    if (::waitpid(pid, status, WNOHANG) == pid) {
      exited = true;
      break;
    }
    const double left_s = timeout_s - Since(t0);
    if (left_s <= 0) break;
    if (pidfd >= 0) {
      pollfd readable{pidfd, POLLIN, 0};
      ::poll(&readable, 1, static_cast<int>(std::min(left_s, 1.0) * 1000) + 1);
    } else {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  }
  if (pidfd >= 0) ::close(pidfd);
  return exited;
}

}  // namespace

std::string BinaryPath(const std::string& name) {
  const char* b = std::getenv("XV_BINARY_DIR");
  return std::string(b ? b : ".") + "/bin/" + name;
}

std::string SourcePath(const std::string& relative) {
  const char* s = std::getenv("XV_SOURCE_DIR");
  return std::string(s ? s : ".") + "/" + relative;
}

ChildGuard::ChildGuard(const std::vector<std::string>& argv,
                       const std::vector<std::pair<std::string, std::string>>& env,
                       const std::string& log_path)
    : log_path_(log_path) {
  int fd = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  pid_ = Spawn(argv, env, fd, fd);
  ::close(fd);
}

ChildGuard::~ChildGuard() { Stop(); }

ChildGuard::ChildGuard(ChildGuard&& o) noexcept
    : pid_(o.pid_), reaped_(o.reaped_), status_(o.status_), log_path_(std::move(o.log_path_)) {
  o.pid_ = -1;
}

ChildGuard& ChildGuard::operator=(ChildGuard&& o) noexcept {
  if (this != &o) {
    Stop();
    pid_ = o.pid_;
    reaped_ = o.reaped_;
    status_ = o.status_;
    log_path_ = std::move(o.log_path_);
    o.pid_ = -1;
  }
  return *this;
}

bool ChildGuard::Alive() {
  if (pid_ <= 0 || reaped_) return false;
  int st = 0;
  pid_t r = ::waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = st;
    return false;
  }
  return true;
}

int ChildGuard::Stop(double grace_s) {
  if (pid_ <= 0) return -1;
  if (Alive()) {
    ::kill(pid_, SIGTERM);
    if (WaitForExit(pid_, grace_s, &status_)) {
      reaped_ = true;
    } else {
      ::kill(-pid_, SIGKILL);
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status_, 0);
      reaped_ = true;
    }
  }
  // Anything left in its process group (a trainer of a killed worker) goes too.
  ::kill(-pid_, SIGKILL);
  int st = status_;
  pid_ = -1;
  return st;
}

int ChildGuard::Kill(int sig) {
  if (pid_ <= 0 || !Alive()) return -1;
  ::kill(pid_, sig);
  if (sig != SIGKILL) return 0;
  ::waitpid(pid_, &status_, 0);
  reaped_ = true;
  pid_ = -1;
  return status_;
}

CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s,
                         const std::vector<std::pair<std::string, std::string>>& env) {
  CommandResult res;
  char out_tmpl[] = "/tmp/xv-e2e-outXXXXXX";
  char err_tmpl[] = "/tmp/xv-e2e-errXXXXXX";
  int out_fd = ::mkstemp(out_tmpl);
  int err_fd = ::mkstemp(err_tmpl);
  pid_t pid = Spawn(argv, env, out_fd, err_fd);
  int st = 0;
  const bool done = WaitForExit(pid, timeout_s, &st);
  if (!done) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &st, 0);
  }
  ::close(out_fd);
  ::close(err_fd);
  res.out = ReadFileText(out_tmpl);
  res.err = ReadFileText(err_tmpl);
  ::unlink(out_tmpl);
  ::unlink(err_tmpl);
  res.exit_code = (done && WIFEXITED(st)) ? WEXITSTATUS(st) : -1;
  if (!done) res.err += "\n[harness: killed after " + std::to_string(timeout_s) + " s]";
  return res;
}

bool WaitForPath(const std::string& path, double timeout_s) {
  auto t0 = Clock::now();
  while (Since(t0) < timeout_s) {
    if (std::filesystem::exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::filesystem::exists(path);
}

bool WaitForUnixListener(const std::string& path, double timeout_s) {
  auto t0 = Clock::now();
  do {
    int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
    bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
    ::close(fd);
    if (ok) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  } while (Since(t0) < timeout_s);
  return false;
}

TcpRelay::~TcpRelay() { Stop(); }

bool TcpRelay::Start(const std::string& listen_host, int listen_port,
                     const std::string& target_host, int target_port, std::string* error) {
  target_host_ = target_host;
  target_port_ = target_port;
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(listen_port));
  if (::inet_pton(AF_INET, listen_host.c_str(), &addr.sin_addr) != 1 ||
      ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::listen(listen_fd_, 16) != 0) {
    *error = "relay: cannot listen on " + listen_host + ":" + std::to_string(listen_port) + ": " +
             std::strerror(errno);
    ::close(listen_fd_);
    listen_fd_ = -1;
    return false;
  }
  socklen_t len = sizeof(addr);
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  if (::pipe2(wake_fd_, O_CLOEXEC) != 0) {
    *error = std::string("relay: pipe: ") + std::strerror(errno);
    return false;
  }
  thread_ = std::thread([this] { Loop(); });
  return true;
}

void TcpRelay::Stop() {
  if (thread_.joinable()) {
    char c = 'x';
    (void)!::write(wake_fd_[1], &c, 1);
    thread_.join();
  }
  for (int* fd : {&listen_fd_, &wake_fd_[0], &wake_fd_[1]}) {
    if (*fd >= 0) ::close(*fd);
    *fd = -1;
  }
}

void TcpRelay::Loop() {
  std::map<int, int> peer;  // fd -> the fd its bytes go to (both directions are entries)
  auto close_pair = [&](int fd) {
    int other = peer[fd];
    peer.erase(fd);
    peer.erase(other);
    ::close(fd);
    ::close(other);
  };
  for (;;) {
    std::vector<pollfd> fds = {{wake_fd_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const auto& [fd, other] : peer) fds.push_back({fd, POLLIN, 0});
    if (::poll(fds.data(), fds.size(), 500) < 0 && errno != EINTR) break;
    if (fds[0].revents) break;
    if (fds[1].revents & POLLIN) {
      int in = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in >= 0) {
        int out = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in to{};
        to.sin_family = AF_INET;
        to.sin_port = htons(static_cast<uint16_t>(target_port_));
        ::inet_pton(AF_INET, target_host_.c_str(), &to.sin_addr);
        if (::connect(out, reinterpret_cast<sockaddr*>(&to), sizeof(to)) == 0) {
          peer[in] = out;
          peer[out] = in;
        } else {
          ::close(in);
          ::close(out);
        }
      }
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents || !peer.count(fds[i].fd)) continue;
      char buf[16384];
      ssize_t n = ::read(fds[i].fd, buf, sizeof(buf));
      bool ok = n > 0;
      // Blocking writes: the far side is a local process that reads promptly.
      for (ssize_t off = 0; ok && off < n;) {
        ssize_t w = ::send(peer[fds[i].fd], buf + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) ok = false;
        off += w;
      }
      if (!ok) close_pair(fds[i].fd);
    }
  }
  for (const auto& [fd, other] : peer) ::close(fd);
}

std::string ReadFileText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string FileTail(const std::string& path, size_t max_bytes) {
  std::string s = ReadFileText(path);
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

bool WaitUntil(const std::function<bool()>& pred, double timeout_s) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  while (std::chrono::steady_clock::now() < end) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return pred();
}

bool ProcessRunning(int pid) {
  if (pid <= 1 || ::kill(pid, 0) != 0) return false;
  const std::string stat = ReadFileText("/proc/" + std::to_string(pid) + "/stat");
  const size_t paren = stat.rfind(')');  // the state letter follows the command name's ") "
  return paren == std::string::npos || stat.size() < paren + 3 || stat[paren + 2] != 'Z';
}

Sandbox::Sandbox(const std::string& tag) {
  const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
  dir_ = std::filesystem::path("/tmp") /
         ("xv-" + tag + "-" + std::to_string(::getpid()) + "-" + (test ? test->name() : "none"));
  std::filesystem::remove_all(dir_);
  std::filesystem::create_directories(dir_ / "state");
  std::filesystem::create_directories(dir_ / "data");
  state_ = (dir_ / "state").string();
  daemon_ = "unix:" + socket_path();
}

Sandbox::~Sandbox() {
  std::error_code ec;
  if (!::testing::Test::HasFailure()) std::filesystem::remove_all(dir_, ec);
}

::testing::AssertionResult Sandbox::BinariesBuilt() {
  for (const char* b : {"xvd", "xv-worker", "xvctl"}) {
    if (!std::filesystem::exists(BinaryPath(b))) {
      return ::testing::AssertionFailure() << BinaryPath(b) << " is not built";
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult Sandbox::StartDaemon(ChildGuard* xvd,
                                                const std::vector<std::string>& extra) const {
  std::vector<std::string> argv = {BinaryPath("xvd"), "--state-dir", state_};
  if (std::find(extra.begin(), extra.end(), "--listen") == extra.end()) {
    argv.insert(argv.end(), {"--listen", "none"});
  }
  argv.insert(argv.end(), extra.begin(), extra.end());
  *xvd = ChildGuard(argv, {}, Path("xvd.log"));
  if (!WaitForUnixListener(socket_path(), 30)) {
    return ::testing::AssertionFailure()
           << "xvd did not listen on " << socket_path() << " in 30 s:\n"
           << FileTail(Path("xvd.log"));
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::string> Sandbox::WorkerArgv(const std::string& name,
                                             const std::string& trainer_bin,
                                             const std::string& data_dir,
                                             const std::string& daemon_address) const {
  return {BinaryPath("xv-worker"),
          "--daemon",
          daemon_address.empty() ? daemon_ : daemon_address,
          "--data",
          data_dir.empty() ? data() : data_dir,
          "--name",
          name,
          "--device",
          "cpu",
          "--trainer-bin",
          trainer_bin.empty() ? SourcePath("tests/fixtures/fake_trainer.sh") : trainer_bin,
          "--work-dir",
          work_dir(name)};
}

ChildGuard Sandbox::StartWorker(const std::string& name, const Env& env,
                                const WorkerOptions& options) const {
  std::vector<std::string> argv = options.wrapper;
  std::vector<std::string> worker =
      WorkerArgv(name, options.trainer_bin, options.data_dir, options.daemon);
  argv.insert(argv.end(), worker.begin(), worker.end());
  argv.insert(argv.end(), options.extra.begin(), options.extra.end());
  return ChildGuard(argv, env, Path(options.log_name.empty() ? name + ".log" : options.log_name));
}

ChildGuard Sandbox::StartFakeWorker(const std::string& name, const Env& env,
                                    const std::vector<std::string>& extra,
                                    const std::string& log_name) const {
  WorkerOptions options;
  options.extra = extra;
  options.log_name = log_name;
  return StartWorker(name, env, options);
}

::testing::AssertionResult Sandbox::PrepareTinyData() const {
  CommandResult prep =
      RunCommand({BinaryPath("xvctl"), "prepare", "--input", "/usr/share/common-licenses", "--out",
                  data(), "--vocab-size", "512", "--val-fraction", "0.2", "--quiet"},
                 120);
  if (prep.exit_code != 0) {
    return ::testing::AssertionFailure() << "xvctl prepare exited " << prep.exit_code << ":\n"
                                         << prep.out << prep.err;
  }
  return ::testing::AssertionSuccess();
}

std::vector<std::string> Sandbox::XvctlArgv(std::vector<std::string> args) const {
  args.insert(args.begin(), {BinaryPath("xvctl"), "--daemon", daemon_, "--state-dir", state_});
  return args;
}

CommandResult Sandbox::Xvctl(std::vector<std::string> args, double timeout_s) const {
  return RunCommand(XvctlArgv(std::move(args)), timeout_s);
}

std::string Sandbox::LogTails(const std::vector<std::string>& log_names, size_t max_bytes) const {
  std::string tails;
  for (const std::string& name : log_names) {
    tails += "\n--- " + name + " ---\n" + FileTail(Path(name), max_bytes);
  }
  return tails;
}

}  // namespace xv::e2e
