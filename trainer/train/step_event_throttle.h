// StepEventThrottle: lets through at most one `step` event per min_interval seconds (a few per
// second), always the first and the last step. Thread-safety: not thread-safe; owned by the
// training loop.
#pragma once

namespace xv::trainer {

class StepEventThrottle {
 public:
  explicit StepEventThrottle(double min_interval_s = 0.25) : min_interval_(min_interval_s) {}

  // `now` in seconds (any monotonic origin). True when the event should be written; records it.
  bool ShouldEmit(double now, bool is_last) {
    if (is_last || !emitted_any_ || now - last_ >= min_interval_) {
      emitted_any_ = true;
      last_ = now;
      return true;
    }
    return false;
  }

 private:
  double min_interval_;
  bool emitted_any_ = false;
  double last_ = 0;
};

}  // namespace xv::trainer
