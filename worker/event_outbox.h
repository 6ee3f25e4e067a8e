// EventOutbox: the ordered queue of messages (trainer events and Finished) a worker owes the
// daemon. A message stays here from Push until the daemon acknowledges it, so what a broken stream
// lost is sent again after the reconnect (the daemon applies each (experiment, attempt, seq) at
// most once); with a spool attached (worker/event_spool.h) a worker restart loses nothing either.
// A message the daemon never takes is set aside after bounded resends (docs/worker.md § Messages
// xvd does not take; see NextToSend).
//
// Thread-safety: every method is safe to call from any thread (its state is guarded by mu_).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "worker/event_spool.h"
#include "xv/v1/workers.pb.h"

namespace xv::worker {

// How hard the outbox tries before it sets a message aside (see NextToSend).
struct OutboxRetryPolicy {
  int max_failed_sends = 5;
  std::chrono::milliseconds ack_timeout{60000};
  std::chrono::milliseconds first_backoff{1000};
  std::chrono::milliseconds max_backoff{30000};
};

class EventOutbox {
 public:
  // Without a spool, at most `max_unacked` sent-but-unacknowledged messages are kept for a resend
  // (a daemon that never acknowledges must not grow the worker without bound); older ones are
  // dropped first. With a spool nothing is dropped before it is acknowledged.
  explicit EventOutbox(size_t max_unacked = 20000, OutboxRetryPolicy retry = {})
      : max_unacked_(max_unacked), retry_(retry) {}
  ~EventOutbox();

  // Takes `spool`, loads what it recovered (queued unsent, ahead of anything pushed later) and
  // starts syncing its event records every EventSpool::kSyncIntervalMs. Call once, before Push.
  // *recovered describes the attempts found (see EventSpool::Recover).
  Status AttachSpool(std::unique_ptr<EventSpool> spool, std::vector<SpooledAttempt>* recovered);

  // Appends an event or a Finished message (other kinds are ignored). With a spool it is on disk
  // first (a Finished durably); a spool write error is logged and the message kept in memory.
  void Push(const v1::WorkerMessage& msg);

  // Waits until a message is ready to send or `timeout` passes. Returns true and fills *msg with
  // the oldest unsent message (now marked sent) or false on timeout or after Wake().
  // Bounded resending: a message sent and not acknowledged (the session ended, or no
  // acknowledgement within ack_timeout) counts a failed send. From its second on it is a suspect:
  // it is sent alone (nothing else in flight, nothing after it until acknowledged) and only after
  // a backoff (first_backoff, doubling up to max_backoff), so the one message a daemon cannot take
  // is told apart from the ones in flight with it. At max_failed_sends it is set aside: written
  // with its reason to the spool's quarantine file (EventSpool::Quarantine), warned about (its
  // experiment, attempt and seq), and replaced by a stand-in the daemon can store: an event by a
  // `quarantined` event of the same seq, a Finished by a `failed` one (failure_kind crashed) that
  // says why; that stand-in is what comes out. A stand-in that fails in turn is dropped.
  // Failed-send counts live in memory: a worker restart starts them again.
  // Batches: with max_batch > 1, an event never sent before comes out together with the events
  // after it that are ready and never sent before either (at most max_batch events and
  // kMaxBatchBytes), as one EventBatch message (when there is more than one); each is still held,
  // acknowledged and resent on its own, and a resend goes alone.
  bool NextToSend(v1::WorkerMessage* msg, std::chrono::milliseconds timeout, size_t max_batch = 1);
  // Wire bytes of the events of one batch, at most (one bigger event still goes alone).
  static constexpr size_t kMaxBatchBytes = 1 << 20;
  // Wakes any NextToSend waiter (used when the connection goes away).
  void Wake();

  // The daemon stored every event of (experiment, attempt) with seq <= `seq` (and the Finished
  // message when `finished`, which ends the attempt: everything held of it is forgotten and its
  // spool file deleted): those are forgotten.
  void Ack(int64_t experiment_id, int32_t attempt, int64_t seq, bool finished);

  // No Finished will ever come for this attempt (its trainer died with a previous worker
  // process): HeldAttempts leaves it out, and its spool file is deleted once its last held event
  // is acknowledged (at once when nothing of it is held).
  void MarkAbandoned(int64_t experiment_id, int32_t attempt);

  // After a reconnect: every sent-but-unacknowledged message counts a failed send and is sent
  // again, in the original order.
  void ResendUnacked();

  // Attempts with messages still held, abandoned ones excepted: (experiment, attempt, last seq
  // held, Finished held).
  std::vector<v1::RunningAttempt> HeldAttempts() const;

  size_t unsent() const;
  size_t held() const;
  // Messages set aside so far (for tests and logs).
  size_t quarantined() const;

 private:
  using Key = std::pair<int64_t, int32_t>;
  using Clock = std::chrono::steady_clock;
  struct Held {
    v1::WorkerMessage msg;
    int failed_sends = 0;          // sent without an acknowledgement (session end, ack timeout)
    Clock::time_point sent_at;     // when last sent
    Clock::time_point not_before;  // a suspect's backoff
    bool stand_in = false;         // replaces a message set aside; never replaced itself
  };
  // Everything held of one attempt, in order (for the spool's compaction).
  std::vector<v1::WorkerMessage> HeldOfLocked(const Key& key) const EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts a failed send of messages_[i] and sets its backoff.
  void CountFailedSendLocked(size_t i, Clock::time_point now) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An event that may join a batch: never sent before and not a stand-in.
  static bool IsBatchable(const Held& h);
  // messages_[next_unsent_ - 1] just came out as *msg: adds the batchable events after it (see
  // NextToSend), marks them sent and makes *msg an EventBatch when it took any.
  void TakeBatchLocked(size_t max_batch, Clock::time_point now, v1::WorkerMessage* msg)
      EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // In-flight messages unacknowledged for ack_timeout count a failed send and go out again.
  void ExpireUnackedLocked(Clock::time_point now) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sets messages_[i] aside (quarantine file, warning) and puts its stand-in in its place, or
  // drops it when it is a stand-in itself.
  void QuarantineLocked(size_t i) EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SyncLoop();

  const size_t max_unacked_;
  const OutboxRetryPolicy retry_;
  // Lock order: the outbox's mu_ before the spool's (EventSpool's methods are called under mu_).
  mutable Mutex mu_;
  std::condition_variable_any cv_;
  std::deque<Held> messages_ GUARDED_BY(mu_);  // [0, next_unsent_) were sent
  size_t quarantined_ GUARDED_BY(mu_) = 0;
  size_t next_unsent_ GUARDED_BY(mu_) = 0;
  uint64_t wake_generation_ GUARDED_BY(mu_) = 0;
  std::set<Key> abandoned_ GUARDED_BY(mu_);
  // Set once by AttachSpool (under mu_, before SyncLoop starts), read after; thread-safe itself.
  std::unique_ptr<EventSpool> spool_;
  bool stopping_ GUARDED_BY(mu_) = false;  // ends SyncLoop
  std::thread syncer_;
};

}  // namespace xv::worker
