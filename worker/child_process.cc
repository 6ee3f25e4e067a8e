#include "worker/child_process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <map>

extern char** environ;

namespace xv::worker {
namespace {

std::string ErrnoText(int err) { return std::string(strerror(err)); }

class PosixChildProcess : public ChildProcess {
 public:
  PosixChildProcess(pid_t pid, int out_fd, int err_fd)
      : pid_(pid), out_fd_(out_fd), err_fd_(err_fd) {}
  ~PosixChildProcess() override {
    CloseStdout();
    CloseStderr();
    ExitStatus status;
    if (!TryReap(&status)) {
      ::kill(-pid_, SIGKILL);
      int ws = 0;
      while (::waitpid(pid_, &ws, 0) < 0 && errno == EINTR) {
      }
    }
  }

  pid_t pid() const override { return pid_; }
  int stdout_fd() const override { return out_fd_; }
  int stderr_fd() const override { return err_fd_; }
  void CloseStdout() override {
    if (out_fd_ >= 0) ::close(out_fd_);
    out_fd_ = -1;
  }
  void CloseStderr() override {
    if (err_fd_ >= 0) ::close(err_fd_);
    err_fd_ = -1;
  }

  Status SignalGroup(int sig) override {
    if (::kill(-pid_, sig) == 0 || errno == ESRCH) return Status::Ok();
    return Status::Internal("kill(-" + std::to_string(pid_) + ", " + std::to_string(sig) +
                            "): " + ErrnoText(errno));
  }

  bool TryReap(ExitStatus* status) override {
    if (!reaped_) {
      int ws = 0;
      pid_t r;
      do {
        r = ::waitpid(pid_, &ws, WNOHANG);
      } while (r < 0 && errno == EINTR);
      if (r == 0) return false;
      reaped_ = true;
      if (r < 0) {
        // Someone else reaped it (should not happen); report an unclassified crash.
        exit_.exited = true;
        exit_.exit_code = 1;
      } else if (WIFEXITED(ws)) {
        exit_.exited = true;
        exit_.exit_code = WEXITSTATUS(ws);
      } else if (WIFSIGNALED(ws)) {
        exit_.exited = false;
        exit_.term_signal = WTERMSIG(ws);
      }
    }
    *status = exit_;
    return true;
  }

 private:
  const pid_t pid_;
  int out_fd_;
  int err_fd_;
  bool reaped_ = false;
  ExitStatus exit_;
};

class PosixProcessLauncher : public ProcessLauncher {
 public:
  Status Launch(const ChildSpec& spec, std::unique_ptr<ChildProcess>* child) override {
    if (spec.argv.empty()) return Status::InvalidArgument("ChildSpec.argv: empty");
    // Everything the child needs is built before fork: after fork only async-signal-safe calls.
    std::vector<char*> argv;
    for (const auto& a : spec.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    std::map<std::string, std::string> env;
    for (char** e = spec.inherit_environment ? environ : nullptr; e && *e; ++e) {
      std::string kv(*e);
      auto eq = kv.find('=');
      if (eq == std::string::npos) continue;
      env[kv.substr(0, eq)] = kv.substr(eq + 1);
    }
    for (const auto& [k, v] : spec.env_overrides) env[k] = v;
    std::vector<std::string> env_strings;
    for (const auto& [k, v] : env) env_strings.push_back(k + "=" + v);
    std::vector<char*> envp;
    for (auto& s : env_strings) envp.push_back(s.data());
    envp.push_back(nullptr);

    int out_pipe[2], err_pipe[2], exec_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0) return Status::IoError("pipe: " + ErrnoText(errno));
    if (::pipe2(err_pipe, O_CLOEXEC) != 0) {
      ::close(out_pipe[0]);
      ::close(out_pipe[1]);
      return Status::IoError("pipe: " + ErrnoText(errno));
    }
    if (::pipe2(exec_pipe, O_CLOEXEC) != 0) {
      for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) ::close(fd);
      return Status::IoError("pipe: " + ErrnoText(errno));
    }
    const char* workdir = spec.working_dir.empty() ? nullptr : spec.working_dir.c_str();

    pid_t pid = ::fork();
    if (pid < 0) {
      int err = errno;
      for (int fd :
           {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1], exec_pipe[0], exec_pipe[1]})
        ::close(fd);
      return Status::Internal("fork: " + ErrnoText(err));
    }
    if (pid == 0) {
      ::setpgid(0, 0);
      // Default signal dispositions and an empty mask: the parent may block signals for sigwait.
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      for (int s : {SIGTERM, SIGINT, SIGHUP, SIGPIPE, SIGQUIT}) ::signal(s, SIG_DFL);
      int devnull = ::open("/dev/null", O_RDONLY);
      if (devnull >= 0) ::dup2(devnull, 0);
      ::dup2(out_pipe[1], 1);
      ::dup2(err_pipe[1], 2);
      int err = 0;
      if (workdir && ::chdir(workdir) != 0) {
        err = errno;
      } else {
        ::execve(argv[0], argv.data(), envp.data());
        err = errno;
      }
      ssize_t ignored = ::write(exec_pipe[1], &err, sizeof(err));
      (void)ignored;
      ::_exit(127);
    }
    // Parent: also set the group here so a signal sent right after Launch reaches the group.
    ::setpgid(pid, pid);
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    ::close(exec_pipe[1]);
    int child_err = 0;
    ssize_t n;
    do {
      n = ::read(exec_pipe[0], &child_err, sizeof(child_err));
    } while (n < 0 && errno == EINTR);
    ::close(exec_pipe[0]);
    if (n == static_cast<ssize_t>(sizeof(child_err))) {
      int ws;
      while (::waitpid(pid, &ws, 0) < 0 && errno == EINTR) {
      }
      ::close(out_pipe[0]);
      ::close(err_pipe[0]);
      return Status::NotFound("cannot execute " + spec.argv[0] + ": " + ErrnoText(child_err));
    }
    ::fcntl(out_pipe[0], F_SETFL, ::fcntl(out_pipe[0], F_GETFL) | O_NONBLOCK);
    ::fcntl(err_pipe[0], F_SETFL, ::fcntl(err_pipe[0], F_GETFL) | O_NONBLOCK);
    *child = std::make_unique<PosixChildProcess>(pid, out_pipe[0], err_pipe[0]);
    return Status::Ok();
  }
};

}  // namespace

std::unique_ptr<ProcessLauncher> NewPosixProcessLauncher() {
  return std::make_unique<PosixProcessLauncher>();
}

}  // namespace xv::worker
