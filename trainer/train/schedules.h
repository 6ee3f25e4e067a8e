// The training schedules of upstream train.py, as pure functions of progress (timed seconds /
// budget, clamped to [0, 1]) or of the step index:
//  - LrMultiplier: linear warmup over warmup_ratio, flat, then linear warmdown over the last
//    warmdown_ratio of progress to final_lr_frac.
//  - MuonMomentum: linear from momentum_start to momentum_end over momentum_warmup_steps, then
//  flat.
//  - MuonWeightDecay: weight_decay * (1 - progress).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>

namespace xv {
struct Recipe;
}

namespace xv::trainer {

struct ScheduleOptions {
  double warmup_ratio = 0.0;
  double warmdown_ratio = 0.5;
  double final_lr_frac = 0.0;
  double muon_momentum_start = 0.85;
  double muon_momentum_end = 0.95;
  int muon_momentum_warmup_steps = 300;
  double weight_decay = 0.2;
};

// The schedule knobs of a recipe.
ScheduleOptions ScheduleOptionsFromRecipe(const Recipe& recipe);

// Upstream get_lr_multiplier. A warmdown_ratio of 0 means no warmdown (multiplier 1 after warmup).
double LrMultiplier(double progress, const ScheduleOptions& o);
// Upstream get_muon_momentum (step is the 0-based optimizer step about to run).
double MuonMomentum(int64_t step, const ScheduleOptions& o);
// Upstream get_weight_decay.
double MuonWeightDecay(double progress, const ScheduleOptions& o);

}  // namespace xv::trainer
