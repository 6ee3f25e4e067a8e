#include "client/views/number_format.h"

#include <cmath>
#include <cstdio>

namespace xv::client {

std::string FormatFixed(double value, int decimals) {
  if (std::isnan(value)) return "-";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", decimals, value);
  return buf;
}

std::string FormatThousands(int64_t value) {
  bool negative = value < 0;
  uint64_t v = negative ? static_cast<uint64_t>(-(value + 1)) + 1 : static_cast<uint64_t>(value);
  std::string digits = std::to_string(v);
  std::string out;
  int count = 0;
  for (auto it = digits.rbegin(); it != digits.rend(); ++it) {
    if (count > 0 && count % 3 == 0) out.insert(out.begin(), ',');
    out.insert(out.begin(), *it);
    ++count;
  }
  return negative ? "-" + out : out;
}

std::string FormatThousands(double value) {
  if (std::isnan(value)) return "-";
  if (std::isinf(value)) return value > 0 ? "inf" : "-inf";
  return FormatThousands(static_cast<int64_t>(std::llround(value)));
}

std::string FormatDuration(double seconds) {
  if (std::isnan(seconds) || seconds < 0) return "-";
  char buf[64];
  if (seconds < 60) {
    std::snprintf(buf, sizeof(buf), "%.1fs", seconds);
  } else if (seconds < 3600) {
    int s = static_cast<int>(std::lround(seconds));
    std::snprintf(buf, sizeof(buf), "%dm%02ds", s / 60, s % 60);
  } else {
    int m = static_cast<int>(std::lround(seconds / 60));
    std::snprintf(buf, sizeof(buf), "%dh%02dm", m / 60, m % 60);
  }
  return buf;
}

}  // namespace xv::client
