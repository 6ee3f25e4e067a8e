// TimeBudget: upstream's time-budget rule. Steps 0..untimed_steps (0..10 upstream: the
// compile/warm-up steps) are not timed; every later step adds its wall time to the timed total; the
// loop stops after the first step, past the untimed ones, whose timed total reaches the budget.
// Progress for the schedules is timed total / budget, clamped to 1.
//
// The clock is behind TrainingClock so tests drive the rule with a fake one.
// Thread-safety: not thread-safe; owned by the training loop's thread.
#pragma once

#include <cstdint>

namespace xv::trainer {

// A monotonic clock in seconds. Implementations must be thread-compatible.
class TrainingClock {
 public:
  virtual ~TrainingClock() = default;
  virtual double NowSeconds() = 0;
};

// std::chrono::steady_clock.
class SteadyTrainingClock : public TrainingClock {
 public:
  double NowSeconds() override;
};

class TimeBudget {
 public:
  // `clock` is not owned and must outlive the budget.
  TimeBudget(double budget_seconds, TrainingClock* clock, int64_t untimed_steps = 10);

  // Marks the start of step `step` (0-based, consecutive).
  void BeginStep(int64_t step);
  // Marks the end of the step begun last; returns its duration in seconds and adds it to the timed
  // total when the step is past the untimed ones.
  double EndStep();

  // min(timed / budget, 1): the progress the schedules of the next step use.
  double Progress() const;
  // True when the loop must stop now: more than untimed_steps steps done and the timed total
  // reached the budget.
  bool Exhausted() const;

  double timed_seconds() const { return timed_seconds_; }
  double remaining_seconds() const;
  int64_t steps_done() const { return steps_done_; }
  // Steps whose time counted (those after the untimed ones).
  int64_t timed_steps() const;

 private:
  double budget_;
  TrainingClock* clock_;
  int64_t untimed_steps_;
  int64_t current_step_ = -1;
  double step_start_ = 0;
  double timed_seconds_ = 0;
  int64_t steps_done_ = 0;
};

}  // namespace xv::trainer
