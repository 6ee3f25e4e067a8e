// Fused CUDA kernels of the soft-capped cross-entropy (trainer/model/softcap_cross_entropy.h),
// plain CUDA over pointers: no LibTorch here (the ATen wrapper lives in softcap_cross_entropy.cc).
// Compiled only when the LibTorch is a CUDA build (XV_TRAINER_CUDA_KERNELS); every other build uses
// the composite.
//
// One thread block per row of logits [rows, vocab] (row-major, contiguous), reading the row once in
// the forward (an online max / sum of exp) and once in the backward (writing the gradient row in
// the logits' dtype). Arithmetic in fp32: s = cap * tanh(z / cap) (z when cap <= 0); fast_math
// computes exp with the special-function unit (__expf) and tanh from it (absolute error ~1e-7,
// far below a bf16 logit's rounding) and, in the forward, rescales the running sum once per
// 16-byte vector instead of once per element. Thread-safety:
// launches on the given stream; no state.
#pragma once

#include <cstdint>

namespace xv::trainer::kernels {

enum class LogitsType { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// lse[r] = log(sum_j exp(s_rj)); loss[r] = lse[r] - s_r,t for t = targets[r] >= 0, else 0.
// Returns nullptr, or the CUDA error's text.
const char* LaunchSoftcapCrossEntropyForward(const void* logits, LogitsType type,
                                             const int64_t* targets, int64_t rows, int64_t vocab,
                                             float softcap, bool fast_math, float* lse, float* loss,
                                             void* stream);

// dlogits[r, j] = row_scale[r] * (exp(s_rj - lse[r]) - [j == t_r]) * ds/dz, ds/dz = 1 - (s/cap)^2
// (1 without cap), written in `type`; row_scale[r] is 0 for ignored rows. Returns nullptr or the
// text.
const char* LaunchSoftcapCrossEntropyBackward(const void* logits, LogitsType type,
                                              const int64_t* targets, const float* lse,
                                              const float* row_scale, int64_t rows, int64_t vocab,
                                              float softcap, bool fast_math, void* dlogits,
                                              void* stream);

}  // namespace xv::trainer::kernels
