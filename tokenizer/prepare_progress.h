// PrepareProgress: progress of one phase of `xvctl prepare` on stderr. On a terminal it redraws one
// line (a bar, percent, MB done, MB/s -- or, with Unit::kCount, items done and items/s); otherwise
// (logs, CI) it prints a plain line at most every `interval_s` seconds and one at the end. Disabled
// instances print nothing.
// Thread-safety: Add() may be called from any thread; Report() and Finish() from one thread.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>

namespace xv::tok {

class PrepareProgress {
 public:
  enum class Unit { kBytes, kCount };
  // `count_label` names the items of Unit::kCount ("merges").
  PrepareProgress(std::string phase, uint64_t total, bool enabled, Unit unit = Unit::kBytes,
                  std::string count_label = "items", double interval_s = 2.0);
  ~PrepareProgress();

  void Add(uint64_t amount) { done_.fetch_add(amount, std::memory_order_relaxed); }
  // Prints if it is time to (cheap when not).
  void Report();
  // Prints the final line once.
  void Finish();

 private:
  void Print(bool final_line);

  const std::string phase_;
  const uint64_t total_;
  const bool enabled_;
  const Unit unit_;
  const std::string count_label_;
  const bool tty_;
  const double interval_s_;
  std::atomic<uint64_t> done_{0};
  const std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_print_;
  bool finished_ = false;
};

}  // namespace xv::tok
