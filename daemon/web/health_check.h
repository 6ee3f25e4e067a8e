// HealthCheck: xvd's health endpoints for supervisors and orchestrators (a kubelet's probes, a load
// balancer, a script waiting for the daemon), served on the dashboard's listener (--http) and,
// alone, on --health-listen (docs/operations.md § Health endpoints):
//
//   GET|HEAD /healthz   200 "ok": the process is alive and its HTTP threads answer.
//   GET|HEAD /readyz    200 "ready" when the gRPC listeners are up (set by DaemonServer after they
//                       bound, cleared when it starts shutting down), the database takes writes (no
//                       write fault: not in read-only mode) and its file is writable; else 503
//                       "not ready: REASON; REASON".
//
// The bodies say nothing beyond that (no names, paths, counts), so they may be served on any
// address without TLS or a token, whatever the Host header. Other paths: 404; other methods: 405.
//
// Thread-safety: Handle and SetServing may be called from any thread.
#pragma once

#include <atomic>
#include <functional>
#include <string>

#include "daemon/web/dashboard_router.h"

namespace xv::daemon::web {

class HealthCheck : public HttpHandler {
 public:
  // `write_fault` returns the daemon's write fault ("" while the database takes writes);
  // `database_path` is the database file whose writability /readyz checks.
  HealthCheck(std::function<std::string()> write_fault, std::string database_path);

  // Are the daemon's listeners up (true) or is it starting or stopping (false, the initial state)?
  void SetServing(bool serving) { serving_.store(serving); }

  // Is `request` for /healthz or /readyz (any method; a query string is ignored)?
  bool Serves(const HttpRequestHead& request) const;
  HttpReply Handle(const HttpRequestHead& request) override;

  // "" when ready; else the reasons, "; "-separated.
  std::string NotReadyReasons() const;

 private:
  std::function<std::string()> write_fault_;
  std::string database_path_;
  std::atomic<bool> serving_{false};
};

}  // namespace xv::daemon::web
