// DashboardRouter: maps one HTTP request (method, target, Host) to a complete reply, independent of
// the socket layer (DashboardServer) so tests can call it directly.
//
//   GET|HEAD /                      overview page          /api/overview
//   GET|HEAD /campaigns/ID          campaign page          /api/campaigns/ID
//   GET|HEAD /experiments/ID        experiment page        /api/experiments/ID
//   GET|HEAD /metrics               Prometheus text format
//   GET|HEAD /healthz, /readyz      liveness and readiness (daemon/web/health_check.h), when set
// Any other method: 405 with `Allow: GET, HEAD` (the dashboard is read-only). Unknown paths: 404; a
// non-numeric ID: 400 naming it. A Host header that is not a loopback name (127.0.0.1, localhost,
// [::1], with or without a port) is refused with 403: a web page cannot read the dashboard
// through DNS rebinding. No CORS headers are sent. Query strings are ignored.
//
// Thread-safety: Handle may be called from several threads at once.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "daemon/web/dashboard_reader.h"

namespace xv::daemon::web {

struct HttpRequestHead {
  std::string method;  // "GET", "HEAD", ...
  std::string target;  // "/campaigns/3?x=1"
  std::string host;    // the Host header; "" when absent
};

struct HttpReply {
  int status = 200;
  std::string content_type;
  std::string body;  // the GET body; a HEAD reply carries its size, not its bytes (the server)
  std::vector<std::pair<std::string, std::string>> headers;  // beyond Content-Type
};

// Answers HTTP requests for DashboardServer: the dashboard (DashboardRouter) or only the health
// endpoints (HealthCheck). Handle may be called from several threads at once.
class HttpHandler {
 public:
  virtual ~HttpHandler() = default;
  virtual HttpReply Handle(const HttpRequestHead& request) = 0;
};

class HealthCheck;

class DashboardRouter : public HttpHandler {
 public:
  // `reader` must outlive the router. `write_fault` returns the daemon's current write fault ("":
  // the database takes writes); it is called for the overview and /metrics.
  DashboardRouter(DashboardReader* reader, std::function<std::string()> write_fault);

  HttpReply Handle(const HttpRequestHead& request) override;

  // Serves /healthz and /readyz from `health` (which must outlive the router), whatever the Host
  // header: probes (a kubelet, a load balancer) reach xvd under any name. nullptr: not served.
  void SetHealthCheck(HealthCheck* health) { health_ = health; }

  // Replies per status code so far (what /metrics reports as xv_http_requests_total).
  std::map<int, int64_t> RequestCounts();

 private:
  HttpReply Route(const HttpRequestHead& request);

  DashboardReader* reader_;
  std::function<std::string()> write_fault_;
  HealthCheck* health_ = nullptr;
  Mutex counts_mu_;
  std::map<int, int64_t> counts_ GUARDED_BY(counts_mu_);
};

// Is `host` (a Host header value) a loopback name: 127.0.0.1, localhost or [::1], optionally with
// ":port"?
bool IsLoopbackHost(const std::string& host);
// The standard reason phrase of a status code ("Not Found").
const char* HttpReasonPhrase(int status);

}  // namespace xv::daemon::web
