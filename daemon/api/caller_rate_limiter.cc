#include "daemon/api/caller_rate_limiter.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include <spdlog/spdlog.h>

#include "daemon/api/grpc_status.h"

namespace xv::daemon {
namespace {

// Past this many callers, buckets that refilled completely are forgotten.
constexpr size_t kPruneAbove = 1024;

std::string Seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.1f", s);
  return buf;
}

}  // namespace

CallerRateLimiter::CallerRateLimiter(RateLimitOptions options, Clock clock)
    : options_(options),
      clock_(clock ? std::move(clock) : Clock([] { return std::chrono::steady_clock::now(); })) {}

std::string CallerRateLimiter::CallerKey(const std::string& peer) {
  // "fd:N": a connection xvd accepted on its unix socket (unix_socket_acceptor.h).
  if (peer.rfind("unix:", 0) == 0 || peer.rfind("unix-abstract:", 0) == 0 ||
      peer.rfind("fd:", 0) == 0) {
    return "unix";
  }
  if (peer.rfind("ipv4:", 0) == 0) {
    const size_t colon = peer.rfind(':');
    if (colon > 4) return peer.substr(0, colon);
  }
  if (peer.rfind("ipv6:", 0) == 0) {
    const size_t bracket = peer.rfind(']');  // ipv6:[::1]:5123
    if (bracket != std::string::npos) return peer.substr(0, bracket + 1);
  }
  return peer;
}

void CallerRateLimiter::PruneFullBucketsLocked(std::chrono::steady_clock::time_point now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    const double idle_s = std::chrono::duration<double>(now - it->second.updated).count();
    if (it->second.tokens + idle_s * options_.per_second >= options_.burst) {
      it = buckets_.erase(it);
    } else {
      ++it;
    }
  }
}

Status CallerRateLimiter::Admit(const std::string& peer, const std::string& method) {
  if (!enabled()) return Status::Ok();
  const std::string key = CallerKey(peer);
  const auto now = clock_();
  MutexLock lock(&mu_);
  auto it = buckets_.find(key);
  if (it == buckets_.end()) {
    if (buckets_.size() >= kPruneAbove) PruneFullBucketsLocked(now);
    it = buckets_.emplace(key, Bucket{options_.burst, now}).first;
  }
  Bucket& b = it->second;
  const double elapsed_s = std::max(0.0, std::chrono::duration<double>(now - b.updated).count());
  b.tokens = std::min(options_.burst, b.tokens + elapsed_s * options_.per_second);
  b.updated = now;
  if (b.tokens >= 1.0) {
    b.tokens -= 1.0;
    return Status::Ok();
  }
  const double wait_s = std::max(0.1, (1.0 - b.tokens) / options_.per_second);
  return Status::ResourceExhausted(
      method + ": rate limit: this caller (" + key + ") made more than " + Seconds(options_.burst) +
      " state-changing calls in a burst, refilled at " + Seconds(options_.per_second) +
      " per second (xvd --rate-limit, --rate-burst); retry in " +
      Seconds(std::ceil(wait_s * 10) / 10) + " s");
}

grpc::Status AdmitCaller(CallerRateLimiter* limiter, const grpc::ServerContext& ctx,
                         const char* method) {
  if (limiter == nullptr) return grpc::Status::OK;
  Status s = limiter->Admit(ctx.peer(), method);
  if (s.ok()) return grpc::Status::OK;
  spdlog::info("{} refused ({}): rate limit", method, ctx.peer());
  return ToGrpcStatus(s);
}

}  // namespace xv::daemon
