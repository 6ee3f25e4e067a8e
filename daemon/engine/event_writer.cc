// EventWriter: group commit of every session's trainer events. See event_writer.h.
#include "daemon/engine/event_writer.h"

#include <spdlog/spdlog.h>

#include <utility>

namespace xv::daemon {

EventWriter::EventWriter(store::Store* store, std::function<void()> after_finished)
    : store_(store), after_finished_(std::move(after_finished)) {
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
  const size_t size = events.size();
  return EnqueueEntry(session, Queued{0, session, std::move(events), {}}, size);
}

bool EventWriter::EnqueueFinished(const std::shared_ptr<ConnectedWorker>& session,
                                  xv::v1::Finished finished) {
  Queued entry{0, session, {}, {}};
  entry.finished.push_back(std::move(finished));
  return EnqueueEntry(session, std::move(entry), 1);
}

bool EventWriter::EnqueueEntry(const std::shared_ptr<ConnectedWorker>& session, Queued entry,
                               size_t size) {
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
  entry.ticket = next_ticket_++;
  progress.last_ticket = entry.ticket;
  queued_events_ += size;
  const bool was_empty = queue_.empty();
  queue_.push_back(std::move(entry));
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
  auto size = [](const Queued& q) { return q.events.size() + q.finished.size(); };
  while (!queue_.empty() &&
         (taken == 0 || taken + size(queue_.front()) <= kMaxEventsPerTransaction)) {
    Queued& q = queue_.front();
    auto [it, added] = index.emplace(q.session.get(), batches->size());
    if (added) batches->push_back(SessionBatch{q.session, {}, {}});
    SessionBatch& batch = (*batches)[it->second];
    taken += size(q);
    if (batch.events.empty()) {
      batch.events = std::move(q.events);
    } else {
      for (auto& ev : q.events) batch.events.push_back(std::move(ev));
    }
    if (!q.finished.empty()) {
      // Events of this session were dropped in an earlier transaction (not acknowledged): its
      // Finished is not applied before the worker sends them again, so it is dropped too, as a
      // Flush that returned false dropped it before.
      SessionProgress& progress = sessions_[q.session.get()];
      if (progress.dropped) {
        progress.dropped = false;
        q.finished.clear();
      }
    }
    for (auto& f : q.finished) batch.finished.push_back(std::move(f));
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
  bool any_finished = false;
  for (const SessionBatch& b : batches) {
    parts.push_back(store::WorkerEvents{b.session->worker_id(), &b.events, &b.finished});
    any_finished = any_finished || !b.finished.empty();
  }
  std::vector<store::AppliedEvents> applied;
  Status s = store_->attempts().ApplyTrainerEventBatches(parts, &applied);
  if (s.ok()) {
    for (size_t i = 0; i < batches.size(); ++i) PushAcks(batches[i], &applied[i]);
    if (any_finished && after_finished_) after_finished_();
    return {};
  }
  if (batches.size() > 1) {
    spdlog::warn("storing the events of {} workers together: {}; storing them one by one",
                 batches.size(), s.ToString());
  }
  // One by one: only the part at fault is dropped.
  std::vector<const ConnectedWorker*> dropped;
  bool finished_stored = false;
  for (size_t i = 0; i < batches.size(); ++i) {
    const SessionBatch& b = batches[i];
    std::vector<store::AppliedEvents> one;
    Status bs =
        batches.size() > 1 ? store_->attempts().ApplyTrainerEventBatches({parts[i]}, &one) : s;
    if (!bs.ok()) {
      spdlog::error("worker {}: storing {} event(s) and {} finished report(s): {}",
                    b.session->name(), b.events.size(), b.finished.size(), bs.ToString());
      dropped.push_back(b.session.get());
      continue;
    }
    PushAcks(b, &one.front());
    finished_stored = finished_stored || !b.finished.empty();
  }
  if (finished_stored && after_finished_) after_finished_();
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
  for (store::AppliedFinished& f : applied->finished) {
    if (f.not_held.empty()) {
      spdlog::info("experiment {} attempt {} finished on {}: {}", f.ack.experiment_id(),
                   f.ack.attempt(), batch.session->name(), f.state);
    } else {
      spdlog::warn("worker {}: finished {}/{}: {}", batch.session->name(), f.ack.experiment_id(),
                   f.ack.attempt(), f.not_held);
    }
    xv::v1::DaemonMessage msg;
    *msg.mutable_ack() = std::move(f.ack);
    batch.session->Push(std::move(msg));
  }
}

}  // namespace xv::daemon
