// EventOutbox: the ordered queue of messages (trainer events and Finished) a worker owes the
// daemon. A message stays here from Push until the daemon acknowledges it (EventAck), so messages
// written to a stream that then broke are sent again after the reconnect (the daemon applies each
// (experiment, attempt, seq) at most once). Kept in memory; issue 6 spools it to disk.
//
// Thread-safety: every method is safe to call from any thread (guarded by mu_).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

#include "xv/v1/workers.pb.h"

namespace xv::worker {

class EventOutbox {
 public:
  // At most this many sent-but-unacknowledged messages are kept for a resend (a daemon that never
  // acknowledges must not grow the worker without bound); older ones are dropped first.
  explicit EventOutbox(size_t max_unacked = 20000) : max_unacked_(max_unacked) {}

  // Appends an event or a Finished message (other kinds are ignored).
  void Push(const v1::WorkerMessage& msg);

  // Waits until a message is ready to send or `timeout` passes. Returns true and fills *msg with
  // the oldest unsent message (now marked sent) or false on timeout or after Wake().
  bool NextToSend(v1::WorkerMessage* msg, std::chrono::milliseconds timeout);
  // Wakes any NextToSend waiter (used when the connection goes away).
  void Wake();

  // The daemon stored every event of (experiment, attempt) with seq <= `seq` (and the Finished
  // message when `finished`): those are forgotten.
  void Ack(int64_t experiment_id, int32_t attempt, int64_t seq, bool finished);

  // After a reconnect: every sent-but-unacknowledged message is sent again, in the original order.
  void ResendUnacked();

  // Attempts with messages still held: (experiment, attempt, last seq held, Finished held).
  std::vector<v1::RunningAttempt> HeldAttempts() const;

  size_t unsent() const;
  size_t held() const;

 private:
  const size_t max_unacked_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<v1::WorkerMessage> messages_;  // guarded by mu_; [0, next_unsent_) were sent
  size_t next_unsent_ = 0;                  // guarded by mu_
  uint64_t wake_generation_ = 0;            // guarded by mu_
};

}  // namespace xv::worker
