// GPT: upstream autoresearch train.py's model (karpathy/autoresearch), in LibTorch.
//
// Token embedding, RMSNorm without weights, RoPE, QK-norm, value embeddings on alternating layers
// (the last always) mixed in through a per-head gate 2*sigmoid(W x[..., :32]), ReLU^2 (or SwiGLU)
// MLP, per-layer resid/x0 lambdas, final norm, untied head, logits soft-capped c*tanh(logits/c) in
// fp32, cross-entropy with ignore index -1. Sliding windows from a pattern of S/L letters; GQA/MQA.
//
// Parameter names are upstream's state-dict names ("transformer.wte.weight",
// "transformer.h.0.attn.c_q.weight", "value_embeds.1.weight", "resid_lambdas", ...).
//
// Thread-safety: a GPT is not safe for concurrent use; one training thread owns it.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "common/status.h"

namespace xv::trainer {

struct GPTConfig {
  int64_t sequence_len = 2048;  // the length the model trains at; the windows derive from it
  // Positions the rotary table covers: at least 10 x sequence_len (upstream's over-allocation),
  // more when the model is evaluated on longer rows than it trains on (0: 10 x sequence_len).
  int64_t rotary_len = 0;
  int64_t vocab_size = 8192;
  int64_t n_layer = 8;
  int64_t n_head = 4;
  int64_t n_kv_head = 4;
  int64_t n_embd = 512;
  std::string window_pattern = "SSSL";  // S = short window, L = full; the last layer is always L
  double short_window_fraction = 0.5;   // short window = floor(sequence_len * fraction)
  double mlp_ratio = 4;                 // hidden width = round(n_embd * mlp_ratio)
  std::string activation = "relu2";  // relu2 | swiglu (c_fc then holds [gate; up], 2x hidden rows)
  double softcap = 15;               // <= 0 disables the soft-cap
  double x0_lambda_init = 0.1;
  double resid_lambda_init = 1.0;
  double rope_base = 10000;
  bool value_embeddings = true;
  std::string attention_backend = "auto";  // auto | flash | sdpa | math
  // RMSNorm epsilon; <= 0: the machine epsilon of the activations' dtype (upstream's F.rms_norm
  // default). Set only to compute an fp32 model's function in fp64 (`xv-train verify --precision
  // fp64`), never from a recipe.
  double norm_eps = 0;
};

// Builds the model shape from a recipe and its resolved sizes (model_dim, n_head, n_kv_head):
// sequence_len is the recipe's training length (TrainingSequenceLen), rotary_len covers 10 x the
// longer of the training and evaluation lengths.
GPTConfig GPTConfigFromRecipe(const xv::Recipe& recipe, const xv::ResolvedSizes& sizes);
// Builds the model shape from a reference case's "config" object (manifest.json / CASE.json). Keys
// that are absent keep the GPTConfig defaults. Throws nlohmann::json::exception on wrong types.
GPTConfig GPTConfigFromJson(const nlohmann::json& config);
// Checks head counts, divisibility, pattern letters, activation, backend name; names the field.
xv::Status ValidateGPTConfig(const GPTConfig& cfg);

// Upstream window sizes, flash convention (left, right): query i sees key j when j <= i and
// i - j <= left. The last layer always gets the long window.
std::vector<std::array<int64_t, 2>> ComputeWindowSizes(const GPTConfig& cfg);

class GPTImpl : public torch::nn::Module {
 public:
  // REQUIRES: ValidateGPTConfig(cfg).ok() (throws c10::Error otherwise). Parameters are left at
  // LibTorch's default initialisation; call InitWeights() or load a state dict.
  explicit GPTImpl(const GPTConfig& cfg);

  // Upstream init_weights: wte ~ N(0,1), lm_head ~ N(0, 0.001), q/k/v/c_fc ~ U(-s, s) with
  // s = sqrt(3)/sqrt(n_embd), c_proj = 0, ve_gate = 0, value embeddings ~ U(-s, s), resid lambdas
  // = resid_lambda_init, x0 lambdas = x0_lambda_init. Draws from the global torch generator in
  // upstream's order; the caller seeds it (torch::manual_seed). Keeps every parameter fp32
  // (CastEmbeddings makes the embeddings bf16 for a bf16 run).
  void InitWeights();

  // Upstream init_weights on a bf16 run: the token embedding and every value embedding become
  // parameters of `dtype` (bf16), so the residual stream, its saved activations and their AdamW
  // state are bf16 under autocast. Call before the optimizer is built. fp32 recipes and the
  // reference cases never call it.
  void CastEmbeddings(torch::ScalarType dtype);

