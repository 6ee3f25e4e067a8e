// EventWriter: group commit of every session's trainer events. See event_writer.h.
#include "daemon/engine/event_writer.h"

#include <spdlog/spdlog.h>

#include <utility>

#include "common/flat_json_object.h"

namespace xv::daemon {

EventWriter::EventWriter(store::Store* store, std::function<void()> after_finished)
    : store_(store), after_finished_(std::move(after_finished)) {
  store_thread_ = std::thread([this] { RunStore(); });
  ack_thread_ = std::thread([this] { RunAcks(); });
}

EventWriter::~EventWriter() { Stop(); }

void EventWriter::Stop() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (store_thread_.joinable()) store_thread_.join();
  if (ack_thread_.joinable()) ack_thread_.join();
}

bool EventWriter::Enqueue(const std::shared_ptr<ConnectedWorker>& session,
                          std::vector<xv::v1::TrainerEvent> events) {
  if (events.empty()) return true;
  const size_t size = events.size();
  // Read here, on the session's thread, not on the store thread (store::ReadStepEventAhead).
  std::vector<store::StepEventFigures> read_ahead;
  read_ahead.reserve(size);
  FlatJsonObject scratch;
  for (const xv::v1::TrainerEvent& ev : events) {
    read_ahead.push_back(store::ReadStepEventAhead(ev, &scratch));
  }
  return EnqueueEntry(
      session, Queued{0, session, EventsChunk{std::move(events), std::move(read_ahead)}, {}}, size);
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

void EventWriter::RunStore() {
  std::vector<SessionBatch> batches;
  uint64_t last_ticket = 0;
  while (TakeQueued(&batches, &last_ticket)) {
    StoredTransaction stored;
    StoreBatches(std::move(batches), &stored);
    batches.clear();  // moved from: valid, empty
    stored.last_ticket = last_ticket;
    MutexLock lock(&mu_);
    // Marked before the next TakeQueued: a later Finished of a session that lost events here is
    // dropped too (TakeQueued).
    for (size_t i = 0; i < stored.batches.size(); ++i) {
      if (!stored.applied[i]) sessions_[stored.batches[i].session.get()].dropped = true;
    }
    cv_.wait(mu_, [this] {
      mu_.AssertHeld();
      return to_acknowledge_.size() < kMaxTransactionsToAcknowledge;
    });
    to_acknowledge_.push_back(std::move(stored));
    cv_.notify_all();
  }
  MutexLock lock(&mu_);
  store_ended_ = true;
  cv_.notify_all();
}

void EventWriter::RunAcks() {
  for (;;) {
    StoredTransaction stored;
    {
      MutexLock lock(&mu_);
      cv_.wait(mu_, [this] {
        mu_.AssertHeld();
        return store_ended_ || !to_acknowledge_.empty();
      });
      if (to_acknowledge_.empty()) return;  // the store thread ended, everything acknowledged
      stored = std::move(to_acknowledge_.front());
      to_acknowledge_.pop_front();
      cv_.notify_all();  // room for the store thread
    }
    for (size_t i = 0; i < stored.batches.size(); ++i) {
      if (stored.applied[i]) PushAcks(stored.batches[i], &*stored.applied[i]);
    }
    if (stored.finished_stored && after_finished_) after_finished_();
    const uint64_t last_ticket = stored.last_ticket;
    stored = StoredTransaction();  // frees the events and releases the sessions before the lock
    MutexLock lock(&mu_);
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
  auto size = [](const Queued& q) { return q.chunk.events.size() + q.finished.size(); };
  while (!queue_.empty() &&
         (taken == 0 || taken + size(queue_.front()) <= kMaxEventsPerTransaction)) {
    Queued& q = queue_.front();
    auto [it, added] = index.emplace(q.session.get(), batches->size());
    if (added) batches->push_back(SessionBatch{q.session, {}, {}});
    SessionBatch& batch = (*batches)[it->second];
    taken += size(q);
    if (!q.chunk.events.empty()) batch.chunks.push_back(std::move(q.chunk));
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

void EventWriter::StoreBatches(std::vector<SessionBatch> batches, StoredTransaction* stored) {
  stored->batches = std::move(batches);
  const std::vector<SessionBatch>& b = stored->batches;
  stored->applied.assign(b.size(), std::nullopt);
  std::vector<store::WorkerEvents> parts;
  parts.reserve(b.size());
  bool any_finished = false;
  for (const SessionBatch& batch : b) {
    std::vector<store::TrainerEventChunk> chunks;
    chunks.reserve(batch.chunks.size());
    for (const EventsChunk& chunk : batch.chunks) {
      chunks.push_back(store::TrainerEventChunk{&chunk.events, &chunk.read_ahead});
    }
    parts.emplace_back(batch.session->worker_id(), std::move(chunks), &batch.finished);
    any_finished = any_finished || !batch.finished.empty();
  }
  std::vector<store::AppliedEvents> applied;
  Status s = store_->attempts().ApplyTrainerEventBatches(parts, &applied);
  if (s.ok()) {
    for (size_t i = 0; i < b.size(); ++i) stored->applied[i] = std::move(applied[i]);
    stored->finished_stored = any_finished;
    return;
  }
  if (b.size() > 1) {
    spdlog::warn("storing the events of {} workers together: {}; storing them one by one", b.size(),
                 s.ToString());
  }
  // One by one: only the part at fault is dropped.
  for (size_t i = 0; i < b.size(); ++i) {
    std::vector<store::AppliedEvents> one;
    Status bs = b.size() > 1 ? store_->attempts().ApplyTrainerEventBatches({parts[i]}, &one) : s;
    if (!bs.ok()) {
      spdlog::error("worker {}: storing {} event(s) and {} finished report(s): {}",
                    b[i].session->name(), b[i].events(), b[i].finished.size(), bs.ToString());
      continue;
    }
    stored->applied[i] = std::move(one.front());
    stored->finished_stored = stored->finished_stored || !b[i].finished.empty();
  }
}

size_t EventWriter::SessionBatch::events() const {
  size_t n = 0;
  for (const EventsChunk& chunk : chunks) n += chunk.events.size();
  return n;
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
