#include "client/views/progress_bar.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace xv::client {

std::string RenderProgressBar(double fraction, int width) {
  if (std::isnan(fraction)) fraction = 0;
  fraction = std::clamp(fraction, 0.0, 1.0);
  width = std::max(width, 1);
  int filled = static_cast<int>(std::floor(fraction * width + 1e-9));
  std::string bar = "[" + std::string(filled, '#') + std::string(width - filled, '-') + "]";
  char pct[16];
  std::snprintf(pct, sizeof(pct), " %3d%%", static_cast<int>(std::floor(fraction * 100 + 1e-9)));
  return bar + pct;
}

}  // namespace xv::client
