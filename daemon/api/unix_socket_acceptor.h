// UnixSocketAcceptor: xvd's unix socket, accepted by xvd itself so that each connection's peer
// credentials are known. gRPC's own unix listener gives a call only the socket's path as its peer;
// here every accepted connection's SO_PEERCRED uid goes into a UnixPeerRegistry under the
// connection's file descriptor, and the descriptor is handed to the running gRPC server
// (grpc::AddInsecureChannelFromFd), whose calls on it then have the peer "fd:N". The Authorizer
// reads the uid back from that name (daemon/api/authorizer.h).
// Thread-safety: Start and Stop from one controlling thread; the accept loop runs on its own.
#pragma once

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <grpcpp/server.h>

#include "common/status.h"
#include "daemon/api/authorizer.h"

namespace xv::daemon {

class UnixSocketAcceptor {
 public:
  // Binds and listens on `path` (a stale socket must be removed first; permissions 0660). The
  // server and registry must outlive the acceptor; `server` must have been started.
  static Status Start(const std::string& path, grpc::Server* server, UnixPeerRegistry* peers,
                      std::unique_ptr<UnixSocketAcceptor>* out);
  ~UnixSocketAcceptor();  // Stop()s

  // Stops accepting and closes the listening socket (connections already handed to gRPC end with
  // the server). Idempotent.
  void Stop();

 private:
  UnixSocketAcceptor(int listen_fd, grpc::Server* server, UnixPeerRegistry* peers)
      : listen_fd_(listen_fd), server_(server), peers_(peers) {}
  void AcceptLoop();

  int listen_fd_;
  grpc::Server* server_;
  UnixPeerRegistry* peers_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

}  // namespace xv::daemon
