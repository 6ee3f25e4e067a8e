#include "trainer/train/divergence_check.h"

#include <cmath>
#include <sstream>

namespace xv::trainer {

std::string DivergenceValueText(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

std::optional<DivergedLoss> FirstDivergedLoss(const std::vector<float>& losses) {
  for (size_t i = 0; i < losses.size(); ++i) {
    double v = losses[i];
    if (std::isfinite(v) && v <= kDivergedLossThreshold) continue;
    DivergedLoss d;
    d.micro_step = static_cast<int64_t>(i);
    d.value = v;
    d.value_text = DivergenceValueText(v);
    return d;
  }
  return std::nullopt;
}

std::optional<Divergence> FirstDivergence(const StepHealth& health,
                                          const std::vector<std::string>& parameter_names) {
  Divergence d;
  if (auto loss = FirstDivergedLoss(health.micro_step_losses)) {
    d.what = "loss";
    d.micro_step = loss->micro_step;
    d.value = loss->value;
    d.value_text = loss->value_text;
    return d;
  }
  if (!std::isfinite(health.grad_norm)) {
    d.what = "grad_norm";
    d.value = health.grad_norm;
    d.value_text = DivergenceValueText(d.value);
    return d;
  }
  for (size_t i = 0; i < health.parameter_norms.size(); ++i) {
    if (std::isfinite(health.parameter_norms[i])) continue;
    d.what = "parameter";
    d.value = health.parameter_norms[i];
    d.value_text = DivergenceValueText(d.value);
    d.parameter = i < parameter_names.size() ? parameter_names[i] : "#" + std::to_string(i);
    return d;
  }
  return std::nullopt;
}

std::string DescribeDivergence(const Divergence& d, int64_t step) {
  const std::string at_step = std::to_string(step);
  if (d.what == "loss") {
    return "loss " + d.value_text + " at step " + at_step + ", micro-step " +
           std::to_string(d.micro_step) + " (non-finite or > 100)";
  }
  if (d.what == "grad_norm") {
    return "grad_norm " + d.value_text + " at step " + at_step + " (non-finite gradient)";
  }
  return "parameter " + d.parameter + ": norm " + d.value_text + " after the update of step " +
         at_step + " (non-finite parameter)";
}

}  // namespace xv::trainer
