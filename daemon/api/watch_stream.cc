#include "daemon/api/watch_stream.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <deque>
#include <memory>

#include "common/mutex.h"
#include "common/thread_annotations.h"
#include "daemon/api/grpc_status.h"
#include "daemon/api/request_limits.h"

namespace xv::daemon {
namespace {

constexpr int kReplayBatch = 500;
constexpr std::chrono::milliseconds kIdleCheck(500);

const std::set<std::string>& KnownKinds() {
  static const std::set<std::string>* kinds = new std::set<std::string>{
      "state", "start", "step", "eval", "nan", "summary", "error", "decision", "head"};
  return *kinds;
}

// The request's filter, checked against the store (the campaign and experiment must exist).
Status MakeFilter(store::Store* store, const xv::v1::WatchRequest& req, WatchFilter* filter) {
  XV_RETURN_IF_ERROR(CheckRequestLimits(req));
  if (req.experiment_id() < 0) return Status::InvalidArgument("experiment_id: must be >= 0");
  if (req.has_since() && req.since() < 0) {
    return Status::InvalidArgument("since: must be >= 0 (a WatchEvent.cursor)");
  }
  filter->experiment_id = req.experiment_id();
  for (const auto& k : req.kinds()) {
    if (!KnownKinds().count(k)) {
      return Status::InvalidArgument(
          "kinds: unknown kind '" + k +
          "' (state, start, step, eval, nan, summary, error, decision, head)");
    }
    filter->kinds.insert(k);
  }
  if (!req.campaign().empty()) {
    xv::v1::Campaign c;
    XV_RETURN_IF_ERROR(store->campaigns()
                           .GetCampaign(0, req.campaign(), /*detail=*/false, &c)
                           .WithContext("campaign: "));
    filter->campaign_id = c.id();
  }
  if (filter->experiment_id != 0) {
    xv::v1::Experiment e;
    XV_RETURN_IF_ERROR(store->experiments()
                           .GetExperiment(filter->experiment_id, &e)
                           .WithContext("experiment_id: "));
  }
  return Status::Ok();
}

class WatchReactor final : public grpc::ServerWriteReactor<xv::v1::WatchEvent> {
 public:
  WatchReactor(store::Store* store, WatchHub* hub, const xv::v1::WatchRequest& req)
      : store_(store), hub_(hub), req_(req) {}

  // Runs in the method handler: validates, subscribes and starts the replay (or finishes).
  void Begin() {
    MutexLock lock(&mu_);
    if (hub_ == nullptr) {
      FinishLocked(
          grpc::Status(grpc::StatusCode::UNAVAILABLE, "watch: this daemon has no event feed"));
      return;
    }
    WatchFilter filter;
    Status s = MakeFilter(store_, req_, &filter);
    if (s.ok()) s = hub_->Subscribe(filter, &sub_);
    if (!s.ok()) {
      FinishLocked(ToGrpcStatus(s));
      return;
    }
    filter_ = sub_->filter();
    // Replay what is stored after `since` until caught up with the hub, then go live from exactly
    // there. Without `since`, live from now.
    cursor_ = req_.has_since() ? req_.since() : hub_->published();
    sub_->SetListener([this] { Pump(/*from_feed=*/true); });
    PumpLocked(/*from_feed=*/false);
  }

  void OnWriteDone(bool ok) override {
    MutexLock lock(&mu_);
    writing_ = false;
    if (!ok) {  // the client went away
      FinishLocked(grpc::Status::OK);
      return;
    }
    PumpLocked(/*from_feed=*/false);
  }

  void OnCancel() override {
    MutexLock lock(&mu_);
    cancelled_ = true;
    // A write in flight completes (not ok) and finishes the call from OnWriteDone.
    if (!writing_) FinishLocked(grpc::Status::OK);
  }

  void OnDone() override {
    // No reaction runs any more; the listener may, on the feed thread: wait it out first.
    if (sub_) {
      sub_->ClearListener();
      hub_->Unsubscribe(sub_);
    }
    delete this;
  }

 private:
  void Pump(bool from_feed) {
    MutexLock lock(&mu_);
    PumpLocked(from_feed);
  }

