#include "daemon/engine/event_batcher.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace xv::daemon {

EventBatcher::EventBatcher(store::Store* store, std::shared_ptr<ConnectedWorker> session)
    : store_(store), session_(std::move(session)) {}

void EventBatcher::Add(xv::v1::TrainerEvent event) {
  bool full = false;
  {
    MutexLock lock(&mu_);
    pending_.push_back(std::move(event));
    full = pending_.size() >= kMaxBatch;
  }
  if (full) Flush();
}

bool EventBatcher::Flush() {
  MutexLock lock(&mu_);
  if (pending_.empty()) return true;
  store::AppliedEvents applied;
  Status s = store_->attempts().ApplyTrainerEvents(session_->worker_id(), pending_, &applied);
  pending_.clear();
  if (!s.ok()) {
    spdlog::error("worker {}: storing events: {}", session_->name(), s.ToString());
    return false;
  }
  if (applied.rejected > 0) {
    spdlog::warn("worker {}: {} event(s) for attempts it does not hold were refused",
                 session_->name(), applied.rejected);
  }
  for (auto& ack : applied.acks) {
    xv::v1::DaemonMessage msg;
    *msg.mutable_ack() = std::move(ack);
    session_->Push(std::move(msg));
  }
  return true;
}

}  // namespace xv::daemon
