#include "worker/event_outbox.h"

#include <algorithm>
#include <map>

namespace xv::worker {

void EventOutbox::Push(const v1::WorkerMessage& msg) {
  if (!msg.has_event() && !msg.has_finished()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
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
  while (next_unsent_ > max_unacked_) {
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

void EventOutbox::Ack(int64_t experiment_id, int32_t attempt, int64_t seq, bool finished) {
  std::lock_guard<std::mutex> lock(mu_);
  std::deque<v1::WorkerMessage> kept;
  size_t kept_sent = 0;
  for (size_t i = 0; i < messages_.size(); ++i) {
    const auto& m = messages_[i];
    bool acked = false;
    if (m.has_event()) {
      acked = m.event().experiment_id() == experiment_id && m.event().attempt() == attempt &&
              m.event().seq() <= seq;
    } else if (m.has_finished()) {
      acked = finished && m.finished().experiment_id() == experiment_id &&
              m.finished().attempt() == attempt;
    }
    if (acked) continue;
    if (i < next_unsent_) ++kept_sent;
    kept.push_back(m);
  }
  messages_.swap(kept);
  next_unsent_ = kept_sent;
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
  std::map<std::pair<int64_t, int32_t>, v1::RunningAttempt> by_attempt;
  for (const auto& m : messages_) {
    int64_t id = m.has_event() ? m.event().experiment_id() : m.finished().experiment_id();
    int32_t att = m.has_event() ? m.event().attempt() : m.finished().attempt();
    auto& ra = by_attempt[{id, att}];
    ra.set_experiment_id(id);
    ra.set_attempt(att);
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
