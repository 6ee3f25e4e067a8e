#include "tests/e2e/process_harness.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  return pid;
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
    auto t0 = Clock::now();
    while (Alive() && Since(t0) < grace_s) {
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    if (Alive()) {
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

CommandResult RunCommand(const std::vector<std::string>& argv, double timeout_s,
                         const std::vector<std::pair<std::string, std::string>>& env) {
  CommandResult res;
  char out_tmpl[] = "/tmp/xv-e2e-outXXXXXX";
  char err_tmpl[] = "/tmp/xv-e2e-errXXXXXX";
  int out_fd = ::mkstemp(out_tmpl);
  int err_fd = ::mkstemp(err_tmpl);
  pid_t pid = Spawn(argv, env, out_fd, err_fd);
  auto t0 = Clock::now();
  int st = 0;
  bool done = false;
  while (Since(t0) < timeout_s) {
    if (::waitpid(pid, &st, WNOHANG) == pid) {
      done = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  if (!done) {
    ::kill(-pid, SIGKILL);
    ::waitpid(pid, &st, 0);
  }
  ::close(out_fd);
  ::close(err_fd);
  auto slurp = [](const char* p) {
    std::ifstream f(p);
    std::stringstream ss;
    ss << f.rdbuf();
    return ss.str();
  };
  res.out = slurp(out_tmpl);
  res.err = slurp(err_tmpl);
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

std::string FileTail(const std::string& path, size_t max_bytes) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  return s.size() > max_bytes ? s.substr(s.size() - max_bytes) : s;
}

}  // namespace xv::e2e
