// KillEscalation: when the worker ends a trainer it did not see end by itself. A cancel or the
// hard deadline sends SIGTERM to the trainer's process group; a group still alive kill_grace_s
// after it gets SIGKILL; once the trainer is reaped its output is read for reaped_linger_s more at
// most (a grandchild holding the pipes open must not keep the attempt alive). A value type over
// the clock the caller passes in: it starts no process and sends no signal, so every case is
// testable without a child.
//
// Thread-safety: none; one escalation per attempt, used by the attempt's thread.
#pragma once

#include <chrono>
#include <optional>

#include "worker/exit_classification.h"

namespace xv::worker {

// What the attempt does about its trainer now.
enum class KillStep {
  kNone,  // nothing: keep reading its output
  kTerm,  // SIGTERM the process group (reason() says why)
  kKill,  // SIGKILL the process group (the grace after SIGTERM ran out)
};

class KillEscalation {
 public:
  using Clock = std::chrono::steady_clock;

  struct Limits {
    double deadline_s = 0;         // from the start; <= 0: no deadline
    double kill_grace_s = 5.0;     // between SIGTERM and SIGKILL
    double reaped_linger_s = 2.0;  // reading after the trainer was reaped
  };

  KillEscalation(Limits limits, Clock::time_point started_at);

  // The step due at `now`, returned once (the caller takes it at once). Before the trainer is
  // reaped, a cancel (`cancel_requested`) or a deadline passed (strictly more than deadline_s
  // since the start) leads to kTerm, the first one seen giving reason(); a later cancel or
  // deadline changes nothing. kKill follows when strictly more than kill_grace_s passed since the
  // kTerm. Call it until it returns kNone to take every step due (kTerm and kKill both, with a
  // zero grace).
  KillStep Next(Clock::time_point now, bool cancel_requested);

  // The trainer was reaped at `now`; a cancel or deadline after it starts no kTerm.
  void MarkReaped(Clock::time_point now);
  bool reaped() const { return reaped_; }

  // After the trainer was reaped: stop reading its output, because its pipes are closed
  // (`pipes_open` false) or reaped_linger_s passed (strictly). Always false before.
  bool StopReading(Clock::time_point now, bool pipes_open) const;

  // When Next returns a step if no cancel comes: the deadline, or the end of the grace after
  // kTerm; nullopt when no step is pending (no deadline, kKill sent, or reaped before kTerm).
  std::optional<Clock::time_point> NextStepAt() const;

  // Why the worker ended the trainer: kNone until a kTerm was returned.
  KillReason reason() const { return reason_; }
  double deadline_s() const { return limits_.deadline_s; }

 private:
  const Limits limits_;
  const Clock::time_point started_at_;
  KillReason reason_ = KillReason::kNone;
  bool term_sent_ = false;
  bool kill_sent_ = false;
  bool reaped_ = false;
  Clock::time_point term_at_;
  Clock::time_point reaped_at_;
};

}  // namespace xv::worker
