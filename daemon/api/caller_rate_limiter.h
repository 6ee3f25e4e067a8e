// CallerRateLimiter: a token bucket per caller for the RPCs that change state (Submit, Cancel,
// DrainWorker, CreateCampaign, PauseCampaign, ResumeCampaign, Decide, SubmitPlan, CancelPlan,
// PausePlan, ResumePlan). Each call takes one token; a bucket holds at most `burst` tokens and
// refills at `per_second`. A call finding its bucket empty is refused with RESOURCE_EXHAUSTED
// saying the limit, the flags that set it and when a token is back. Reads (List*, Get*, Status,
// Watch) are not limited here (Watch streams have their own cap, WatchHubOptions::max_streams).
//
// Who is a caller: gRPC gives the peer address only. A TCP caller is its address without the port
// (every connection of one host shares a bucket, so reconnecting does not refill it); every unix
// socket caller is "unix" (gRPC does not expose the peer's uid), so local clients share one
// bucket: the defaults are generous for that reason (docs/operations.md § Limits).
//
// Thread-safety: Admit may be called concurrently; one mutex guards the buckets.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>

#include <grpcpp/server_context.h>

#include "common/mutex.h"
#include "common/status.h"
#include "common/thread_annotations.h"

namespace xv::daemon {

struct RateLimitOptions {
  double per_second = 60;  // tokens added per second; <= 0 turns the limit off
  double burst = 600;      // bucket size: calls a caller may make at once after a quiet spell
};

class CallerRateLimiter {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;
  // `clock` is for tests; by default the steady clock.
  explicit CallerRateLimiter(RateLimitOptions options, Clock clock = nullptr);

  // Takes a token from the bucket of the caller at `peer` (grpc::ServerContext::peer()). Ok, or
  // ResourceExhausted naming `method`, the limit and the seconds until a retry can succeed.
  Status Admit(const std::string& peer, const std::string& method);

  // The bucket key of a peer: "ipv4:127.0.0.1:5123" -> "ipv4:127.0.0.1", "ipv6:[::1]:5123" ->
  // "ipv6:[::1]", "unix:..." -> "unix"; anything else as given.
  static std::string CallerKey(const std::string& peer);

  bool enabled() const { return options_.per_second > 0; }

 private:
  struct Bucket {
    double tokens = 0;
    std::chrono::steady_clock::time_point updated;
  };
  // Forgets buckets that are full again (their callers went quiet), so that the map stays small.
  void PruneFullBucketsLocked(std::chrono::steady_clock::time_point now)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const RateLimitOptions options_;
  const Clock clock_;
  Mutex mu_;
  std::map<std::string, Bucket> buckets_ GUARDED_BY(mu_);
};

// For a service handler: OK when `limiter` is null (no limit) or admits the caller of `ctx`, else
// the RESOURCE_EXHAUSTED status to return (logged at info, without the request).
grpc::Status AdmitCaller(CallerRateLimiter* limiter, const grpc::ServerContext& ctx,
                         const char* method);

}  // namespace xv::daemon
