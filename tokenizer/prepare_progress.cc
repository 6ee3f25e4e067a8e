#include "tokenizer/prepare_progress.h"

#include <unistd.h>

#include <cstdio>

namespace xv::tok {

PrepareProgress::PrepareProgress(std::string phase, uint64_t total, bool enabled, Unit unit,
                                 std::string count_label, double interval_s)
    : phase_(std::move(phase)),
      total_(total),
      enabled_(enabled),
      unit_(unit),
      count_label_(std::move(count_label)),
      tty_(enabled && ::isatty(STDERR_FILENO) == 1),
      interval_s_(tty_ ? 0.1 : interval_s),
      start_(std::chrono::steady_clock::now()),
      last_print_(start_) {}

PrepareProgress::~PrepareProgress() { Finish(); }

void PrepareProgress::Report() {
  if (!enabled_ || finished_) return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_print_).count() < interval_s_) return;
  last_print_ = now;
  Print(false);
}

void PrepareProgress::Finish() {
  if (!enabled_ || finished_) return;
  finished_ = true;
  Print(true);
}

void PrepareProgress::Print(bool final_line) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const uint64_t done = done_.load(std::memory_order_relaxed);
  const bool bytes = unit_ == Unit::kBytes;
  const double scale = bytes ? 1e6 : 1.0;
  const std::string unit = bytes ? "MB" : count_label_;
  const std::string rate_unit = bytes ? "MB/s" : count_label_ + "/s";
  const double mb = static_cast<double>(done) / scale;
  const double total_mb = static_cast<double>(total_) / scale;
  const double rate = elapsed > 0 ? mb / elapsed : 0.0;
  const double frac = total_ > 0 ? std::min(1.0, static_cast<double>(done) / total_) : 1.0;
  if (tty_) {
    constexpr int kWidth = 30;
    char bar[kWidth + 1];
    const int filled = static_cast<int>(frac * kWidth);
    for (int i = 0; i < kWidth; ++i) bar[i] = i < filled ? '#' : '.';
    bar[kWidth] = '\0';
    std::fprintf(stderr, "\r%-9s [%s] %5.1f%% %8.1f/%.1f MB %7.1f MB/s %6.1fs%s", phase_.c_str(),
                 bar, 100 * frac, mb, total_mb, rate, elapsed, final_line ? "\n" : "");
  } else {
    std::fprintf(stderr, "%s: %5.1f%% %.*f/%.*f %s %.1f %s %.1fs%s\n", phase_.c_str(), 100 * frac,
                 bytes ? 1 : 0, mb, bytes ? 1 : 0, total_mb, unit.c_str(), rate, rate_unit.c_str(),
                 elapsed, final_line ? " done" : "");
  }
  std::fflush(stderr);
}

}  // namespace xv::tok
