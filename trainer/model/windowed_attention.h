// Sliding-window causal attention composed from causal attention over blocks: the fast path for a
// kernel with no window (cuDNN's, which beats ATen's windowed FA2 kernels on the H200).
//
// With a window of W (query i sees key j when 0 <= i - j <= W) and T = n * W positions, query
// r of block b sees the keys r' <= r of its own block and the keys r' >= r of block b - 1. So
//   y = merge(causal attention within each block,
//             causal attention of each block b >= 1 over block b - 1, both reversed in time),
// the two parts merged by their softmax statistics (log-sum-exp). The backward runs each part's
// backward with the merged output and statistics, which gives each part's exact share of the
// gradients (a softmax row's terms need only the whole row's output and normaliser), and sums
// the shares. The work is the band's: n causal blocks plus n - 1 reversed ones.
//
// The causal kernels are an interface: cuDNN's (CUDA, LibTorch >= 2.5) and a math one (any device
// and dtype; the composition's reference on the CPU, where CI tests it against the band mask).
// Thread-safety: the kernels are immutable after construction; CudnnBlockAttentionKernels() is
// thread-safe (a guarded per-device cache).
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include <torch/torch.h>

namespace xv::trainer {

// One causal attention call's results and what its backward needs.
struct CausalAttentionPart {
  torch::Tensor out;                            // [N, H, S, D]
  torch::Tensor lse;                            // [N, H, S] fp32 (fp64 for fp64 inputs): natural-
                                                // log log-sum-exp of each query's scaled scores
  std::map<std::string, torch::Tensor> saved;   // kernel-specific; an undefined value may come
                                                // back to Backward as an absent key
};

class CausalAttentionKernels {
 public:
  virtual ~CausalAttentionKernels() = default;
  // Causal attention (query s sees keys s' <= s) of q, k, v [N, H, S, D], scale 1/sqrt(D).
  virtual CausalAttentionPart Forward(const torch::Tensor& q, const torch::Tensor& k,
                                      const torch::Tensor& v) const = 0;
  // {dq, dk, dv} ([N, H, S, D]) for the output gradient `grad_out`, with `out` and `lse` standing
  // for the forward's (a merged attention passes its merged ones); `part` is the Forward result
  // of these q, k, v (its `saved`).
  virtual std::array<torch::Tensor, 3> Backward(const torch::Tensor& grad_out,
                                                const torch::Tensor& q, const torch::Tensor& k,
                                                const torch::Tensor& v, const torch::Tensor& out,
                                                const torch::Tensor& lse,
                                                const CausalAttentionPart& part) const = 0;
};

// Explicit scores in fp32 (fp64 for fp64 inputs): any device and dtype.
std::shared_ptr<const CausalAttentionKernels> MathCausalAttentionKernels();

// cuDNN's kernels for tensors like `x` ([B, T, H, D], CUDA bf16/fp16), or null where they do not
// run or do not agree with the math backend: checked once per device, dtype and head size on a
// small windowed problem (forward and backward), which also finds the base of cuDNN's statistics.
std::shared_ptr<const CausalAttentionKernels> CudnnBlockAttentionKernels(const torch::Tensor& x);

// True when a window of `window_left` over `t` positions can be composed from blocks: the window
// divides t into at least two blocks.
bool BlockWindowApplies(int64_t t, int64_t window_left);

// Windowed causal attention of q, k, v [B, T, H, D] (one head count), query i seeing key j when
// 0 <= i - j <= window_left, differentiable in q, k and v. Returns [B, T, H, D] contiguous.
// REQUIRES: BlockWindowApplies(T, window_left); kernels not null.
torch::Tensor BlockWindowedAttention(const torch::Tensor& q, const torch::Tensor& k,
                                     const torch::Tensor& v, int64_t window_left,
                                     std::shared_ptr<const CausalAttentionKernels> kernels);

}  // namespace xv::trainer
