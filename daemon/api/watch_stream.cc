#include "daemon/api/watch_stream.h"

#include <spdlog/spdlog.h>

#include <memory>

#include "daemon/api/grpc_status.h"

namespace xv::daemon {
namespace {

constexpr int kReplayBatch = 500;
constexpr std::chrono::milliseconds kIdleCheck(500);

const std::set<std::string>& KnownKinds() {
  static const std::set<std::string>* kinds = new std::set<std::string>{
      "state", "start", "step", "eval", "nan", "summary", "error", "decision", "head"};
  return *kinds;
}

}  // namespace

grpc::Status ServeWatch(store::ExperimentStore* store, WatchHub* hub, grpc::ServerContext* ctx,
                        const xv::v1::WatchRequest& req,
                        grpc::ServerWriter<xv::v1::WatchEvent>* writer) {
  if (hub == nullptr) {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "watch: this daemon has no event feed");
  }
  WatchFilter filter;
  if (req.experiment_id() < 0) {
    return ToGrpcStatus(Status::InvalidArgument("experiment_id: must be >= 0"));
  }
  if (req.has_since() && req.since() < 0) {
    return ToGrpcStatus(Status::InvalidArgument("since: must be >= 0 (a WatchEvent.cursor)"));
  }
  filter.experiment_id = req.experiment_id();
  for (const auto& k : req.kinds()) {
    if (!KnownKinds().count(k)) {
      return ToGrpcStatus(Status::InvalidArgument(
          "kinds: unknown kind '" + k +
          "' (state, start, step, eval, nan, summary, error, decision, head)"));
    }
    filter.kinds.insert(k);
  }
  if (!req.campaign().empty()) {
    xv::v1::Campaign c;
    Status s = store->GetCampaign(0, req.campaign(), /*detail=*/false, &c);
    if (!s.ok()) return ToGrpcStatus(s.WithContext("campaign: "));
    filter.campaign_id = c.id();
  }
  if (filter.experiment_id != 0) {
    xv::v1::Experiment e;
    Status s = store->GetExperiment(filter.experiment_id, &e);
    if (!s.ok()) return ToGrpcStatus(s.WithContext("experiment_id: "));
  }

  std::shared_ptr<WatchSubscription> sub = hub->Subscribe(filter);
  struct Unsubscribe {
    WatchHub* hub;
    std::shared_ptr<WatchSubscription> sub;
    ~Unsubscribe() { hub->Unsubscribe(sub); }
  } unsubscribe{hub, sub};

  // Replay what is stored after `since` until caught up with the hub, then go live from exactly
  // there. Without `since`, live from now.
  int64_t cursor = req.has_since() ? req.since() : hub->published();
  while (!hub->Activate(sub, cursor)) {
    if (ctx->IsCancelled()) return grpc::Status::OK;
    const int64_t up_to = hub->published();
    while (cursor < up_to) {
      std::vector<store::StoredEvent> rows;
      Status s = store->ListEventsAfter(cursor, up_to, kReplayBatch, &rows);
      if (!s.ok()) return ToGrpcStatus(s);
      for (const auto& row : rows) {
        xv::v1::WatchEvent ev;
        if (!ToWatchEvent(row, &ev) || !filter.Matches(ev)) continue;
        if (!writer->Write(ev)) return grpc::Status::OK;  // the client went away
      }
      cursor = static_cast<int>(rows.size()) < kReplayBatch ? up_to : rows.back().id;
    }
  }

  // Live. With until_idle: once the scope is idle, everything stored up to then (idle_target) is
  // delivered and the stream ends.
  int64_t idle_target = -1;
  auto next_idle_check = std::chrono::steady_clock::now();
  while (!ctx->IsCancelled()) {
    xv::v1::WatchEvent ev;
    const auto r = sub->Pop(&ev, std::chrono::milliseconds(200));
    if (r == WatchSubscription::PopResult::kClosed) {
      return grpc::Status(grpc::StatusCode::UNAVAILABLE, "watch: the daemon is stopping");
    }
    if (r == WatchSubscription::PopResult::kEvent) {
      if (!writer->Write(ev)) return grpc::Status::OK;
      continue;
    }
    if (!req.until_idle()) continue;
    if (idle_target >= 0) {
      if (hub->published() >= idle_target) {
        // Everything up to the idle point was offered and the queue is empty.
        xv::v1::WatchEvent last;
        if (sub->Pop(&last, std::chrono::milliseconds(0)) == WatchSubscription::PopResult::kEvent) {
          if (!writer->Write(last)) return grpc::Status::OK;
          continue;
        }
        return grpc::Status::OK;
      }
      hub->Notify();
      continue;
    }
    if (std::chrono::steady_clock::now() < next_idle_check) continue;
    next_idle_check = std::chrono::steady_clock::now() + kIdleCheck;
    bool idle = false;
    Status s = store->ScopeIdle(filter.campaign_id, &idle);
    if (!s.ok()) return ToGrpcStatus(s);
    if (!idle) continue;
    // Idle first, then the newest id: whatever led to idleness is stored at or before it.
    s = store->MaxEventId(&idle_target);
    if (!s.ok()) return ToGrpcStatus(s);
    hub->Notify();
  }
  return grpc::Status::OK;
}

}  // namespace xv::daemon
