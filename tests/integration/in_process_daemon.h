// An in-process daemon for integration tests: a real DaemonServer (SQLite file, gRPC over a unix
// socket) in a fresh temp state dir, with the fast timings the tests rely on.
#pragma once

#include <filesystem>
#include <memory>
#include <random>
#include <string>

#include <grpcpp/grpcpp.h>

#include "daemon/api/daemon_server.h"

namespace xv::daemon::fake {

// <temp dir>/<prefix>-<random number>: a state dir of one test's own (not created).
inline std::filesystem::path FreshStateDir(const std::string& prefix) {
  std::random_device rd;
  return std::filesystem::temp_directory_path() / (prefix + "-" + std::to_string(rd()));
}

// Options of a quick test daemon in `state_dir`: no TCP listener, heartbeats every 100 ms, a lease
// of `lease_ms`, dispatcher ticks every 50 ms.
inline DaemonOptions FastDaemonOptions(const std::filesystem::path& state_dir,
                                       int lease_ms = 1500) {
  DaemonOptions options;
  options.state_dir = state_dir.string();
  options.listen = "none";
  options.dispatcher.heartbeat_interval_ms = 100;
  options.dispatcher.lease_ms = lease_ms;
  options.tick_ms = 50;
  return options;
}

// Starts a DaemonServer with `options` into *server and sets *channel to a channel on its unix
// socket (untouched when the start fails).
inline Status StartInProcessDaemon(const DaemonOptions& options,
                                   std::unique_ptr<DaemonServer>* server,
                                   std::shared_ptr<grpc::Channel>* channel) {
  Status s = DaemonServer::Start(options, server);
  if (!s.ok()) return s;
  *channel =
      grpc::CreateChannel("unix:" + (*server)->socket_path(), grpc::InsecureChannelCredentials());
  return s;
}

}  // namespace xv::daemon::fake
