#include "trainer/train/training_loop.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "trainer/device/autocast_scope.h"
#include "trainer/device/kernel_profile_window.h"
#include "trainer/eval/bpb_evaluator.h"
#include "trainer/train/divergence_check.h"
#include "trainer/train/step_event_throttle.h"
#include "trainer/train/step_health_probe.h"

namespace xv::trainer {

namespace {

void SynchronizeIfGpu(const torch::Device& device) {
  if (device.is_cuda()) torch::cuda::synchronize(device.index());
}

}  // namespace

Status RunTrainingLoop(GPT& model, MuonAdamW& optimizer, BatchSource* train_batches,
                       const TrainingLoopSettings& s, TimeBudget* budget, EventWriter* events,
                       TrainingOutcome* outcome) {
  *outcome = TrainingOutcome();
  model->train();
  const bool stderr_tty = isatty(STDERR_FILENO) != 0;
  StepEventThrottle throttle(s.event_interval_s);
  SteadyTrainingClock wall;  // for throttling only; timing goes through `budget`
  StepHealthProbe health_probe(model->NamedParameters());

  TokenBatch batch;
  XV_RETURN_IF_ERROR(train_batches->Next(&batch));
  auto [x, y] = BatchToTensors(batch, s.device);
  int64_t epoch = batch.epoch;

  double smooth_loss = 0;
  const double ema_beta = 0.9;
  KernelProfileWindow profile = KernelProfileWindow::FromEnvironment();
  for (int64_t step = 0;; ++step) {
    SynchronizeIfGpu(s.device);
    profile.BeforeStep(step);
    budget->BeginStep(step);
    std::vector<torch::Tensor> micro_losses;
    micro_losses.reserve(s.grad_accum_steps);
    for (int64_t micro = 0; micro < s.grad_accum_steps; ++micro) {
      torch::Tensor loss;
      {
        AutocastScope autocast(s.device, s.autocast_dtype);
        loss = model->forward(x, y);
      }
      micro_losses.push_back(loss.detach());
      (loss / static_cast<double>(s.grad_accum_steps)).backward();
      XV_RETURN_IF_ERROR(train_batches->Next(&batch));
      std::tie(x, y) = BatchToTensors(batch, s.device);
      epoch = batch.epoch;
    }
    health_probe.MeasureGradients();
    const double progress = budget->Progress();
    const double lrm = LrMultiplier(progress, s.schedules);
    const double momentum = MuonMomentum(step, s.schedules);
    optimizer.SetSchedule(lrm, momentum, /*weight_decay_multiplier=*/1.0 - progress);
    optimizer.Step();
    health_probe.MeasureParameters();
    optimizer.ZeroGrad();

    // The one host read of the step: every micro-step loss, the gradient norm and the parameter
    // norms at once.
    const StepHealth health = health_probe.Read(micro_losses);
    if (auto bad = FirstDivergence(health, health_probe.parameter_names())) {
      budget->EndStep();
      outcome->diverged = true;
      outcome->diverged_step = step;
      outcome->divergence = *bad;
      outcome->steps = step + 1;
      nlohmann::json fields = {
          {"step", step},
          {"micro_step", bad->micro_step >= 0 ? nlohmann::json(bad->micro_step) : nullptr},
          {"what", bad->what},
          {"value", bad->value_text}};
      if (!bad->parameter.empty()) fields["parameter"] = bad->parameter;
      events->Emit("nan", fields);
      std::fprintf(stderr, "\n%s: diverged\n", DescribeDivergence(*bad, step).c_str());
      return Status::Ok();
    }
    const double train_loss = health.micro_step_losses.back();

    SynchronizeIfGpu(s.device);
    const double dt = budget->EndStep();
    profile.AfterStep(step);

    smooth_loss = ema_beta * smooth_loss + (1 - ema_beta) * train_loss;
    const double debiased = smooth_loss / (1 - std::pow(ema_beta, static_cast<double>(step + 1)));
    const double tok_per_sec = dt > 0 ? static_cast<double>(s.tokens_per_step) / dt : 0;
    auto mfu = MfuPercent(s.flops_per_token, tok_per_sec, s.peak);
    const bool last = budget->Exhausted();
    outcome->steps = step + 1;
    outcome->last_smooth_loss = debiased;
    outcome->last_epoch = epoch;
    if (throttle.ShouldEmit(wall.NowSeconds(), last)) {
      events->Emit("step", {{"step", step},
                            {"loss", FiniteOrNull(debiased)},
                            {"lrm", lrm},
                            {"dt_ms", dt * 1000.0},
                            {"tok_per_sec", tok_per_sec},
                            {"mfu_percent", mfu ? nlohmann::json(*mfu) : nlohmann::json(nullptr)},
                            {"progress", progress},
                            {"remaining_s", budget->remaining_seconds()},
                            {"epoch", epoch}});
      char mfu_text[32];
      if (mfu) {
        std::snprintf(mfu_text, sizeof(mfu_text), "%.1f%%", *mfu);
      } else {
        std::snprintf(mfu_text, sizeof(mfu_text), "unknown");
      }
      std::fprintf(stderr,
                   "%sstep %05lld (%.1f%%) | loss: %.6f | lrm: %.2f | dt: %.0fms | tok/sec: %lld | "
                   "mfu: %s | epoch: %lld | remaining: %.0fs    %s",
                   stderr_tty ? "\r" : "", static_cast<long long>(step), 100.0 * progress, debiased,
                   lrm, dt * 1000.0, static_cast<long long>(tok_per_sec), mfu_text,
                   static_cast<long long>(epoch), budget->remaining_seconds(),
                   stderr_tty ? "" : "\n");
      std::fflush(stderr);
    }
    if (last) break;
  }
  if (stderr_tty) std::fprintf(stderr, "\n");
  outcome->timed_steps = budget->timed_steps();
  outcome->training_seconds = budget->timed_seconds();
  return Status::Ok();
}

}  // namespace xv::trainer
