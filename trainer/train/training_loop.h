// RunTrainingLoop: upstream train.py's loop. Each optimizer step runs grad_accum_steps micro-steps
// (forward under autocast on GPUs, loss / grad_accum_steps backward, next batch), sets the
// schedules from the progress of the time budget (LrMultiplier, MuonMomentum, weight decay x (1 -
// progress)), steps the optimizer and drops the gradients. The micro-step losses stay on the device
// together with the global gradient norm (taken before the optimizer step) and every parameter's
// norm (after it) in one host read per step (StepHealthProbe): a non-finite loss or one above 100,
// a non-finite gradient norm or a non-finite parameter writes a `nan` event naming what went
// non-finite and ends the loop at once (outcome.diverged). The read comes after the optimizer step
// is queued, where the loop synchronises for its step timing anyway, so it adds no stall; the two
// norms cost one extra read pass over the gradients and one over the parameters (CPU figure in
// step_health_probe.h). Steps 0..10 are not timed; the loop stops after the first later
// step whose timed total reaches the budget. `step` events go out a few per second (always the
// last); stderr gets upstream's progress line at the same rate. Thread-safety: runs on the calling
// thread; model, optimizer and batches are used only by it.
#pragma once

#include <cstdint>
#include <optional>

#include <torch/torch.h>

#include "common/status.h"
#include "trainer/device/peak_flops_table.h"
#include "trainer/events/event_writer.h"
#include "trainer/model/gpt.h"
#include "trainer/optim/muon_adamw.h"
#include "trainer/train/batch_source.h"
#include "trainer/train/divergence_check.h"
#include "trainer/train/schedules.h"
#include "trainer/train/time_budget.h"

namespace xv::trainer {

struct TrainingLoopSettings {
  int64_t grad_accum_steps = 1;
  int64_t tokens_per_step = 0;  // total_batch_size
  double flops_per_token = 0;
  PeakFlops peak;  // for per-step MFU (null when unknown)
  ScheduleOptions schedules;
  torch::Device device = torch::Device(torch::kCPU);
  torch::ScalarType autocast_dtype = torch::kFloat;  // kFloat: no autocast
  double event_interval_s = 0.25;
};

struct TrainingOutcome {
  int64_t steps = 0;            // optimizer steps completed
  int64_t timed_steps = 0;      // steps whose time counted
  double training_seconds = 0;  // timed total
  double last_smooth_loss = 0;  // debiased EMA
  int64_t last_epoch = 0;
  bool diverged = false;
  int64_t diverged_step = -1;
  Divergence divergence;  // what went non-finite (valid when diverged)
};

// `budget` measures steps with its clock; `events` gets `step` (and `nan`) events.
Status RunTrainingLoop(GPT& model, MuonAdamW& optimizer, BatchSource* train_batches,
                       const TrainingLoopSettings& settings, TimeBudget* budget,
                       EventWriter* events, TrainingOutcome* outcome);

}  // namespace xv::trainer
