#include "worker/kill_escalation.h"

#include "common/steady_clock_time.h"

namespace xv::worker {

KillEscalation::KillEscalation(Limits limits, Clock::time_point started_at)
    : limits_(limits), started_at_(started_at) {}

KillStep KillEscalation::Next(Clock::time_point now, bool cancel_requested) {
  if (reason_ == KillReason::kNone && !reaped_) {
    if (cancel_requested) {
      reason_ = KillReason::kCancel;
    } else if (limits_.deadline_s > 0 && SecondsBetween(started_at_, now) > limits_.deadline_s) {
      reason_ = KillReason::kDeadline;
    }
    if (reason_ != KillReason::kNone) {
      term_sent_ = true;
      term_at_ = now;
      return KillStep::kTerm;
    }
  }
  if (term_sent_ && !kill_sent_ && SecondsBetween(term_at_, now) > limits_.kill_grace_s) {
    kill_sent_ = true;
    return KillStep::kKill;
  }
  return KillStep::kNone;
}

void KillEscalation::MarkReaped(Clock::time_point now) {
  if (reaped_) return;
  reaped_ = true;
  reaped_at_ = now;
}

bool KillEscalation::StopReading(Clock::time_point now, bool pipes_open) const {
  if (!reaped_) return false;
  return !pipes_open || SecondsBetween(reaped_at_, now) > limits_.reaped_linger_s;
}

std::optional<KillEscalation::Clock::time_point> KillEscalation::NextStepAt() const {
  if (term_sent_) {
    if (kill_sent_) return std::nullopt;
    return term_at_ + std::chrono::duration_cast<Clock::duration>(
                          std::chrono::duration<double>(limits_.kill_grace_s));
  }
  if (reaped_ || limits_.deadline_s <= 0) return std::nullopt;
  return started_at_ + std::chrono::duration_cast<Clock::duration>(
                           std::chrono::duration<double>(limits_.deadline_s));
}

}  // namespace xv::worker
