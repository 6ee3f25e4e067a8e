#include "daemon/api/state_dir_lock.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

namespace xv::daemon {

Status StateDirLock::Acquire(const std::string& state_dir, std::unique_ptr<StateDirLock>* out) {
  std::error_code ec;
  std::filesystem::create_directories(state_dir, ec);
  if (ec) return Status::IoError(state_dir + ": cannot create state directory: " + ec.message());
  const std::string path = state_dir + "/xvd.pid";
  int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) return Status::IoError(path + ": " + std::strerror(errno));
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    char buf[32] = {0};
    ssize_t n = ::pread(fd, buf, sizeof(buf) - 1, 0);
    ::close(fd);
    std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "?";
    while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
    return Status::FailedPrecondition(state_dir + ": another xvd (pid " + pid +
                                      ") is running on this state directory");
  }
  std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    ::close(fd);
    return Status::IoError(path + ": cannot write pid: " + std::strerror(errno));
  }
  out->reset(new StateDirLock(fd, path));
  return Status::Ok();
}

StateDirLock::~StateDirLock() {
  ::unlink(path_.c_str());
  ::close(fd_);  // releases the flock
}

Status RemoveStaleSocket(const std::string& path) {
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) return Status::Ok();
  if (!S_ISSOCK(st.st_mode)) {
    return Status::FailedPrecondition(path + ": exists and is not a socket; move it away");
  }
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument(path + ": socket path longer than " +
                                   std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError(std::string("socket: ") + std::strerror(errno));
  int rc = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  int err = errno;
  ::close(fd);
  if (rc == 0) {
    return Status::FailedPrecondition(path + ": another server answers on this socket");
  }
  if (err != ECONNREFUSED && err != ENOENT) {
    return Status::IoError(path + ": cannot probe socket: " + std::strerror(err));
  }
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    return Status::IoError(path + ": cannot remove stale socket: " + std::strerror(errno));
  }
  return Status::Ok();
}

}  // namespace xv::daemon