  // Starts the next write, finishes the call, or returns to wait for a reaction or the listener.
  void PumpLocked(bool from_feed) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_ || writing_) return;
    if (cancelled_) {
      FinishLocked(grpc::Status::OK);
      return;
    }
    if (!live_) {
      // The replay reads the store: only in gRPC's reactions, never on the hub's feed thread.
      if (from_feed) return;
      grpc::Status st;
      if (!ReplayLocked(&st)) {
        FinishLocked(st);
        return;
      }
      if (!replay_.empty()) {
        xv::v1::WatchEvent ev = std::move(replay_.front());
        replay_.pop_front();
        WriteLocked(std::move(ev));
        return;
      }
    }
    xv::v1::WatchEvent ev;
    auto r = sub_->Pop(&ev, std::chrono::milliseconds(0));
    if (r == WatchSubscription::PopResult::kEvent) {
      WriteLocked(std::move(ev));
      return;
    }
    if (r == WatchSubscription::PopResult::kClosed) {
      FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "watch: the daemon is stopping"));
      return;
    }
    if (req_.until_idle()) UntilIdleLocked();
  }

  // Fills replay_ from the store, or goes live (live_) when caught up with the hub. False (with
  // *error) on a store error.
  bool ReplayLocked(grpc::Status* error) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    while (replay_.empty()) {
      if (cursor_ >= replay_up_to_) {
        if (hub_->Activate(sub_, cursor_)) {
          live_ = true;
          return true;
        }
        replay_up_to_ = hub_->published();
      }
      std::vector<store::StoredEvent> rows;
      // One experiment's replay reads its own rows (an index), not the whole log.
      Status s =
          filter_.experiment_id != 0
              ? store_->events().ListExperimentEventsAfter(filter_.experiment_id, cursor_,
                                                           replay_up_to_, kReplayBatch, &rows)
              : store_->events().ListEventsAfter(cursor_, replay_up_to_, kReplayBatch, &rows);
      if (!s.ok()) {
        *error = ToGrpcStatus(s);
        return false;
      }
      for (const auto& row : rows) {
        xv::v1::WatchEvent ev;
        if (ToWatchEvent(row, &ev) && filter_.Matches(ev)) replay_.push_back(std::move(ev));
      }
      cursor_ = static_cast<int>(rows.size()) < kReplayBatch ? replay_up_to_ : rows.back().id;
    }
    return true;
  }

  // until_idle with nothing queued: once the scope is idle, everything stored up to then
  // (idle_target_) is delivered and the call ends.
  void UntilIdleLocked() EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (idle_target_ >= 0) {
      if (hub_->published() >= idle_target_) {
        // Everything up to the idle point was offered; the queue was empty just before.
        xv::v1::WatchEvent last;
        if (sub_->Pop(&last, std::chrono::milliseconds(0)) ==
            WatchSubscription::PopResult::kEvent) {
          WriteLocked(std::move(last));
          return;
        }
        FinishLocked(grpc::Status::OK);
        return;
      }
      hub_->Notify();
      return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now < next_idle_check_) return;
    next_idle_check_ = now + kIdleCheck;
    bool idle = false;
    Status s = store_->events().ScopeIdle(filter_.campaign_id, &idle);
    if (!s.ok()) {
      FinishLocked(ToGrpcStatus(s));
      return;
    }
    if (!idle) return;
    // Idle first, then the newest id: whatever led to idleness is stored at or before it.
    s = store_->events().MaxEventId(&idle_target_);
    if (!s.ok()) {
      FinishLocked(ToGrpcStatus(s));
      return;
    }
    hub_->Notify();
  }

  void WriteLocked(xv::v1::WatchEvent ev) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    current_ = std::move(ev);  // must live until OnWriteDone
    writing_ = true;
    StartWrite(&current_);
  }

  void FinishLocked(const grpc::Status& status) EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finished_) return;
    finished_ = true;
    Finish(status);
  }

  store::Store* const store_;
  WatchHub* const hub_;
  const xv::v1::WatchRequest req_;

  Mutex mu_;  // held by every reaction and the listener
  // Set once in Begin (under mu_); read without it in OnDone, after every reaction.
  std::shared_ptr<WatchSubscription> sub_;
  WatchFilter filter_ GUARDED_BY(mu_);
  bool writing_ GUARDED_BY(mu_) = false;   // a StartWrite awaits OnWriteDone
  bool finished_ GUARDED_BY(mu_) = false;  // Finish was called
  bool cancelled_ GUARDED_BY(mu_) = false;
  bool live_ GUARDED_BY(mu_) = false;  // the replay is over: events come from the subscription
  xv::v1::WatchEvent current_ GUARDED_BY(mu_);
  std::deque<xv::v1::WatchEvent> replay_ GUARDED_BY(mu_);
  int64_t cursor_ GUARDED_BY(mu_) = 0;         // replayed up to here
  int64_t replay_up_to_ GUARDED_BY(mu_) = -1;  // the hub's position the replay aims at
  int64_t idle_target_ GUARDED_BY(mu_) = -1;
  std::chrono::steady_clock::time_point next_idle_check_ GUARDED_BY(mu_);
};

}  // namespace

grpc::ServerWriteReactor<xv::v1::WatchEvent>* StartWatch(store::Store* store, WatchHub* hub,
                                                         grpc::CallbackServerContext*,
                                                         const xv::v1::WatchRequest& req) {
  auto* reactor = new WatchReactor(store, hub, req);
  reactor->Begin();
  return reactor;
}

}  // namespace xv::daemon
