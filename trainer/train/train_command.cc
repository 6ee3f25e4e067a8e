#include "trainer/train/train_command.h"

#include <cstdio>
#include <thread>

#include <ATen/Parallel.h>
#include <torch/torch.h>

#include "common/recipe.h"
#include "trainer/checkpoint/safetensors.h"
#include "trainer/device/compute_device.h"
#include "trainer/device/device_fingerprint.h"
#include "trainer/device/peak_flops_table.h"
#include "trainer/device/peak_memory.h"
#include "trainer/eval/bpb_evaluator.h"
#include "trainer/events/exit_codes.h"
#include "trainer/model/attention.h"
#include "trainer/model/gpt.h"
#include "trainer/model/speed_levers.h"
#include "trainer/optim/muon_adamw.h"
#include "trainer/train/recipe_loader.h"
#include "trainer/train/time_budget.h"
#include "trainer/train/training_data.h"
#include "trainer/train/training_loop.h"

namespace xv::trainer {

int ReportFailure(EventWriter* events, int exit_code, const std::string& message) {
  events->Emit("error", {{"kind", ErrorKindForExitCode(exit_code)}, {"message", message}});
  std::fprintf(stderr, "xv-train: error (%s): %s\n", ErrorKindForExitCode(exit_code),
               message.c_str());
  std::fflush(stderr);
  return exit_code;
}

namespace {

// Exit code for a data-path Status: bad arguments stay invalid_config, the rest is a data error.
int DataExitCode(const Status& s) {
  return s.code() == Status::Code::kInvalidArgument ? kExitInvalidConfig : kExitDataError;
}

torch::ScalarType AutocastDtypeFor(const Recipe& r, const ComputeDevice& d, std::string* ran) {
  if (d.is_cpu() || r.dtype == "float32") {
    *ran = "float32";
    return torch::kFloat;
  }
  *ran = r.dtype;
  return r.dtype == "float16" ? torch::kHalf : torch::kBFloat16;
}

nlohmann::json OptionalNumber(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

}  // namespace

int RunTrainCommand(const TrainCommandOptions& o, EventWriter* events) {
  // Recipe: file, overrides, validation.
  Recipe recipe;
  if (Status s = LoadRecipe(o.recipe_path, o.recipe_json_path, o.sets, &recipe); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  if (!o.device.empty()) recipe.device = o.device;
  if (o.data_dir.empty()) return ReportFailure(events, kExitInvalidConfig, "--data: required");

  // Data: vocabulary must match the recipe.
  std::unique_ptr<TrainingData> data;
  if (Status s = TrainingData::Open(o.data_dir, &data); !s.ok()) {
    return ReportFailure(events, DataExitCode(s), s.message());
  }
  if (data->vocab_size() != recipe.vocab_size) {
    return ReportFailure(events, kExitDataError,
                         "vocab_size: the recipe says " + std::to_string(recipe.vocab_size) +
                             " but the data directory " + o.data_dir + " has a tokenizer of " +
                             std::to_string(data->vocab_size()) +
                             " tokens (set vocab_size to match, or prepare matching data)");
  }
  ResolvedSizes sizes;
  if (Status s = ResolveSizes(recipe, &sizes); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }

  // Device, threads, seed.
  ComputeDevice device;
  if (Status s = SelectComputeDevice(recipe.device, &device); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  if (device.is_cpu()) {
    int threads =
        recipe.threads > 0 ? recipe.threads : static_cast<int>(std::thread::hardware_concurrency());
    if (threads > 0) at::set_num_threads(threads);
  }
  PeakFlops peak;
  if (Status s = LookupPeakFlops(device.name, device.is_cpu(), &peak); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  std::string dtype_ran;
  const torch::ScalarType autocast_dtype = AutocastDtypeFor(recipe, device, &dtype_ran);
  torch::manual_seed(static_cast<uint64_t>(recipe.seed));

  // Model and optimizer.
  GPTConfig cfg = GPTConfigFromRecipe(recipe, sizes);
  if (Status s = ValidateGPTConfig(cfg); !s.ok()) {
    return ReportFailure(events, kExitInvalidConfig, s.message());
  }
  GPT model(cfg);
  model->InitWeights();
  if (!o.init_from.empty()) {
    std::map<std::string, torch::Tensor> tensors;
    Status s = LoadSafetensors(o.init_from, &tensors);
    if (s.ok()) s = model->LoadParameters(tensors);
    if (!s.ok()) return ReportFailure(events, kExitDataError, "--init-from: " + s.message());
  }
  model->to(device.device);
  // Upstream init_weights casts the embeddings to bf16 on a bf16 run; the optimizer state follows.
  const bool bf16_embeddings =
      autocast_dtype == torch::kBFloat16 && SpeedLeverEnabled(kLeverBf16Embeddings);
  if (bf16_embeddings) model->CastEmbeddings(torch::kBFloat16);
  MuonAdamWOptions opt_options;
  opt_options.unembedding_lr = recipe.unembedding_lr;
  opt_options.embedding_lr = recipe.embedding_lr;
  opt_options.matrix_lr = recipe.matrix_lr;
  opt_options.weight_decay = recipe.weight_decay;
  opt_options.scalar_lr = recipe.scalar_lr;
  opt_options.adam_betas = recipe.adam_betas;
  opt_options.ns_steps = recipe.muon_ns_steps;
  opt_options.beta2 = recipe.muon_beta2;
  opt_options.momentum = recipe.muon_momentum_start;
  MuonAdamW optimizer(model, opt_options);

  const auto scaling = model->NumScalingParams();
  const int64_t num_params = scaling.count("total") ? scaling.at("total") : 0;
  const int64_t flops_per_token = model->EstimateFlops();
  // The backend the first forward will pick: inputs of the autocast dtype on the run's device. A
  // forced backend that cannot run here is a configuration error.
  std::string attention_backend;
  try {
    attention_backend = ResolveAttentionBackend(
        recipe.attention_backend,
        torch::empty({1, 1, 1, recipe.head_dim},
                     torch::TensorOptions().dtype(autocast_dtype).device(device.device)));
  } catch (const c10::Error& e) {
    return ReportFailure(events, kExitInvalidConfig,
                         "attention_backend: " + std::string(e.what_without_backtrace()));
  }
  const bool windows_honoured = model->WindowsHonoured();

  // Resolved config: stderr for people, the start event for the worker.
  nlohmann::json config = ResolvedConfigJson(recipe, sizes);
  nlohmann::json fingerprint = DeviceFingerprint(device);
  std::fprintf(stderr, "Resolved config: %s\n", config.dump(2).c_str());
  std::fprintf(stderr, "Device: %s (%s), dtype %s, attention %s%s\n", device.name.c_str(),
               BackendName(device.backend), dtype_ran.c_str(), attention_backend.c_str(),
               windows_honoured ? "" : " (sliding windows NOT honoured)");
  std::fprintf(stderr, "Speed levers: bf16 embeddings %s, chunked cross-entropy %s",
               bf16_embeddings ? "on" : "off", model->chunked_cross_entropy() ? "on" : "off");
  for (const char* lever : {kLeverReluSquared, kLeverFusedCrossEntropy, kLeverFusedRotary,
                            kLeverFusedReluSquared, kLeverFusedResidual}) {
    std::fprintf(stderr, ", %s=%s", lever, SpeedLeverEnabled(lever) ? "on" : "off");
  }
  std::fprintf(stderr, " (fused kernels only in CUDA builds)\n");
  std::fprintf(stderr, "Parameter counts:\n");
  for (const auto& [k, v] : scaling)
    std::fprintf(stderr, "  %-24s: %lld\n", k.c_str(), (long long)v);
  std::fprintf(stderr, "Estimated FLOPs per token: %e\n", static_cast<double>(flops_per_token));
  std::fprintf(stderr, "Peak FLOPS: %s (%s)\n",
               peak.flops ? std::to_string(*peak.flops).c_str() : "unknown", peak.source.c_str());
  std::fprintf(stderr, "Time budget: %gs\nGradient accumulation steps: %d\n", recipe.time_budget_s,
               sizes.grad_accum_steps);
  std::fflush(stderr);
  events->Emit("start", {{"config", config},
                         {"config_hash", CanonicalHash(recipe)},
                         {"device", fingerprint},
                         {"attention_backend", attention_backend},
                         {"windows_honoured", windows_honoured},
                         {"metric_version", kBpbMetricVersion},
                         {"dtype", dtype_ran},
                         {"peak_flops", OptionalNumber(peak.flops)},
                         {"peak_flops_source", peak.source}});

  // Training.
  std::unique_ptr<BatchSource> train_batches;
  if (Status s = data->OpenBatches("train", recipe.device_batch_size, TrainingSequenceLen(recipe),
                                   &train_batches);
      !s.ok()) {
    return ReportFailure(events, DataExitCode(s), s.message());
  }
  ResetPeakMemory(device);
  SteadyTrainingClock clock;
  TimeBudget budget(recipe.time_budget_s, &clock);
  TrainingLoopSettings settings;
  settings.grad_accum_steps = sizes.grad_accum_steps;
  settings.tokens_per_step = recipe.total_batch_size;
  settings.flops_per_token = static_cast<double>(flops_per_token);
  settings.peak = peak;
  settings.schedules = ScheduleOptionsFromRecipe(recipe);
  settings.device = device.device;
  settings.autocast_dtype = autocast_dtype;
  TrainingOutcome outcome;
  if (Status s = RunTrainingLoop(model, optimizer, train_batches.get(), settings, &budget, events,
                                 &outcome);
      !s.ok()) {
    return ReportFailure(events, DataExitCode(s), s.message());
  }
  train_batches.reset();  // stop the prefetch thread
  if (outcome.diverged) {
    return ReportFailure(
        events, kExitDiverged,
        DescribeDivergence(outcome.divergence, outcome.diverged_step) + ": the run diverged");
  }
  const int64_t total_tokens = outcome.steps * recipe.total_batch_size;

  // Final evaluation on the pinned validation split, always in rows of sequence_len tokens (the
  // campaign's), also when the model trained at train_sequence_len.
  std::unique_ptr<BatchSource> val_batches;
  if (Status s =
          data->OpenBatches("val", recipe.device_batch_size, recipe.sequence_len, &val_batches);
      !s.ok()) {
    return ReportFailure(events, DataExitCode(s), s.message());
  }
  const int64_t eval_steps =
      EvalSteps(recipe.eval_tokens, recipe.device_batch_size, recipe.sequence_len);
  BpbResult bpb;
  if (Status s = EvaluateBpb(model, val_batches.get(), data->token_bytes(), eval_steps,
                             device.device, autocast_dtype, &bpb);
      !s.ok()) {
    return ReportFailure(events, DataExitCode(s), s.message());
  }
  val_batches.reset();
  events->Emit("eval", {{"val_bpb", FiniteOrNull(bpb.val_bpb)},
                        {"eval_tokens", bpb.tokens},
                        {"seconds", bpb.seconds},
                        {"total_bytes", bpb.total_bytes},
                        {"metric_version", kBpbMetricVersion}});

  if (!o.save_path.empty()) {
    std::map<std::string, torch::Tensor> tensors;
    for (auto& [name, t] : model->NamedParameters()) tensors[name] = t.detach();
    Status s = SaveSafetensors(o.save_path, tensors,
                               {{"config_hash", CanonicalHash(recipe)},
                                {"config", config.dump()},
                                {"val_bpb", std::to_string(bpb.val_bpb)}});
    if (!s.ok()) return ReportFailure(events, kExitCrash, "--save: " + s.message());
  }

  // Summary (upstream's block on stderr; the summary event on stdout).
  const PeakMemory mem = ReadPeakMemory(device);
  const std::string final_backend = model->AttentionBackend();
  const double total_seconds = UnixSecondsNow() - o.start_time;
  const double tok_per_sec =
      outcome.training_seconds > 0
          ? static_cast<double>(outcome.timed_steps * recipe.total_batch_size) /
                outcome.training_seconds
          : 0.0;
  // Upstream's steady-state MFU: flops/token x total batch x (steps - 10) / timed seconds / peak.
  std::optional<double> mfu;
  if (peak.flops && outcome.training_seconds > 0) {
    mfu = 100.0 * static_cast<double>(flops_per_token) *
          static_cast<double>(recipe.total_batch_size) * static_cast<double>(outcome.steps - 10) /
          outcome.training_seconds / *peak.flops;
  }
  std::fprintf(stderr, "---\n");
  std::fprintf(stderr, "val_bpb:          %.6f\n", bpb.val_bpb);
  std::fprintf(stderr, "training_seconds: %.1f\n", outcome.training_seconds);
  std::fprintf(stderr, "total_seconds:    %.1f\n", total_seconds);
  std::fprintf(stderr, "peak_vram_mb:     %.1f\n", mem.allocated_mb);
  if (mfu) {
    std::fprintf(stderr, "mfu_percent:      %.2f\n", *mfu);
  } else {
    std::fprintf(stderr, "mfu_percent:      unknown\n");
  }
  std::fprintf(stderr, "total_tokens_M:   %.1f\n", static_cast<double>(total_tokens) / 1e6);
  std::fprintf(stderr, "num_steps:        %lld\n", static_cast<long long>(outcome.steps));
  std::fprintf(stderr, "num_params_M:     %.1f\n", static_cast<double>(num_params) / 1e6);
  std::fprintf(stderr, "depth:            %d\n", recipe.depth);
  std::fprintf(stderr, "tok_per_sec:      %.0f\n", tok_per_sec);
  std::fprintf(stderr, "attention:        %s\n", final_backend.c_str());
  if (mem.kind == "host_rss") {
    std::fprintf(stderr, "(peak_vram_mb is the process's peak host RSS: CPU run)\n");
  }
  std::fflush(stderr);
  events->Emit("summary", {{"val_bpb", FiniteOrNull(bpb.val_bpb)},
                           {"training_seconds", outcome.training_seconds},
                           {"total_seconds", total_seconds},
                           {"peak_vram_mb", mem.allocated_mb},
                           {"mfu_percent", OptionalNumber(mfu)},
                           {"total_tokens_M", static_cast<double>(total_tokens) / 1e6},
                           {"num_steps", outcome.steps},
                           {"num_params_M", static_cast<double>(num_params) / 1e6},
                           {"depth", recipe.depth},
                           {"tok_per_sec", tok_per_sec},
                           {"peak_reserved_mb", mem.reserved_mb},
                           {"memory_kind", mem.kind},
                           {"attention_backend", final_backend},
                           {"windows_honoured", model->WindowsHonoured()},
                           {"peak_flops", OptionalNumber(peak.flops)},
                           {"peak_flops_source", peak.source},
                           {"flops_per_token", flops_per_token},
                           {"num_params", num_params},
                           {"total_tokens", total_tokens},
                           {"timed_steps", outcome.timed_steps},
                           {"dtype", dtype_ran},
                           {"metric_version", kBpbMetricVersion}});
  return kExitOk;
}

}  // namespace xv::trainer
