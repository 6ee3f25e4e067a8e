#include "trainer/model/windowed_attention.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "trainer/model/attention.h"
#include "trainer/torch_compat.h"

namespace xv::trainer {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::tensor_list;

torch::ScalarType AccumulationType(const torch::Tensor& x) {
  return x.scalar_type() == torch::kDouble ? torch::kDouble : torch::kFloat;
}

// Scaled scores of q [N, H, S, D] against k with the causal mask (hidden scores -inf).
torch::Tensor CausalScores(const torch::Tensor& q, const torch::Tensor& k) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  const torch::ScalarType acc = AccumulationType(q);
  torch::Tensor scores = torch::matmul(q.to(acc), k.to(acc).transpose(-2, -1)) * scale;
  const int64_t s = q.size(2);
  torch::Tensor hidden =
      torch::ones({s, s}, torch::TensorOptions().dtype(torch::kBool).device(q.device())).triu(1);
  return scores.masked_fill(hidden, -std::numeric_limits<double>::infinity());
}

class MathKernels final : public CausalAttentionKernels {
 public:
  CausalAttentionPart Forward(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v) const override {
    torch::Tensor scores = CausalScores(q, k);
    CausalAttentionPart part;
    part.lse = torch::logsumexp(scores, -1);
    torch::Tensor probs = (scores - part.lse.unsqueeze(-1)).exp();
    part.out = torch::matmul(probs, v.to(probs.scalar_type())).to(q.scalar_type());
    return part;
  }

  std::array<torch::Tensor, 3> Backward(const torch::Tensor& grad_out, const torch::Tensor& q,
                                        const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& out, const torch::Tensor& lse,
                                        const CausalAttentionPart&) const override {
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    const torch::ScalarType acc = AccumulationType(q);
    torch::Tensor g = grad_out.to(acc);
    torch::Tensor probs = (CausalScores(q, k) - lse.to(acc).unsqueeze(-1)).exp();
    torch::Tensor dv = torch::matmul(probs.transpose(-2, -1), g);
    torch::Tensor dprobs = torch::matmul(g, v.to(acc).transpose(-2, -1));
    torch::Tensor row = (g * out.to(acc)).sum(-1, /*keepdim=*/true);
    torch::Tensor dscores = probs * (dprobs - row) * scale;
    torch::Tensor dq = torch::matmul(dscores, k.to(acc));
    torch::Tensor dk = torch::matmul(dscores.transpose(-2, -1), q.to(acc));
    return {dq.to(q.scalar_type()), dk.to(k.scalar_type()), dv.to(v.scalar_type())};
  }
};

// cuDNN's causal attention; its statistics are converted to natural-log log-sum-exp on the way
// out (`lse_scale`: 1, or ln 2 for a base-2 library) and back on the way in.
class CudnnKernels final : public CausalAttentionKernels {
 public:
  CudnnKernels(double lse_scale, bool stats_unit_dim)
      : lse_scale_(lse_scale), stats_unit_dim_(stats_unit_dim) {}

  CausalAttentionPart Forward(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v) const override {
    compat::CudnnAttentionResult r = compat::CudnnCausalAttentionWithStats(q, k, v);
    CausalAttentionPart part;
    part.out = r.out;
    part.lse = r.stats.reshape({q.size(0), q.size(1), q.size(2)});
    if (lse_scale_ != 1.0) part.lse = part.lse * lse_scale_;
    part.saved = {{"cum_seq_q", r.cum_seq_q},
                  {"cum_seq_k", r.cum_seq_k},
                  {"philox_seed", r.philox_seed},
                  {"philox_offset", r.philox_offset}};
    return part;
  }

