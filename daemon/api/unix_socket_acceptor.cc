#include "daemon/api/unix_socket_acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

#include <grpcpp/server_posix.h>
#include <spdlog/spdlog.h>

namespace xv::daemon {

Status UnixSocketAcceptor::Start(const std::string& path, grpc::Server* server,
                                 UnixPeerRegistry* peers,
                                 std::unique_ptr<UnixSocketAcceptor>* out) {
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) {
    return Status::InvalidArgument("--socket " + path + ": path longer than " +
                                   std::to_string(sizeof(addr.sun_path) - 1) + " bytes");
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Status::IoError("unix socket: " + std::string(std::strerror(errno)));
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || ::listen(fd, 128) != 0) {
    const std::string why = std::strerror(errno);
    ::close(fd);
    return Status::Unavailable("cannot listen on unix:" + path + ": " + why);
  }
  if (::chmod(path.c_str(), 0660) != 0) spdlog::warn("{}: cannot set permissions 0660", path);
  out->reset(new UnixSocketAcceptor(fd, server, peers));
  (*out)->thread_ = std::thread([a = out->get()] { a->AcceptLoop(); });
  return Status::Ok();
}

UnixSocketAcceptor::~UnixSocketAcceptor() { Stop(); }

void UnixSocketAcceptor::Stop() {
  if (stopping_.exchange(true)) return;
  ::shutdown(listen_fd_, SHUT_RDWR);  // wakes accept()
  if (thread_.joinable()) thread_.join();
  ::close(listen_fd_);
}

void UnixSocketAcceptor::AcceptLoop() {
  while (!stopping_.load()) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (!stopping_.load()) spdlog::error("unix socket accept: {}", std::strerror(errno));
      if (errno == EMFILE || errno == ENFILE) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        continue;
      }
      return;
    }
    ucred cred{};
    socklen_t len = sizeof(cred);
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
      spdlog::warn("unix socket: SO_PEERCRED: {}; connection closed", std::strerror(errno));
      ::close(fd);
      continue;
    }
    peers_->Record(fd, cred.uid);
    grpc::AddInsecureChannelFromFd(server_, fd);  // gRPC owns (and closes) fd from here
  }
}

}  // namespace xv::daemon
