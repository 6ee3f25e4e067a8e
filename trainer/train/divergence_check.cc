#include "trainer/train/divergence_check.h"

#include <cmath>
#include <sstream>

namespace xv::trainer {

std::optional<DivergedLoss> FirstDivergedLoss(const std::vector<float>& losses) {
  for (size_t i = 0; i < losses.size(); ++i) {
    double v = losses[i];
    if (std::isfinite(v) && v <= kDivergedLossThreshold) continue;
    DivergedLoss d;
    d.micro_step = static_cast<int64_t>(i);
    d.value = v;
    if (std::isnan(v)) {
      d.value_text = "nan";
    } else if (std::isinf(v)) {
      d.value_text = v > 0 ? "inf" : "-inf";
    } else {
      std::ostringstream os;
      os.precision(9);
      os << v;
      d.value_text = os.str();
    }
    return d;
  }
  return std::nullopt;
}

}  // namespace xv::trainer