  std::array<torch::Tensor, 3> Backward(const torch::Tensor& grad_out, const torch::Tensor& q,
                                        const torch::Tensor& k, const torch::Tensor& v,
                                        const torch::Tensor& out, const torch::Tensor& lse,
                                        const CausalAttentionPart& part) const override {
    torch::Tensor stats = lse_scale_ != 1.0 ? lse / lse_scale_ : lse;
    stats = stats_unit_dim_ ? stats.unsqueeze(-1).contiguous() : stats.contiguous();
    compat::CudnnAttentionResult forward;
    auto saved = [&](const char* key) {
      auto it = part.saved.find(key);
      return it == part.saved.end() ? torch::Tensor() : it->second;
    };
    forward.cum_seq_q = saved("cum_seq_q");
    forward.cum_seq_k = saved("cum_seq_k");
    forward.philox_seed = saved("philox_seed");
    forward.philox_offset = saved("philox_offset");
    forward.max_q = q.size(2);
    forward.max_k = k.size(2);
    return compat::CudnnCausalAttentionBackward(grad_out, q, k, v, out, stats, forward);
  }

 private:
  const double lse_scale_;
  const bool stats_unit_dim_;
};

// The geometry of one call: [B, T, H, D] tensors, window W, n = T / W blocks.
struct BlockGeometry {
  int64_t b, t, h, d, w, n;

  // [B n, H, W, D]: every block, a transposed view of contiguous x.
  torch::Tensor Blocks(const torch::Tensor& x) const {
    return x.view({b * n, w, h, d}).transpose(1, 2);
  }
  // [B (n-1), H, W, D]: blocks first .. first + n - 2, each reversed in time (a copy).
  torch::Tensor Reversed(const torch::Tensor& x, int64_t first) const {
    return x.view({b, n, w, h, d})
        .narrow(1, first, n - 1)
        .flip({2})
        .reshape({b * (n - 1), w, h, d})
        .transpose(1, 2);
  }
  // [N, H, W, D] per-block results back to [B, nb, W, H, D] (a copy unless laid out so).
  torch::Tensor Unblock(const torch::Tensor& x, int64_t nb) const {
    return x.transpose(1, 2).reshape({b, nb, w, h, d});
  }
};

void SavePart(AutogradContext* ctx, const std::string& prefix, const CausalAttentionPart& part) {
  for (const auto& [key, tensor] : part.saved) {
    if (tensor.defined()) ctx->saved_data[prefix + key] = tensor;
  }
}

// The part SavePart stored under `prefix` (its undefined tensors come back as absent keys).
CausalAttentionPart LoadPart(AutogradContext* ctx, const std::string& prefix) {
  CausalAttentionPart part;
  for (const auto& [key, value] : ctx->saved_data) {
    if (key.rfind(prefix, 0) == 0) part.saved[key.substr(prefix.size())] = value.toTensor();
  }
  return part;
}

