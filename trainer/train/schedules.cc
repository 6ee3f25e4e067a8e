#include "trainer/train/schedules.h"

#include <algorithm>

#include "common/recipe.h"

namespace xv::trainer {

ScheduleOptions ScheduleOptionsFromRecipe(const Recipe& r) {
  ScheduleOptions o;
  o.warmup_ratio = r.warmup_ratio;
  o.warmdown_ratio = r.warmdown_ratio;
  o.final_lr_frac = r.final_lr_frac;
  o.muon_momentum_start = r.muon_momentum_start;
  o.muon_momentum_end = r.muon_momentum_end;
  o.muon_momentum_warmup_steps = r.muon_momentum_warmup_steps;
  o.weight_decay = r.weight_decay;
  return o;
}

double LrMultiplier(double progress, const ScheduleOptions& o) {
  if (progress < o.warmup_ratio) {
    return o.warmup_ratio > 0 ? progress / o.warmup_ratio : 1.0;
  }
  if (progress < 1.0 - o.warmdown_ratio) return 1.0;
  if (o.warmdown_ratio <= 0) return 1.0;
  double cooldown = (1.0 - progress) / o.warmdown_ratio;
  return cooldown * 1.0 + (1.0 - cooldown) * o.final_lr_frac;
}

double MuonMomentum(int64_t step, const ScheduleOptions& o) {
  double frac = o.muon_momentum_warmup_steps > 0
                    ? std::min(static_cast<double>(step) / o.muon_momentum_warmup_steps, 1.0)
                    : 1.0;
  return (1.0 - frac) * o.muon_momentum_start + frac * o.muon_momentum_end;
}

double MuonWeightDecay(double progress, const ScheduleOptions& o) {
  return o.weight_decay * (1.0 - progress);
}

}  // namespace xv::trainer
