// EventWriter: group commit of every session's trainer events. See event_writer.h.
#include "daemon/engine/event_writer.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace xv::daemon {

EventWriter::EventWriter(store::Store* store) : store_(store) {
  thread_ = std::thread([this] { Run(); });
}

EventWriter::~EventWriter() { Stop(); }

void EventWriter::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool EventWriter::Enqueue(const std::shared_ptr<ConnectedWorker>& session,
                          std::vector<xv::v1::TrainerEvent> events) {
  if (events.empty()) return true;
  MutexLock lock(&mu_);
  cv_.wait(mu_, [this] {
    mu_.AssertHeld();
    return stopping_ || queued_events_ < kMaxQueuedEvents;
  });
  SessionProgress& progress = sessions_[session.get()];
  if (stopping_) {
    progress.dropped = true;
    return false;
  }
  const uint64_t ticket = next_ticket_++;
  progress.last_ticket = ticket;
  queued_events_ += events.size();
  const bool was_empty = queue_.empty();
  queue_.push_back(Queued{ticket, session, std::move(events)});
  if (was_empty) cv_.notify_all();
  return true;
}

bool EventWriter::Flush(const ConnectedWorker& session) {
  MutexLock lock(&mu_);
  auto it = sessions_.find(&session);
  if (it == sessions_.end()) return true;  // nothing queued since the session began
  const uint64_t ticket = it->second.last_ticket;
  cv_.wait(mu_, [this, ticket] {
    mu_.AssertHeld();
    return done_ticket_ >= ticket;
  });
  SessionProgress& progress = sessions_[&session];
  const bool ok = !progress.dropped;
  progress.dropped = false;
  return ok;
}

void EventWriter::Forget(const ConnectedWorker& session) {
  MutexLock lock(&mu_);
  sessions_.erase(&session);
}

void EventWriter::Run() {
  std::vector<SessionBatch> batches;
  uint64_t last_ticket = 0;
  while (TakeQueued(&batches, &last_ticket)) {
    const std::vector<const ConnectedWorker*> dropped = StoreBatches(batches);
    batches.clear();  // releases the sessions before the lock is taken
    MutexLock lock(&mu_);
    for (const ConnectedWorker* s : dropped) sessions_[s].dropped = true;
    done_ticket_ = last_ticket;
    cv_.notify_all();
  }
}

bool EventWriter::TakeQueued(std::vector<SessionBatch>* batches, uint64_t* last_ticket) {
  MutexLock lock(&mu_);
  cv_.wait(mu_, [this] {
    mu_.AssertHeld();
    return stopping_ || !queue_.empty();
  });
  if (queue_.empty()) return false;                // stopping, and everything is stored
  std::map<const ConnectedWorker*, size_t> index;  // session -> its entry in *batches
  size_t taken = 0;
  while (!queue_.empty() &&
         (taken == 0 || taken + queue_.front().events.size() <= kMaxEventsPerTransaction)) {
    Queued& q = queue_.front();
    auto [it, added] = index.emplace(q.session.get(), batches->size());
    if (added) batches->push_back(SessionBatch{q.session, {}});
    std::vector<xv::v1::TrainerEvent>& events = (*batches)[it->second].events;
    taken += q.events.size();
    if (events.empty()) {
      events = std::move(q.events);
    } else {
      for (auto& ev : q.events) events.push_back(std::move(ev));
    }
    *last_ticket = q.ticket;
    queue_.pop_front();
  }
  queued_events_ -= taken;
  cv_.notify_all();  // room for waiting Enqueue calls
  return true;
}

std::vector<const ConnectedWorker*> EventWriter::StoreBatches(
    const std::vector<SessionBatch>& batches) {
  std::vector<store::WorkerEvents> parts;
  parts.reserve(batches.size());
  for (const SessionBatch& b : batches) {
    parts.push_back(store::WorkerEvents{b.session->worker_id(), &b.events});
  }
  std::vector<store::AppliedEvents> applied;
  Status s = store_->attempts().ApplyTrainerEventBatches(parts, &applied);
  if (s.ok()) {
    for (size_t i = 0; i < batches.size(); ++i) PushAcks(batches[i], &applied[i]);
    return {};
  }
  if (batches.size() > 1) {
    spdlog::warn("storing the events of {} workers together: {}; storing them one by one",
                 batches.size(), s.ToString());
  }
  // One by one: only the part at fault is dropped.
  std::vector<const ConnectedWorker*> dropped;
  for (const SessionBatch& b : batches) {
    store::AppliedEvents one;
    Status bs = batches.size() > 1
                    ? store_->attempts().ApplyTrainerEvents(b.session->worker_id(), b.events, &one)
                    : s;
    if (!bs.ok()) {
      spdlog::error("worker {}: storing {} event(s): {}", b.session->name(), b.events.size(),
                    bs.ToString());
      dropped.push_back(b.session.get());
      continue;
    }
    PushAcks(b, &one);
  }
  return dropped;
}

void EventWriter::PushAcks(const SessionBatch& batch, store::AppliedEvents* applied) {
  if (applied->rejected > 0) {
    spdlog::warn("worker {}: {} event(s) for attempts it does not hold were refused",
                 batch.session->name(), applied->rejected);
  }
  for (auto& ack : applied->acks) {
    xv::v1::DaemonMessage msg;
    *msg.mutable_ack() = std::move(ack);
    batch.session->Push(std::move(msg));
  }
}

}  // namespace xv::daemon