class BlockWindowedAttentionFunction
    : public torch::autograd::Function<BlockWindowedAttentionFunction> {
 public:
  // `kernels` must outlive the backward: both providers' objects live for the process.
  static torch::Tensor forward(AutogradContext* ctx, const torch::Tensor& q_in,
                               const torch::Tensor& k_in, const torch::Tensor& v_in,
                               int64_t window, const CausalAttentionKernels* kernels) {
    torch::Tensor q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
    const BlockGeometry g{q.size(0), q.size(1), q.size(2), q.size(3), window, q.size(1) / window};
    CausalAttentionPart own = kernels->Forward(g.Blocks(q), g.Blocks(k), g.Blocks(v));
    CausalAttentionPart previous =
        kernels->Forward(g.Reversed(q, 1), g.Reversed(k, 0), g.Reversed(v, 0));

    // Merge the blocks after the first with their view of the previous block.
    const torch::ScalarType acc = AccumulationType(q);
    torch::Tensor own_out = g.Unblock(own.out, g.n);
    torch::Tensor own_lse = own.lse.reshape({g.b, g.n, g.h, g.w});
    torch::Tensor prev_out = g.Unblock(previous.out, g.n - 1).flip({2});
    torch::Tensor prev_lse = previous.lse.reshape({g.b, g.n - 1, g.h, g.w}).flip({3});
    torch::Tensor own_tail_lse = own_lse.narrow(1, 1, g.n - 1);
    torch::Tensor tail_lse = torch::logaddexp(own_tail_lse, prev_lse);
    auto weight = [&](const torch::Tensor& lse) {  // [B, n-1, W, H, 1]
      return (lse - tail_lse).exp().permute({0, 1, 3, 2}).unsqueeze(-1);
    };
    torch::Tensor out = torch::empty({g.b, g.n, g.w, g.h, g.d}, q.options());
    out.narrow(1, 0, 1).copy_(own_out.narrow(1, 0, 1));
    out.narrow(1, 1, g.n - 1)
        .copy_(own_out.narrow(1, 1, g.n - 1).to(acc) * weight(own_tail_lse) +
               prev_out.to(acc) * weight(prev_lse));
    torch::Tensor lse = torch::cat({own_lse.narrow(1, 0, 1), tail_lse}, 1).contiguous();
    torch::Tensor y = out.view({g.b, g.t, g.h, g.d});

    ctx->save_for_backward({q, k, v, y, lse});
    ctx->saved_data["window"] = window;
    ctx->saved_data["kernels"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(kernels));
    SavePart(ctx, "own.", own);
    SavePart(ctx, "previous.", previous);
    return y;
  }

  static tensor_list backward(AutogradContext* ctx, tensor_list grads) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor &q = saved[0], &k = saved[1], &v = saved[2], &y = saved[3],
                        &lse = saved[4];
    const int64_t window = ctx->saved_data["window"].toInt();
    const auto* kernels = reinterpret_cast<const CausalAttentionKernels*>(
        static_cast<intptr_t>(ctx->saved_data["kernels"].toInt()));
    const BlockGeometry g{q.size(0), q.size(1), q.size(2), q.size(3), window, q.size(1) / window};
    torch::Tensor grad = grads[0].contiguous();

    auto [dq_own, dk_own, dv_own] =
        kernels->Backward(g.Blocks(grad), g.Blocks(q), g.Blocks(k), g.Blocks(v), g.Blocks(y),
                          lse.view({g.b * g.n, g.h, g.w}), LoadPart(ctx, "own."));
    torch::Tensor prev_lse =
        lse.narrow(1, 1, g.n - 1).flip({3}).reshape({g.b * (g.n - 1), g.h, g.w});
    auto [dq_prev, dk_prev, dv_prev] = kernels->Backward(
        g.Reversed(grad, 1), g.Reversed(q, 1), g.Reversed(k, 0), g.Reversed(v, 0),
        g.Reversed(y, 1), prev_lse, LoadPart(ctx, "previous."));

    auto sum = [&](const torch::Tensor& own, const torch::Tensor& prev, int64_t first) {
      torch::Tensor total = g.Unblock(own, g.n).contiguous();
      total.narrow(1, first, g.n - 1).add_(g.Unblock(prev, g.n - 1).flip({2}));
      return total.view({g.b, g.t, g.h, g.d});
    };
    return {sum(dq_own, dq_prev, 1), sum(dk_own, dk_prev, 0), sum(dv_own, dv_prev, 0),
            torch::Tensor(), torch::Tensor()};
  }
};

// Relative Frobenius difference in fp32.
double RelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor bf = b.to(torch::kFloat);
  return ((a.to(torch::kFloat) - bf).norm() / bf.norm().clamp_min(1e-30)).item<double>();
}

// Deterministic [B, T, H, D] data (no RNG draw, so seeded runs are unchanged).
torch::Tensor Wave(const torch::Tensor& like, int64_t b, int64_t t, int64_t h, int64_t d,
                   double pos_rate, double lane_rate, bool cosine) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(like.device());
  torch::Tensor pos = torch::arange(b * t, f32).reshape({b, t, 1, 1});
  torch::Tensor lane = torch::arange(h * d, f32).reshape({1, 1, h, d});
  torch::Tensor x = pos * pos_rate + lane * lane_rate;
  return (cosine ? torch::cos(x) : torch::sin(x)).to(like.scalar_type());
}

// The base of cuDNN's statistics as a factor to natural log (1 or ln 2), 0 when they are neither.
double CudnnStatsScale(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
                       bool* unit_dim) {
  compat::CudnnAttentionResult r = compat::CudnnCausalAttentionWithStats(q, k, v);
  *unit_dim = r.stats.dim() == 4;
  torch::Tensor stats = r.stats.reshape({q.size(0), q.size(1), q.size(2)}).to(torch::kFloat);
  torch::Tensor lse = MathCausalAttentionKernels()->Forward(q, k, v).lse.to(torch::kFloat);
  const double natural = (stats - lse).abs().max().item<double>();
  const double base2 = (stats * std::log(2.0) - lse).abs().max().item<double>();
  if (std::min(natural, base2) > 0.1) return 0;
  return natural <= base2 ? 1.0 : std::log(2.0);
}

}  // namespace

