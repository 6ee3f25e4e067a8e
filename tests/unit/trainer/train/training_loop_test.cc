// RunTrainingLoop's divergence rule on a tiny CPU model fed fixed batches: a gradient made
// non-finite by a hook ends the loop with a `nan` event saying grad_norm at that step; an update
// that overflows a parameter ends it with `parameter` and the tensor's name; a finite run goes to
// its budget. Also checks StepHealthProbe's figures against direct computation and prints what the
// two norms cost next to a whole step on the CPU.
#include "trainer/train/training_loop.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <string>
#include <vector>

#include "trainer/eval/bpb_evaluator.h"
#include "trainer/train/step_health_probe.h"

namespace xv::trainer {
namespace {

// Endless deterministic batches of `rows` x (seq + 1) tokens below `vocab`.
class EndlessBatches : public BatchSource {
 public:
  EndlessBatches(int64_t rows, int64_t seq, int64_t vocab)
      : rows_(rows), seq_(seq), vocab_(vocab) {}
  Status Next(TokenBatch* out) override {
    out->rows = rows_;
    out->cols = seq_ + 1;
    out->epoch = 1;
    out->tokens.resize(static_cast<size_t>(rows_ * (seq_ + 1)));
    for (auto& t : out->tokens) {
      state_ = state_ * 1664525u + 1013904223u;
      t = static_cast<int32_t>((state_ >> 8) % static_cast<uint32_t>(vocab_));
    }
    return Status::Ok();
  }

