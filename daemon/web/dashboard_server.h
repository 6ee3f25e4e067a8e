// DashboardServer: xvd's HTTP/1.1 listener for the read-only dashboard and /metrics, or for the
// health endpoints alone (Boost.Beast over Boost.Asio), on threads of its own. Every request is
// answered by an HttpHandler (a DashboardRouter or a HealthCheck); a HEAD
// gets the GET reply's headers (Content-Length included) without the body. Requests are bounded
// (16 KiB of headers, 64 KiB of body, 30 s per read or write); connections are kept alive when the
// client asks.
//
// Thread-safety: Start/Stop from one controlling thread; the router is called from the server's
// threads.
#pragma once

#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "daemon/web/dashboard_router.h"

namespace xv::daemon::web {

class DashboardServer {
 public:
  // Binds host:port (an IP address, localhost or [IPv6]; which hosts are allowed is the caller's
  // policy; port 0: the kernel picks one, see port()) and starts `threads` threads serving it.
  // `router` must outlive the server. Unavailable (naming `flag` and the address) when it cannot
  // bind.
  static Status Start(const std::string& host, int port, int threads, HttpHandler* router,
                      std::unique_ptr<DashboardServer>* out, const std::string& flag = "--http");
  ~DashboardServer();  // Stop()s

  int port() const { return port_; }
  // Closes the listener and every connection, joins the threads. Idempotent.
  void Stop();

 private:
  struct Impl;
  DashboardServer() = default;
  std::unique_ptr<Impl> impl_;
  std::vector<std::thread> threads_;
  int port_ = 0;
};

}  // namespace xv::daemon::web
