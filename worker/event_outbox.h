// EventOutbox: the ordered queue of messages (trainer events and Finished) a worker owes the
// daemon. A message stays here from Push until the daemon acknowledges it (EventAck), so messages
// written to a stream that then broke are sent again after the reconnect (the daemon applies each
// (experiment, attempt, seq) at most once). With a spool attached (AttachSpool) every message is
// also written to disk (worker/event_spool.h) before it can be sent, and what a previous worker
// process left unacknowledged is loaded back, so a worker restart loses nothing either.
//
// An acknowledgement with `finished` ends an attempt: everything held of it is forgotten and its
// spool file deleted. An attempt marked abandoned (its trainer died with a previous worker process;
// no Finished will ever come) is not reported by HeldAttempts, and its spool file is deleted once
// its last held event is acknowledged.
//
// Thread-safety: every method is safe to call from any thread (guarded by mu_).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "worker/event_spool.h"
#include "xv/v1/workers.pb.h"

namespace xv::worker {

class EventOutbox {
 public:
  // Without a spool, at most `max_unacked` sent-but-unacknowledged messages are kept for a resend
  // (a daemon that never acknowledges must not grow the worker without bound); older ones are
  // dropped first. With a spool nothing is dropped before it is acknowledged.
  explicit EventOutbox(size_t max_unacked = 20000) : max_unacked_(max_unacked) {}
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
  bool NextToSend(v1::WorkerMessage* msg, std::chrono::milliseconds timeout);
  // Wakes any NextToSend waiter (used when the connection goes away).
  void Wake();

  // The daemon stored every event of (experiment, attempt) with seq <= `seq` (and the Finished
  // message when `finished`, which ends the attempt): those are forgotten.
  void Ack(int64_t experiment_id, int32_t attempt, int64_t seq, bool finished);

  // No Finished will ever come for this attempt (see the class comment).
  void MarkAbandoned(int64_t experiment_id, int32_t attempt);

  // After a reconnect: every sent-but-unacknowledged message is sent again, in the original order.
  void ResendUnacked();

  // Attempts with messages still held, abandoned ones excepted: (experiment, attempt, last seq
  // held, Finished held).
  std::vector<v1::RunningAttempt> HeldAttempts() const;

  size_t unsent() const;
  size_t held() const;

 private:
  using Key = std::pair<int64_t, int32_t>;
  // Everything held of one attempt, in order (for the spool's compaction).
  std::vector<v1::WorkerMessage> HeldOfLocked(const Key& key) const;
  void SyncLoop();

  const size_t max_unacked_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::WorkerMessage> messages_;  // guarded by mu_; [0, next_unsent_) were sent
  size_t next_unsent_ = 0;                  // guarded by mu_
  uint64_t wake_generation_ = 0;            // guarded by mu_
  std::set<Key> abandoned_;                 // guarded by mu_
  std::unique_ptr<EventSpool> spool_;       // set once by AttachSpool; thread-safe itself
  bool stopping_ = false;                   // guarded by mu_; ends SyncLoop
  std::thread syncer_;
};

}  // namespace xv::worker
