// Divergence rule of the training loop: a micro-step loss that is non-finite or above 100 ends the
// run (upstream's fast fail, which also catches the NaN upstream would only see as a comparison
// failure). The loop keeps the micro-step losses on the device and reads them once per step; this
// function judges the host copy. Torch-free. Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace xv::trainer {

inline constexpr double kDivergedLossThreshold = 100.0;

struct DivergedLoss {
  int64_t micro_step = 0;
  double value = 0;
  std::string value_text;  // "nan", "inf", "-inf" or the number (the `value` of the nan event)
};

// The first loss of `micro_step_losses` that is non-finite or > kDivergedLossThreshold, if any.
std::optional<DivergedLoss> FirstDivergedLoss(const std::vector<float>& micro_step_losses);

}  // namespace xv::trainer
