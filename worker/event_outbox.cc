#include "worker/event_outbox.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "common/untrusted_text.h"
#include "worker/message_text_repair.h"

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

// "event 7 (type error, 3145728 bytes)" or "the Finished (state succeeded)".
std::string Describe(const v1::WorkerMessage& m) {
  if (m.has_event()) {
    return "event " + std::to_string(m.event().seq()) + " (type " +
           QuoteExcerpt(m.event().type(), 40) + ", " + std::to_string(m.event().json().size()) +
           " bytes)";
  }
  return "the Finished (state " + QuoteExcerpt(m.finished().state(), 40) + ")";
}

// What the daemon gets in place of a message set aside.
v1::WorkerMessage StandInFor(const v1::WorkerMessage& m, const std::string& reason) {
  v1::WorkerMessage out;
  if (m.has_event()) {
    v1::TrainerEvent* ev = out.mutable_event();
    ev->set_experiment_id(m.event().experiment_id());
    ev->set_attempt(m.event().attempt());
    ev->set_seq(m.event().seq());
    ev->set_unix_ms(m.event().unix_ms());
    ev->set_type("quarantined");
    nlohmann::json j = {{"type", "quarantined"},
                        {"original_type", SanitizeAndTruncateUtf8(m.event().type(), kMaxKindBytes)},
                        {"original_bytes", m.event().json().size()},
                        {"reason", reason}};
    ev->set_json(j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    return out;
  }
  const v1::Finished& f = m.finished();
  v1::Finished* fin = out.mutable_finished();
  fin->set_experiment_id(f.experiment_id());
  fin->set_attempt(f.attempt());
  fin->set_exit_code(f.exit_code());
  fin->set_signal(f.signal());
  fin->set_wall_seconds(f.wall_seconds());
  fin->set_last_seq(f.last_seq());
  fin->set_state("failed");
  fin->set_failure_kind("crashed");
  fin->set_failure_detail("xv-worker: the trainer's Finished report (state " +
                          SanitizeAndTruncateUtf8(f.state(), kMaxKindBytes) + ") " + reason);
  return out;
}

}  // namespace

EventOutbox::~EventOutbox() {
  {
    MutexLock lock(&mu_);
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
    MutexLock lock(&mu_);
    if (spool_) return Status::FailedPrecondition("outbox: a spool is attached already");
    std::deque<Held> loaded;
    for (auto& a : *recovered) {
      for (auto& m : a.messages) {
        // A spool written by an older worker may hold text the daemon would refuse.
        std::vector<std::string> fixed = RepairMessageText(&m);
        if (!fixed.empty()) {
          spdlog::warn("spool: experiment {} attempt {}: invalid UTF-8 in {} repaired",
                       a.experiment_id, a.attempt, fixed.front());
        }
        loaded.push_back(Held{m});
      }
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
  mu_.lock();
  while (!stopping_) {
    cv_.wait_for(mu_, std::chrono::milliseconds(EventSpool::kSyncIntervalMs), [&] {
      mu_.AssertHeld();
      return stopping_;
    });
    mu_.unlock();
    Status st = spool_->SyncDirty();
    if (!st.ok()) spdlog::error("spool: {}", st.ToString());
    mu_.lock();
  }
  mu_.unlock();
}

void EventOutbox::Push(const v1::WorkerMessage& msg) {
  if (!msg.has_event() && !msg.has_finished()) return;
  Held held{msg};
  // Whatever reaches the spool and the daemon is valid UTF-8 (worker/message_text_repair.h).
  std::vector<std::string> fixed = RepairMessageText(&held.msg);
  if (!fixed.empty()) {
    int64_t exp = 0;
    int32_t att = 0;
    KeyOf(held.msg, &exp, &att);
    spdlog::warn("experiment {} attempt {}: invalid UTF-8 in {} replaced by U+FFFD", exp, att,
                 fixed.front());
  }
  {
    MutexLock lock(&mu_);
    if (spool_) {
      Status st = spool_->Append(held.msg);
      if (!st.ok()) {
        spdlog::error("spool: {} (the message is kept in memory only)", st.ToString());
      }
    }
    messages_.push_back(std::move(held));
  }
  cv_.notify_all();
}

void EventOutbox::CountFailedSendLocked(size_t i, Clock::time_point now) {
  Held& h = messages_[i];
  ++h.failed_sends;
  if (h.failed_sends >= 2) {
    auto backoff = retry_.first_backoff;
    for (int k = 2; k < h.failed_sends && backoff < retry_.max_backoff; ++k) backoff *= 2;
    h.not_before = now + std::min(backoff, retry_.max_backoff);
  }
}

void EventOutbox::ExpireUnackedLocked(Clock::time_point now) {
  bool expired = false;
  for (size_t i = 0; i < next_unsent_; ++i) {
    if (now - messages_[i].sent_at < retry_.ack_timeout) continue;
    CountFailedSendLocked(i, now);
    expired = true;
  }
  if (!expired) return;
  spdlog::warn("xvd acknowledged nothing of {} message(s) for {} ms; sending them again",
               next_unsent_, retry_.ack_timeout.count());
  next_unsent_ = 0;
}

void EventOutbox::QuarantineLocked(size_t i) {
  const v1::WorkerMessage original = messages_[i].msg;
  const bool was_stand_in = messages_[i].stand_in;
  int64_t exp = 0;
  int32_t att = 0;
  KeyOf(original, &exp, &att);
  std::string reason = "was sent " + std::to_string(messages_[i].failed_sends) +
                       " times and never acknowledged by xvd (each session ended or no "
                       "acknowledgement came)";
  std::string where = "not kept: the worker has no spool";
  if (was_stand_in) {
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(i));
  } else {
    if (spool_) where = "kept in " + spool_->QuarantinePathOf(exp, att);
    messages_[i] = Held{StandInFor(original, reason + "; set aside, " + where)};
    messages_[i].stand_in = true;
  }
  ++quarantined_;
  spdlog::warn(
      "experiment {} attempt {}: {} {}; set aside ({}){}", exp, att, Describe(original), reason,
      where,
      was_stand_in ? "; it was a stand-in already, dropped" : "; xvd gets a stand-in in its place");
  if (!spool_) return;
  // The quarantine file first, then the spool without the original: a crash in between replays
  // the original once more, never loses it.
  Status st = spool_->Quarantine(original, reason, HeldOfLocked({exp, att}));
  if (!st.ok()) spdlog::error("spool: {}", st.ToString());
}

bool EventOutbox::NextToSend(v1::WorkerMessage* msg, std::chrono::milliseconds timeout,
                             size_t max_batch) {
  MutexLock lock(&mu_);
  const uint64_t gen = wake_generation_;
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    if (wake_generation_ != gen) return false;
    const Clock::time_point now = Clock::now();
    ExpireUnackedLocked(now);
    Clock::time_point wake_at = deadline;
    for (size_t i = 0; i < next_unsent_; ++i) {
      wake_at = std::min(wake_at, messages_[i].sent_at + retry_.ack_timeout);
    }
    if (next_unsent_ < messages_.size()) {
      if (messages_[next_unsent_].failed_sends >= retry_.max_failed_sends) {
        QuarantineLocked(next_unsent_);
        continue;
      }
      const Held& next = messages_[next_unsent_];
      bool in_flight_suspect = false;
      for (size_t i = 0; i < next_unsent_; ++i) in_flight_suspect |= messages_[i].failed_sends >= 2;
      const bool suspect = next.failed_sends >= 2;
      bool ready = !in_flight_suspect && !(suspect && next_unsent_ > 0);
      if (ready && suspect && now < next.not_before) {
        ready = false;
        wake_at = std::min(wake_at, next.not_before);
      }
      if (ready) {
        Held& h = messages_[next_unsent_++];
        h.sent_at = now;
        *msg = h.msg;
        if (max_batch > 1 && IsBatchable(h)) TakeBatchLocked(max_batch, now, msg);
        while (!spool_ && next_unsent_ > max_unacked_) {
          messages_.pop_front();
          --next_unsent_;
        }
        return true;
      }
    }
    if (now >= deadline) return false;
    cv_.wait_until(mu_, wake_at);
  }
}

