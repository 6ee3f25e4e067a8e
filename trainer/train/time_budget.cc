#include "trainer/train/time_budget.h"

#include <algorithm>
#include <chrono>

namespace xv::trainer {

double SteadyTrainingClock::NowSeconds() {
  using namespace std::chrono;
  return duration_cast<duration<double>>(steady_clock::now().time_since_epoch()).count();
}

TimeBudget::TimeBudget(double budget_seconds, TrainingClock* clock, int64_t untimed_steps)
    : budget_(budget_seconds), clock_(clock), untimed_steps_(untimed_steps) {}

void TimeBudget::BeginStep(int64_t step) {
  current_step_ = step;
  step_start_ = clock_->NowSeconds();
}

double TimeBudget::EndStep() {
  double dt = clock_->NowSeconds() - step_start_;
  if (current_step_ > untimed_steps_) timed_seconds_ += dt;
  steps_done_ = current_step_ + 1;
  return dt;
}

double TimeBudget::Progress() const {
  if (budget_ <= 0) return 1.0;
  return std::min(timed_seconds_ / budget_, 1.0);
}

bool TimeBudget::Exhausted() const {
  return steps_done_ > untimed_steps_ && timed_seconds_ >= budget_;
}

double TimeBudget::remaining_seconds() const { return std::max(0.0, budget_ - timed_seconds_); }

int64_t TimeBudget::timed_steps() const {
  return std::max<int64_t>(0, steps_done_ - (untimed_steps_ + 1));
}

}  // namespace xv::trainer
