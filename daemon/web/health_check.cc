#include "daemon/web/health_check.h"

#include <errno.h>
#include <string.h>
#include <unistd.h>

#include <utility>

namespace xv::daemon::web {
namespace {

std::string PathOf(const std::string& target) { return target.substr(0, target.find('?')); }

HttpReply TextReply(int status, const std::string& body) {
  HttpReply r;
  r.status = status;
  r.content_type = "text/plain; charset=utf-8";
  r.body = body + "\n";
  r.headers.push_back({"Cache-Control", "no-store"});
  r.headers.push_back({"X-Content-Type-Options", "nosniff"});
  return r;
}

}  // namespace

HealthCheck::HealthCheck(std::function<std::string()> write_fault, std::string database_path)
    : write_fault_(std::move(write_fault)), database_path_(std::move(database_path)) {}

bool HealthCheck::Serves(const HttpRequestHead& request) const {
  const std::string path = PathOf(request.target);
  return path == "/healthz" || path == "/readyz";
}

std::string HealthCheck::NotReadyReasons() const {
  std::string reasons;
  auto add = [&reasons](const std::string& reason) {
    reasons += (reasons.empty() ? "" : "; ") + reason;
  };
  if (!serving_.load()) add("listeners not up (starting or stopping)");
  // The fault's own text may name paths; the probe says only which kind of fault it is.
  if (!write_fault_().empty()) add("database in read-only mode (a write failed; xvctl status)");
  if (::access(database_path_.c_str(), W_OK) != 0) {
    add(std::string("database file not writable (") + ::strerror(errno) + ")");
  }
  return reasons;
}

HttpReply HealthCheck::Handle(const HttpRequestHead& request) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpReply r = TextReply(405, "method " + request.method + ": health endpoints take GET, HEAD");
    r.headers.push_back({"Allow", "GET, HEAD"});
    return r;
  }
  const std::string path = PathOf(request.target);
  if (path == "/healthz") return TextReply(200, "ok");
  if (path == "/readyz") {
    const std::string reasons = NotReadyReasons();
    return reasons.empty() ? TextReply(200, "ready") : TextReply(503, "not ready: " + reasons);
  }
  return TextReply(404, "not found: this listener serves /healthz and /readyz only");
}

}  // namespace xv::daemon::web
