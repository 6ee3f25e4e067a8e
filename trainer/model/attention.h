// Causal attention with an optional sliding window, through one of three backends:
//  - "math": explicit scores, band mask, softmax (fp32 softmax for half inputs); runs everywhere.
//  - "sdpa": scaled dot-product attention with an explicit band mask (torch_compat picks the public
//    SDPA on LibTorch 2.x or the private 1.13 one).
//  - "flash": ATen's flash attention with a native window (CUDA or ROCm, bf16/fp16, LibTorch >=
//    2.5), where it honours windows. Its full-causal layers (no window, as many kv heads as query
//    heads) run cuDNN's attention instead where that runs and matches the math backend
//    (CudnnAttentionMatchesMath) and XV_TRAIN_CUDNN_ATTENTION is not 0: on the H200 it beats
//    ATen's FA2 kernels (bench/README.md: +11 % tok/s with window L); it has no sliding window.
// Window convention (flash): query i sees key j when j <= i and i - j <= window_left.
// Thread-safety: stateless functions, but for the guarded verdict caches of
// FlashAttentionHonoursWindows and CudnnAttentionMatchesMath.
#pragma once

#include <cstdint>
#include <string>

#include <torch/torch.h>

namespace xv::trainer {

// Resolves a requested backend ("auto" | "flash" | "sdpa" | "math") for tensors like `x`: auto
// picks flash when it runs here and honours windows (FlashAttentionHonoursWindows), else sdpa. A
// forced "flash" that cannot run, or ignores windows, throws c10::Error saying why.
std::string ResolveAttentionBackend(const std::string& requested, const torch::Tensor& x);

// True when flash attention runs for tensors like `x` (compat::FlashAttentionUsable) and honours a
// sliding window: checked once per device and dtype by comparing a windowed flash call with the
// math backend on a small deterministic problem (ROCm's flash kernels honour windows only in some
// PyTorch/AOTriton versions; CUDA's do from LibTorch 2.5). Thread-safe (the verdict cache is
// guarded); draws no random numbers.
bool FlashAttentionHonoursWindows(const torch::Tensor& x);

// True when ATen's cuDNN attention runs for tensors like `x` (compat::CudnnAttentionUsable) and,
// forward and backward, agrees with the math backend on a small deterministic full-causal problem
// with x's head size (x: [B, T, H, D]). Checked once per device, dtype and head size; a cuDNN that
// throws (no kernel for the shape, an old library) gives false. Thread-safe; draws no random
// numbers.
bool CudnnAttentionMatchesMath(const torch::Tensor& x);

// The backend CausalAttention runs for one layer: `backend` itself, or "cudnn" for a flash layer
// whose window covers the sequence (window_left >= t - 1), with as many kv heads as query heads,
// when the XV_TRAIN_CUDNN_ATTENTION lever is on and CudnnAttentionMatchesMath(q).
std::string LayerAttentionBackend(const torch::Tensor& q, const torch::Tensor& k,
                                  int64_t window_left, const std::string& backend);

// q: [B, T, H, D]; k, v: [B, T, Hkv, D] with Hkv dividing H (GQA: k/v heads are repeated for the
// math and sdpa backends). Scale 1/sqrt(D). Returns [B, T, H, D] (contiguous). backend: a resolved
// one (flash | sdpa | math) or "cudnn" (full causal only; REQUIRES compat::CudnnAttentionUsable).
torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, int64_t window_left,
                              const std::string& backend);

// Boolean [T, T] mask, true where query i may see key j (j <= i and i - j <= window_left).
torch::Tensor CausalBandMask(int64_t t, int64_t window_left, torch::Device device);

}  // namespace xv::trainer