bool EventOutbox::IsBatchable(const Held& h) {
  return h.msg.has_event() && h.failed_sends == 0 && !h.stand_in;
}

void EventOutbox::TakeBatchLocked(size_t max_batch, Clock::time_point now, v1::WorkerMessage* msg) {
  size_t bytes = msg->event().ByteSizeLong();
  size_t end = next_unsent_;
  while (end < messages_.size() && end - next_unsent_ + 1 < max_batch &&
         IsBatchable(messages_[end])) {
    const size_t size = messages_[end].msg.event().ByteSizeLong();
    if (bytes + size > kMaxBatchBytes) break;
    bytes += size;
    ++end;
  }
  if (end == next_unsent_) return;  // nothing else ready: the event goes alone
  v1::WorkerMessage batch;
  v1::EventBatch* events = batch.mutable_event_batch();
  *events->add_events() = msg->event();
  for (; next_unsent_ < end; ++next_unsent_) {
    Held& h = messages_[next_unsent_];
    h.sent_at = now;
    *events->add_events() = h.msg.event();
  }
  *msg = std::move(batch);
}

void EventOutbox::Wake() {
  {
    MutexLock lock(&mu_);
    ++wake_generation_;
  }
  cv_.notify_all();
}

std::vector<v1::WorkerMessage> EventOutbox::HeldOfLocked(const Key& key) const {
  std::vector<v1::WorkerMessage> out;
  for (const auto& h : messages_) {
    Key k;
    if (KeyOf(h.msg, &k.first, &k.second) && k == key) out.push_back(h.msg);
  }
  return out;
}

void EventOutbox::Ack(int64_t experiment_id, int32_t attempt, int64_t seq, bool finished) {
  MutexLock lock(&mu_);
  const Key key{experiment_id, attempt};
  std::deque<Held> kept;
  size_t kept_sent = 0;
  size_t dropped = 0;
  size_t left_of_attempt = 0;
  for (size_t i = 0; i < messages_.size(); ++i) {
    const auto& m = messages_[i].msg;
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
    kept.push_back(std::move(messages_[i]));
  }
  messages_.swap(kept);
  next_unsent_ = kept_sent;
  if (dropped > 0) cv_.notify_all();  // a suspect may wait for what was in flight before it
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
  MutexLock lock(&mu_);
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
    MutexLock lock(&mu_);
    const Clock::time_point now = Clock::now();
    for (size_t i = 0; i < next_unsent_; ++i) CountFailedSendLocked(i, now);
    next_unsent_ = 0;
  }
  cv_.notify_all();
}

std::vector<v1::RunningAttempt> EventOutbox::HeldAttempts() const {
  MutexLock lock(&mu_);
  std::map<Key, v1::RunningAttempt> by_attempt;
  for (const auto& h : messages_) {
    const auto& m = h.msg;
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
  MutexLock lock(&mu_);
  return messages_.size() - next_unsent_;
}

size_t EventOutbox::held() const {
  MutexLock lock(&mu_);
  return messages_.size();
}

size_t EventOutbox::quarantined() const {
  MutexLock lock(&mu_);
  return quarantined_;
}

}  // namespace xv::worker