std::shared_ptr<const CausalAttentionKernels> MathCausalAttentionKernels() {
  static const auto kernels = std::make_shared<const MathKernels>();
  return kernels;
}

bool BlockWindowApplies(int64_t t, int64_t window_left) {
  return window_left > 0 && t % window_left == 0 && t / window_left >= 2;
}

torch::Tensor BlockWindowedAttention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, int64_t window_left,
                                     std::shared_ptr<const CausalAttentionKernels> kernels) {
  TORCH_CHECK(q.dim() == 4 && k.sizes() == q.sizes() && v.sizes() == q.sizes(),
              "BlockWindowedAttention: expected q, k, v of one shape [B, T, H, D]");
  TORCH_CHECK(BlockWindowApplies(q.size(1), window_left), "BlockWindowedAttention: window ",
              window_left, " does not split ", q.size(1), " positions into >= 2 blocks");
  TORCH_CHECK(kernels != nullptr, "BlockWindowedAttention: no kernels");
  return BlockWindowedAttentionFunction::apply(q, k, v, window_left, kernels.get());
}

std::shared_ptr<const CausalAttentionKernels> CudnnBlockAttentionKernels(const torch::Tensor& x) {
  if (!compat::CudnnAttentionUsable(x)) return nullptr;
  const int64_t d = x.dim() == 4 ? x.size(3) : 64;
  static std::mutex mu;
  static std::map<std::tuple<int, int, int64_t>, std::shared_ptr<const CausalAttentionKernels>>
      verdicts;  // null: checked, not usable
  const std::tuple<int, int, int64_t> key(x.device().index(), static_cast<int>(x.scalar_type()), d);
  std::lock_guard<std::mutex> lock(mu);
  auto it = verdicts.find(key);
  if (it != verdicts.end()) return it->second;
  std::shared_ptr<const CausalAttentionKernels> kernels;
  try {
    torch::AutoGradMode grad_mode(true);
    // The check runs inside the first forward: keep autocast's bf16 matmuls out of the reference.
    c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::autocast_dispatch_keyset);
    const int64_t b = 2, t = 128, h = 2, window = 32;
    torch::Tensor q = Wave(x, b, t, h, d, 0.37, 0.11, false);
    torch::Tensor k = Wave(x, b, t, h, d, 0.23, -0.07, true);
    torch::Tensor v = Wave(x, b, t, h, d, 0.05, 0.03, false);
    torch::Tensor dy = Wave(x, b, t, h, d, 0.13, 0.05, true);
    bool unit_dim = false;
    const double scale =
        CudnnStatsScale(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), &unit_dim);
    if (scale > 0) {
      auto candidate = std::make_shared<const CudnnKernels>(scale, unit_dim);
      std::vector<torch::Tensor> leaves;
      for (const torch::Tensor& x_in : {q, k, v}) {
        leaves.push_back(x_in.detach().clone().requires_grad_(true));
      }
      torch::Tensor y = BlockWindowedAttention(leaves[0], leaves[1], leaves[2], window, candidate);
      auto grads = torch::autograd::grad({y}, leaves, {dy});
      for (auto& leaf : leaves) leaf = leaf.detach().clone().requires_grad_(true);
      torch::Tensor y_ref = CausalAttention(leaves[0], leaves[1], leaves[2], window, "math");
      auto grads_ref = torch::autograd::grad({y_ref}, leaves, {dy});
      double worst = RelativeDifference(y, y_ref);
      for (size_t i = 0; i < 3; ++i) {
        worst = std::max(worst, RelativeDifference(grads[i], grads_ref[i]));
      }
      if (worst < 3e-2) kernels = candidate;
    }
  } catch (const c10::Error&) {
    kernels = nullptr;  // no cuDNN kernel for this device, dtype or shape
  }
  verdicts[key] = kernels;
  return kernels;
}

}  // namespace xv::trainer