  // Soft-cap + cross-entropy over chunks of positions (SoftcapCrossEntropy) instead of the plain
  // path; on by default (XV_TRAIN_CHUNKED_CE=0 turns it off). The two compute the same function.
  void set_chunked_cross_entropy(bool on) { chunked_cross_entropy_ = on; }
  bool chunked_cross_entropy() const { return chunked_cross_entropy_; }

  // idx, targets: int64 [B, T] on the model's device, T <= max(sequence_len * 10, rotary_len);
  // targets -1 = ignored.
  // With targets: the cross-entropy loss, reduction "mean" (a scalar) or "none" ([B*T], 0 where
  // ignored), through SoftcapCrossEntropy (chunked) or the plain path. Without: soft-capped fp32
  // logits [B, T, vocab_size]. Throws c10::Error for another reduction.
  torch::Tensor forward(const torch::Tensor& idx, const torch::Tensor& targets = {},
                        const std::string& reduction = "mean");

  // Every trainable parameter under its upstream state-dict name, in registration order.
  std::vector<std::pair<std::string, torch::Tensor>> NamedParameters();
  // Copies `tensors[prefix + name]` into every parameter (dtype converted, device kept). Fails,
  // naming the parameter, if one is missing or has the wrong shape. Extra keys are ignored.
  xv::Status LoadParameters(const std::map<std::string, torch::Tensor>& tensors,
                            const std::string& prefix = "");

  const GPTConfig& config() const { return cfg_; }
  std::vector<std::array<int64_t, 2>> WindowSizes() const { return window_sizes_; }
  // Upstream estimate_flops: 6 * (params - wte - value embeddings - scalars) + attention FLOPs,
  // per token, forward + backward.
  int64_t EstimateFlops() const;
  // Upstream num_scaling_params: wte, value_embeds, lm_head, transformer_matrices, scalars, total.
  std::map<std::string, int64_t> NumScalingParams() const;
  // The attention backend that actually runs for the model's current device and dtype:
  // "flash" | "sdpa" | "math", or the layers' distinct backends joined by '+' when they differ
  // ("flash+cudnn": cuDNN for the full-causal layers, see attention.h). Decided at each forward;
  // before the first forward, for fp32 inputs on the parameters' device.
  std::string AttentionBackend() const;
  // The backend attention would resolve to for activations of `compute_dtype` (the autocast dtype,
  // bf16 on GPUs) on the parameters' device, before any forward has run.
  std::string PlannedAttentionBackend(torch::ScalarType compute_dtype) const;
  // False when the backend in use cannot honour sliding windows (none of ours: every backend
  // applies the band mask or the native window), kept so the result can record it.
  bool WindowsHonoured() const;

  // Submodule access for the optimizer (setup_optimizer's groups).
  torch::Tensor wte_weight() const { return wte_->weight; }
  torch::Tensor lm_head_weight() const { return lm_head_->weight; }
  torch::Tensor resid_lambdas() const { return resid_lambdas_; }
  torch::Tensor x0_lambdas() const { return x0_lambdas_; }
  // Value-embedding weights in layer order with their names.
  std::vector<std::pair<std::string, torch::Tensor>> ValueEmbedParameters();
  // Every parameter of transformer.h (the Muon matrices) with its name, in registration order.
  std::vector<std::pair<std::string, torch::Tensor>> BlockParameters();

 private:
  void BuildRotary();

  GPTConfig cfg_;
  std::vector<std::array<int64_t, 2>> window_sizes_;
  torch::nn::ModuleDict transformer_{nullptr};
  torch::nn::Embedding wte_{nullptr};
  torch::nn::ModuleList h_{nullptr};
  torch::nn::Linear lm_head_{nullptr};
  torch::Tensor resid_lambdas_, x0_lambdas_;
  torch::nn::ModuleDict value_embeds_{nullptr};
  std::vector<int64_t> ve_layers_;  // layers that have a value embedding
  torch::Tensor cos_, sin_;         // [1, 10*T, 1, head_dim/2] fp32 buffers (not parameters)
  mutable std::string last_backend_;
  bool chunked_cross_entropy_ = true;
};
TORCH_MODULE(GPT);

// True when layer `layer_idx` of `n_layer` has a value embedding (alternating, last always).
inline bool HasValueEmbedding(int64_t layer_idx, int64_t n_layer) {
  return layer_idx % 2 == (n_layer - 1) % 2;
}

}  // namespace xv::trainer
