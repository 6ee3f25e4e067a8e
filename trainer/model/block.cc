#include "trainer/model/block.h"

#include "trainer/model/attention.h"
#include "trainer/model/relu_squared.h"
#include "trainer/model/rotary.h"
#include "trainer/model/rotary_rms_norm.h"
#include "trainer/model/speed_levers.h"
#include "trainer/torch_compat.h"

namespace xv::trainer {

namespace {
torch::nn::Linear BiaslessLinear(int64_t in, int64_t out) {
  return torch::nn::Linear(torch::nn::LinearOptions(in, out).bias(false));
}
}  // namespace

CausalSelfAttentionImpl::CausalSelfAttentionImpl(int64_t n_embd, int64_t n_head, int64_t n_kv_head,
                                                 bool has_value_embedding, double norm_eps)
    : n_head_(n_head), n_kv_head_(n_kv_head), head_dim_(n_embd / n_head), norm_eps_(norm_eps) {
  c_q = register_module("c_q", BiaslessLinear(n_embd, n_head * head_dim_));
  c_k = register_module("c_k", BiaslessLinear(n_embd, n_kv_head * head_dim_));
  c_v = register_module("c_v", BiaslessLinear(n_embd, n_kv_head * head_dim_));
  c_proj = register_module("c_proj", BiaslessLinear(n_embd, n_embd));
  if (has_value_embedding) {
    ve_gate = register_module("ve_gate", BiaslessLinear(kValueGateChannels, n_kv_head));
  }
}

torch::Tensor CausalSelfAttentionImpl::forward(const torch::Tensor& x, const torch::Tensor& ve,
                                               const torch::Tensor& cos, const torch::Tensor& sin,
                                               int64_t window_left,
                                               const std::string& requested_backend) {
  const int64_t b = x.size(0), t = x.size(1), c = x.size(2);
  torch::Tensor q = c_q(x).view({b, t, n_head_, head_dim_});
  torch::Tensor k = c_k(x).view({b, t, n_kv_head_, head_dim_});
  torch::Tensor v = c_v(x).view({b, t, n_kv_head_, head_dim_});
  if (ve.defined() && !ve_gate.is_empty()) {
    torch::Tensor ve4 = ve.view({b, t, n_kv_head_, head_dim_});
    torch::Tensor gate = 2 * torch::sigmoid(ve_gate(x.narrow(-1, 0, kValueGateChannels)));
    v = v + gate.unsqueeze(-1) * ve4;
  }
  q = RotaryRmsNorm(q, cos, sin, norm_eps_);
  k = RotaryRmsNorm(k, cos, sin, norm_eps_);
  last_backend =
      LayerAttentionBackend(q, k, window_left, ResolveAttentionBackend(requested_backend, q));
  torch::Tensor y = CausalAttention(q, k, v, window_left, last_backend);
  return c_proj(y.view({b, t, c}));
}

MLPImpl::MLPImpl(int64_t n_embd, int64_t hidden, const std::string& activation)
    : swiglu_(activation == "swiglu"),
      relu_squared_function_(SpeedLeverEnabled(kLeverReluSquared)),
      recompute_relu_squared_(relu_squared_function_ &&
                              SpeedLeverEnabled(kLeverRecomputeReluSquared)) {
  c_fc = register_module("c_fc", BiaslessLinear(n_embd, swiglu_ ? 2 * hidden : hidden));
  c_proj = register_module("c_proj", BiaslessLinear(hidden, n_embd));
}

torch::Tensor MLPImpl::forward(const torch::Tensor& x) {
  torch::Tensor h = c_fc(x);
  if (swiglu_) {
    auto parts = h.chunk(2, -1);
    h = torch::silu(parts[0]) * parts[1];
  } else if (recompute_relu_squared_) {
    // c_proj's weight in h's dtype, as autocast casts it for c_proj(h); a no-op without autocast.
    return ReluSquaredLinear(h, c_proj->weight.to(h.scalar_type()));
  } else if (relu_squared_function_) {
    h = ReluSquared(h);
  } else {
    h = torch::relu(h).square();
  }
  return c_proj(h);
}

BlockImpl::BlockImpl(int64_t n_embd, int64_t n_head, int64_t n_kv_head, bool has_value_embedding,
                     int64_t mlp_hidden, const std::string& activation, double norm_eps)
    : norm_eps_(norm_eps) {
  attn = register_module(
      "attn", CausalSelfAttention(n_embd, n_head, n_kv_head, has_value_embedding, norm_eps));
  mlp = register_module("mlp", MLP(n_embd, mlp_hidden, activation));
}

torch::Tensor BlockImpl::forward(const torch::Tensor& x, const torch::Tensor& ve,
                                 const torch::Tensor& cos, const torch::Tensor& sin,
                                 int64_t window_left, const std::string& backend) {
  torch::Tensor y = x + attn(compat::RmsNorm(x, norm_eps_), ve, cos, sin, window_left, backend);
  return y + mlp(compat::RmsNorm(y, norm_eps_));
}

}  // namespace xv::trainer
