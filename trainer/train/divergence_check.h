// Divergence rule of the training loop. A step diverges when, in this order:
//   loss      a micro-step loss is non-finite or above 100 (upstream's fast fail, which also
//   catches
//             the NaN upstream would only see as a comparison failure);
//   grad_norm the global L2 norm of the gradients, taken after the backward passes and before the
//             optimizer step, is non-finite (a NaN/inf gradient element, or one whose square
//             overflows fp32);
//   parameter the L2 norm of a parameter tensor after the optimizer step is non-finite (the step
//             wrote a NaN/inf, or an element beyond ~1e19 whose square overflows fp32).
// The loop keeps these figures on the device and reads them in its one host read per step
// (StepHealthProbe); the functions here judge the host copy. Torch-free. Thread-safety: pure
// functions.
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

// One optimizer step's figures, as read from the device.
struct StepHealth {
  std::vector<float> micro_step_losses;
  float grad_norm = 0;                 // global L2 norm of every gradient before the optimizer step
  std::vector<float> parameter_norms;  // L2 norm of each parameter after the optimizer step
};

// What went wrong in a diverged step: the `nan` event's fields.
struct Divergence {
  std::string what;         // "loss" | "grad_norm" | "parameter"
  int64_t micro_step = -1;  // what == "loss": the first bad micro-step; -1 otherwise
  double value = 0;         // the loss, the grad norm, or the parameter's norm
  std::string value_text;   // "nan", "inf", "-inf" or the number
  std::string parameter;    // what == "parameter": name of the first parameter (in `names` order)
};

// Judges `health` by the rule above (loss first, then grad_norm, then parameter). `parameter_names`
// names health.parameter_norms one for one (a missing name reads as "#<index>").
std::optional<Divergence> FirstDivergence(const StepHealth& health,
                                          const std::vector<std::string>& parameter_names);

// One line for people (stderr, the `error` event's message), e.g. "loss nan at step 7, micro-step
// 1 (non-finite or > 100)", "grad_norm inf at step 7 (non-finite gradient)", "parameter
// transformer.wte.weight: norm nan after the update of step 7 (non-finite parameter)".
std::string DescribeDivergence(const Divergence& d, int64_t step);

// "nan", "inf", "-inf", or the number with 9 significant digits.
std::string DivergenceValueText(double v);

}  // namespace xv::trainer