 private:
  int64_t rows_, seq_, vocab_;
  uint32_t state_ = 1;
};

GPTConfig TinyConfig(int64_t vocab, int64_t seq, int64_t dim, int64_t layers) {
  GPTConfig cfg;
  cfg.vocab_size = vocab;
  cfg.sequence_len = seq;
  cfg.n_layer = layers;
  cfg.n_head = dim / 32;
  cfg.n_kv_head = dim / 32;
  cfg.n_embd = dim;
  cfg.window_pattern = "SL";
  cfg.attention_backend = "math";
  return cfg;
}

struct LoopRun {
  Status status;
  TrainingOutcome outcome;
  std::vector<nlohmann::json> events;
};

// Runs the loop with a 1000 s budget (it must end by diverging) or `budget_s`.
LoopRun RunLoop(GPT& model, MuonAdamW& optimizer, int64_t grad_accum, double budget_s = 1000) {
  LoopRun r;
  EndlessBatches batches(2, model->config().sequence_len, model->config().vocab_size);
  TrainingLoopSettings s;
  s.grad_accum_steps = grad_accum;
  s.tokens_per_step = 2 * model->config().sequence_len * grad_accum;
  s.event_interval_s = 0;
  SteadyTrainingClock clock;
  TimeBudget budget(budget_s, &clock, /*untimed_steps=*/2);
  std::FILE* out = std::tmpfile();
  EventWriter events(out);
  r.status = RunTrainingLoop(model, optimizer, &batches, s, &budget, &events, &r.outcome);
  std::fflush(out);
  std::rewind(out);
  char line[65536];
  while (std::fgets(line, sizeof(line), out)) r.events.push_back(nlohmann::json::parse(line));
  std::fclose(out);
  return r;
}

std::vector<nlohmann::json> NanEvents(const LoopRun& r) {
  std::vector<nlohmann::json> out;
  for (const auto& e : r.events)
    if (e["type"] == "nan") out.push_back(e);
  return out;
}

TEST(TrainingLoopDivergence, NonFiniteGradientIsGradNormAtItsStep) {
  torch::manual_seed(0);
  GPT model(TinyConfig(64, 16, 32, 2));
  model->InitWeights();
  MuonAdamW optimizer(model, MuonAdamWOptions());
  // Gradient accumulation 2: the hook runs twice per step; its 7th call is step 3, micro-step 0.
  // The injected inf leaves every loss finite.
  int calls = 0;
  model->lm_head_weight().register_hook([&calls](torch::Tensor g) {
    if (++calls != 7) return g;
    torch::Tensor h = g.clone();
    h.view({-1})[5] = std::numeric_limits<float>::infinity();
    return h;
  });
  LoopRun r = RunLoop(model, optimizer, /*grad_accum=*/2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_TRUE(r.outcome.diverged);
  EXPECT_EQ(r.outcome.diverged_step, 3);
  EXPECT_EQ(r.outcome.steps, 4);
  EXPECT_EQ(r.outcome.divergence.what, "grad_norm");
  auto nans = NanEvents(r);
  ASSERT_EQ(nans.size(), 1u);
  EXPECT_EQ(nans[0]["step"], 3);
  EXPECT_EQ(nans[0]["what"], "grad_norm");
  EXPECT_EQ(nans[0]["value"], "inf");
  EXPECT_TRUE(nans[0]["micro_step"].is_null()) << nans[0];
  EXPECT_FALSE(nans[0].contains("parameter"));
  EXPECT_EQ(r.events.back()["type"], "nan");  // nothing after it: the loop ended at once
  EXPECT_EQ(DescribeDivergence(r.outcome.divergence, 3),
            "grad_norm inf at step 3 (non-finite gradient)");
}

TEST(TrainingLoopDivergence, OverflowingUpdateIsParameterWithItsName) {
  torch::manual_seed(0);
  GPT model(TinyConfig(64, 16, 32, 2));
  model->InitWeights();
  // A huge embedding lr: step 0's loss and gradients are finite; its update moves the token and
  // value embeddings by ~1e31, whose squares overflow fp32, so their norms are inf one step before
  // the loss would show it (wte comes first in state-dict order). ATen refuses scalars beyond
  // fp32's range, so an lr cannot write inf directly; the end-to-end test loads a checkpoint
  // holding an inf instead.
  MuonAdamWOptions o;
  o.embedding_lr = 1e30;
  MuonAdamW optimizer(model, o);
  LoopRun r = RunLoop(model, optimizer, /*grad_accum=*/1);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  ASSERT_TRUE(r.outcome.diverged);
  EXPECT_EQ(r.outcome.diverged_step, 0);
  auto nans = NanEvents(r);
  ASSERT_EQ(nans.size(), 1u);
  EXPECT_EQ(nans[0]["step"], 0);
  EXPECT_EQ(nans[0]["what"], "parameter");
  EXPECT_EQ(nans[0]["parameter"], "transformer.wte.weight");
  EXPECT_EQ(nans[0]["value"], "inf");
  EXPECT_TRUE(nans[0]["micro_step"].is_null());
  EXPECT_NE(DescribeDivergence(r.outcome.divergence, 0).find("transformer.wte.weight"),
            std::string::npos);
}

TEST(TrainingLoopDivergence, FiniteRunReachesItsBudget) {
  torch::manual_seed(0);
  GPT model(TinyConfig(64, 16, 32, 2));
  model->InitWeights();
  MuonAdamW optimizer(model, MuonAdamWOptions());
  LoopRun r = RunLoop(model, optimizer, /*grad_accum=*/1, /*budget_s=*/0.2);
  ASSERT_TRUE(r.status.ok()) << r.status.ToString();
  EXPECT_FALSE(r.outcome.diverged);
  EXPECT_GE(r.outcome.steps, 3);
  EXPECT_TRUE(NanEvents(r).empty());
  EXPECT_EQ(r.events.back()["type"], "step");
}

// The probe's figures are the direct ones; prints the cost of both norms for cpu-tiny's parameter
// sizes (vocab 8192, dim 128, depth 2: 4.5M parameters) next to a step of 2 x 64 tokens (cpu-tiny
// runs 2 x 1024, so its steps take ~16x longer than this one).
TEST(StepHealthProbe, FiguresMatchDirectComputationAndCostIsSmall) {
  torch::manual_seed(0);
  GPT model(TinyConfig(8192, 64, 128, 2));
  model->InitWeights();
  MuonAdamW optimizer(model, MuonAdamWOptions());
  StepHealthProbe probe(model->NamedParameters());
  EndlessBatches batches(1, 64, 8192);
  TokenBatch batch;
  double step_s = 0, probe_s = 0;
  const int steps = 3;
  for (int step = 0; step < steps; ++step) {
    auto t0 = std::chrono::steady_clock::now();
    std::vector<torch::Tensor> losses;
    for (int micro = 0; micro < 2; ++micro) {
      ASSERT_TRUE(batches.Next(&batch).ok());
      auto [x, y] = BatchToTensors(batch, torch::Device(torch::kCPU));
      torch::Tensor loss = model->forward(x, y);
      losses.push_back(loss.detach());
      (loss / 2.0).backward();
    }
    auto t1 = std::chrono::steady_clock::now();
    probe.MeasureGradients();
    auto t2 = std::chrono::steady_clock::now();
    double sq = 0;
    for (auto& [name, p] : model->NamedParameters()) sq += p.grad().square().sum().item<double>();
    optimizer.Step();
    auto t3 = std::chrono::steady_clock::now();
    probe.MeasureParameters();
    auto t4 = std::chrono::steady_clock::now();
    optimizer.ZeroGrad();
    StepHealth h = probe.Read(losses);
    auto t5 = std::chrono::steady_clock::now();
    ASSERT_EQ(h.micro_step_losses.size(), 2u);
    EXPECT_FLOAT_EQ(h.micro_step_losses[1], losses[1].item<float>());
    // LibTorch 1.13's CPU fp32 norm of lm_head's 1M-element gradient is off by ~5e-5 relative
    // (its accumulation order); the sum of squares here accumulates per element in fp32 too.
    EXPECT_NEAR(h.grad_norm, std::sqrt(sq), 1e-3 * std::sqrt(sq));
    auto named = model->NamedParameters();
    ASSERT_EQ(h.parameter_norms.size(), named.size());
    for (size_t i = 0; i < named.size(); ++i) {
      double direct = named[i].second.norm().item<double>();
      EXPECT_NEAR(h.parameter_norms[i], direct, 1e-5 * direct) << named[i].first;
      EXPECT_EQ(probe.parameter_names()[i], named[i].first);
    }
    EXPECT_FALSE(FirstDivergence(h, probe.parameter_names()).has_value());
    if (step == 0) continue;  // warm-up
    auto sec = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
    probe_s += sec(t1, t2) + sec(t3, t4);
    step_s += sec(t0, t1) + sec(t2, t3) + sec(t4, t5);
  }
  std::printf(
      "StepHealthProbe on the CPU: %.2f ms of norms per step vs %.1f ms for the step "
      "(%.2f%%), %d threads\n",
      1e3 * probe_s / (steps - 1), 1e3 * step_s / (steps - 1), 100.0 * probe_s / step_s,
      at::get_num_threads());
  EXPECT_GT(step_s, 0.0);
}

}  // namespace
}  // namespace xv::trainer
