// MuonAdamW: upstream autoresearch's optimizer and its setup_optimizer parameter groups.
//
// AdamW groups: lm_head (unembedding_lr), wte (embedding_lr), value embeddings (embedding_lr), all
// scaled by (n_embd/768)^-0.5; resid_lambdas (scalar_lr * 0.01); x0_lambdas (scalar_lr, betas
// 0.96/0.95); eps 1e-10, no weight decay. Muon groups: every parameter of transformer.h, one group
// per distinct shape (shapes in sorted order): Nesterov momentum, polar-express orthogonalisation
// in bf16, NorMuon variance reduction, cautious weight decay, lr x sqrt(max(1, rows/cols)).
//
// Thread-safety: not thread-safe; the training thread owns it. Holds references to the model's
// parameter tensors (the model must outlive the optimizer).
#pragma once

#include <array>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "trainer/model/gpt.h"

namespace xv::trainer {

struct MuonAdamWOptions {
  double unembedding_lr = 0.004;
  double embedding_lr = 0.6;
  double matrix_lr = 0.04;
  double weight_decay = 0.2;
  double scalar_lr = 0.5;
  std::array<double, 2> adam_betas = {0.8, 0.95};
  int ns_steps = 5;
  double beta2 = 0.95;     // NorMuon second-moment decay
  double momentum = 0.95;  // initial Muon momentum (the loop schedules it)
};

// Reads unembedding_lr, embedding_lr, matrix_lr, weight_decay, adam_betas, scalar_lr (and the
// optional ns_steps, beta2, momentum) from a reference case's "optimizer_kwargs" object.
MuonAdamWOptions MuonAdamWOptionsFromJson(const nlohmann::json& kwargs);

// Polar-express orthogonalisation of g ([..., rows, cols]): X = g / (||g||_F * 1.02 + 1e-6), then
// `steps` quintic iterations with upstream's coefficients (steps <= 5). bf16: runs in bfloat16 as
// upstream does (the result is bf16); otherwise in fp32.
torch::Tensor PolarExpress(const torch::Tensor& g, int steps, bool bf16);

class MuonAdamW {
 public:
  // Builds the groups from `model`'s parameters; keeps the initial lrs and weight decays.
  MuonAdamW(GPT& model, const MuonAdamWOptions& opts);

  // One optimizer step over every group with the current lr/momentum/weight decay. Parameters
  // without a gradient are skipped (AdamW) or treated as zero-gradient (Muon, when some of a group
  // have one). Runs under NoGradGuard.
  void Step();
  // Drops every gradient (set to undefined, like zero_grad(set_to_none=True)).
  void ZeroGrad();
  // The loop sets these each step: lr of every group = initial_lr * lr_multiplier; Muon momentum =
  // muon_momentum; Muon weight decay = initial weight_decay * weight_decay_multiplier.
  void SetSchedule(double lr_multiplier, double muon_momentum, double weight_decay_multiplier);
  // The groups as manifest.json's "param_groups": kind, lr, initial_lr, betas/eps (adamw) or
  // momentum/ns_steps/beta2 (muon), weight_decay, params (upstream names).
  nlohmann::json DescribeGroups() const;

 private:
  struct Group {
    std::string kind;  // "adamw" | "muon"
    std::vector<std::string> names;
    std::vector<torch::Tensor> params;
    double lr = 0, initial_lr = 0;
    double weight_decay = 0, initial_weight_decay = 0;
    std::array<double, 2> betas = {0.8, 0.95};
    double eps = 1e-10;
    double momentum = 0.95;
    int ns_steps = 5;
    double beta2 = 0.95;
    // State. AdamW: per parameter; Muon: stacked over the group.
    std::vector<int64_t> adam_steps;
    std::vector<torch::Tensor> exp_avg, exp_avg_sq;
    torch::Tensor momentum_buffer, second_momentum_buffer;
  };
  void StepAdamW(Group& g);
  void StepMuon(Group& g);

  std::vector<Group> groups_;
};

}  // namespace xv::trainer
