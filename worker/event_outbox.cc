#include "worker/event_outbox.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

namespace xv::worker {
namespace {

bool KeyOf(const v1::WorkerMessage& m, int64_t* exp, int32_t* att) {
  if (m.has_event()) {
    *exp = m.event().experiment_id();
    *att = m.event().attempt();
    return true;
  }
  if (m.has_finished()) {
    *exp = m.finished().experiment_id();
    *att = m.finished().attempt();
    return true;
  }
  return false;
}

}  // namespace

EventOutbox::~EventOutbox() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (syncer_.joinable()) syncer_.join();
}

Status EventOutbox::AttachSpool(std::unique_ptr<EventSpool> spool,
                                std::vector<SpooledAttempt>* recovered) {
  std::vector<std::string> warnings;
  XV_RETURN_IF_ERROR(spool->Recover(recovered, &warnings));
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (spool_) return Status::FailedPrecondition("outbox: a spool is attached already");
    std::deque<v1::WorkerMessage> loaded;
    for (const auto& a : *recovered) {
      for (const auto& m : a.messages) loaded.push_back(m);
    }
    // Recovered messages go first, unsent; anything pushed before stays behind them.
    for (size_t i = 0; i < messages_.size(); ++i) loaded.push_back(messages_[i]);
    messages_.swap(loaded);
    next_unsent_ = 0;
    spool_ = std::move(spool);
  }
  syncer_ = std::thread([this] { SyncLoop(); });
  cv_.notify_all();
  return Status::Ok();
}

void EventOutbox::SyncLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    cv_.wait_for(lock, std::chrono::milliseconds(EventSpool::kSyncIntervalMs),
                 [&] { return stopping_; });
    lock.unlock();
    Status st = spool_->SyncDirty();
    if (!st.ok()) spdlog::error("spool: {}", st.ToString());
    lock.lock();
  }
}

void EventOutbox::Push(const v1::WorkerMessage& msg) {
  if (!msg.has_event() && !msg.has_finished()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (spool_) {
      Status st = spool_->Append(msg);
      if (!st.ok()) {
        spdlog::error("spool: {} (the message is kept in memory only)", st.ToString());
      }
    }
    messages_.push_back(msg);
  }
  cv_.notify_all();
}

bool EventOutbox::NextToSend(v1::WorkerMessage* msg, std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  const uint64_t gen = wake_generation_;
  cv_.wait_for(lock, timeout,
               [&] { return next_unsent_ < messages_.size() || wake_generation_ != gen; });
  if (next_unsent_ >= messages_.size() || wake_generation_ != gen) return false;
  *msg = messages_[next_unsent_++];
  while (!spool_ && next_unsent_ > max_unacked_) {
    messages_.pop_front();
    --next_unsent_;
  }
  return true;
}

void EventOutbox::Wake() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    ++wake_generation_;
  }
  cv_.notify_all();
}

std::vector<v1::WorkerMessage> EventOutbox::HeldOfLocked(const Key& key) const {
  std::vector<v1::WorkerMessage> out;
  for (const auto& m : messages_) {
    Key k;
    if (KeyOf(m, &k.first, &k.second) && k == key) out.push_back(m);
  }
  return out;
}

void EventOutbox::Ack(int64_t experiment_id, int32_t attempt, int64_t seq, bool finished) {
  std::lock_guard<std::mutex> lock(mu_);
  const Key key{experiment_id, attempt};
  std::deque<v1::WorkerMessage> kept;
  size_t kept_sent = 0;
  size_t dropped = 0;
  size_t left_of_attempt = 0;
  for (size_t i = 0; i < messages_.size(); ++i) {
    const auto& m = messages_[i];
    Key k;
    bool acked = false;
    if (KeyOf(m, &k.first, &k.second) && k == key) {
      acked = finished || (m.has_event() && m.event().seq() <= seq);
      if (!acked) ++left_of_attempt;
    }
    if (acked) {
      ++dropped;
      continue;
    }
    if (i < next_unsent_) ++kept_sent;
    kept.push_back(m);
  }
  messages_.swap(kept);
  next_unsent_ = kept_sent;
  if (!spool_) return;
  Status st = Status::Ok();
  if (finished || (left_of_attempt == 0 && abandoned_.count(key))) {
    abandoned_.erase(key);
    st = spool_->Remove(experiment_id, attempt);
  } else if (dropped > 0) {
    st = spool_->Acknowledge(experiment_id, attempt, seq, HeldOfLocked(key));
  }
  if (!st.ok()) spdlog::error("spool: {}", st.ToString());
}

void EventOutbox::MarkAbandoned(int64_t experiment_id, int32_t attempt) {
  std::lock_guard<std::mutex> lock(mu_);
  const Key key{experiment_id, attempt};
  if (!HeldOfLocked(key).empty()) {
    abandoned_.insert(key);
    return;
  }
  if (spool_) {
    Status st = spool_->Remove(experiment_id, attempt);
    if (!st.ok()) spdlog::error("spool: {}", st.ToString());
  }
}

void EventOutbox::ResendUnacked() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    next_unsent_ = 0;
  }
  cv_.notify_all();
}

std::vector<v1::RunningAttempt> EventOutbox::HeldAttempts() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::map<Key, v1::RunningAttempt> by_attempt;
  for (const auto& m : messages_) {
    Key k;
    if (!KeyOf(m, &k.first, &k.second) || abandoned_.count(k)) continue;
    auto& ra = by_attempt[k];
    ra.set_experiment_id(k.first);
    ra.set_attempt(k.second);
    if (m.has_event()) ra.set_last_seq(std::max(ra.last_seq(), m.event().seq()));
    if (m.has_finished()) {
      ra.set_finished(true);
      ra.set_last_seq(std::max(ra.last_seq(), m.finished().last_seq()));
    }
  }
  std::vector<v1::RunningAttempt> out;
  for (auto& [k, v] : by_attempt) out.push_back(v);
  return out;
}

size_t EventOutbox::unsent() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_.size() - next_unsent_;
}

size_t EventOutbox::held() const {
  std::lock_guard<std::mutex> lock(mu_);
  return messages_.size();
}

}  // namespace xv::worker
