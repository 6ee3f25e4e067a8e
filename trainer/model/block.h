// One transformer block of the GPT: attention (with the value-embedding gate) and MLP, each behind
// a weightless RMSNorm on a residual branch. Module and parameter names follow upstream's state
// dict: attn.c_q / c_k / c_v / c_proj / ve_gate, mlp.c_fc / c_proj. Thread-safety: not thread-safe
// (torch modules).
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace xv::trainer {

// Channels of x that feed the value-embedding gate (upstream's ve_gate_channels).
inline constexpr int64_t kValueGateChannels = 32;

class CausalSelfAttentionImpl : public torch::nn::Module {
 public:
  // norm_eps: the QK-norm's epsilon (<= 0: the dtype's machine epsilon, see compat::RmsNorm).
  CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, int64_t n_kv_head,
                          bool has_value_embedding, double norm_eps = 0);
  // x: [B, T, C]; ve: [B, T, Hkv*D] or undefined; cos/sin: rotary tables sliced to T.
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& ve, const torch::Tensor& cos,
                        const torch::Tensor& sin, int64_t window_left,
                        const std::string& requested_backend);

  torch::nn::Linear c_q{nullptr}, c_k{nullptr}, c_v{nullptr}, c_proj{nullptr};
  torch::nn::Linear ve_gate{nullptr};  // null when the layer has no value embedding
  std::string last_backend;            // the backend the last forward resolved to

 private:
  int64_t n_head_, n_kv_head_, head_dim_;
  double norm_eps_;
};
TORCH_MODULE(CausalSelfAttention);

class MLPImpl : public torch::nn::Module {
 public:
  // activation: "relu2" (c_fc: [hidden, n_embd]) or "swiglu" (c_fc: [2*hidden, n_embd], gate rows
  // first, silu(gate) * up).
  MLPImpl(int64_t n_embd, int64_t hidden, const std::string& activation);
  torch::Tensor forward(const torch::Tensor& x);

  torch::nn::Linear c_fc{nullptr}, c_proj{nullptr};

 private:
  bool swiglu_;
  bool relu_squared_function_;   // ReluSquared (XV_TRAIN_RELU2) instead of relu().square()
  bool recompute_relu_squared_;  // ReluSquaredLinear with c_proj (XV_TRAIN_RECOMPUTE_RELU2)
};
TORCH_MODULE(MLP);

class BlockImpl : public torch::nn::Module {
 public:
  // norm_eps: every RMSNorm's epsilon in the block (<= 0: the dtype's machine epsilon).
  BlockImpl(int64_t n_embd, int64_t n_head, int64_t n_kv_head, bool has_value_embedding,
            int64_t mlp_hidden, const std::string& activation, double norm_eps = 0);
  // x = x + attn(norm(x)); x = x + mlp(norm(x)).
  torch::Tensor forward(const torch::Tensor& x, const torch::Tensor& ve, const torch::Tensor& cos,
                        const torch::Tensor& sin, int64_t window_left, const std::string& backend);

  CausalSelfAttention attn{nullptr};
  MLP mlp{nullptr};

 private:
  double norm_eps_;
};
TORCH_MODULE(Block);

}  // namespace xv::trainer
