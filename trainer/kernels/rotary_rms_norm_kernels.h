// Fused CUDA kernels of rotary embedding + RMSNorm over each head vector (the attention's q and k:
// norm(apply_rotary_emb(x, cos, sin))), plain CUDA over pointers; the ATen wrapper and the
// composite fallback are trainer/model/rotary_rms_norm.h. Compiled only for a CUDA LibTorch.
//
// x: [rows, head_dim] row-major (rows = B*T*H of a contiguous [B, T, H, D] tensor), row r at
// position t = (r / heads) % seq_len; cos, sin: fp32 [seq_len, head_dim / 2]. With x1 = x[:half],
// x2 = x[half:]: y = [x1 c + x2 s, -x1 s + x2 c], z = y * rstd, rstd = 1 / sqrt(mean(y^2) + eps),
// all in fp32, z rounded once to the dtype. One warp per row; head_dim even and at most 256.
// Thread-safety: launches on the given stream; no state.
#pragma once

#include <cstdint>

namespace xv::trainer::kernels {

enum class RotaryType { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// Writes z and rstd ([rows], fp32). Returns nullptr, or the CUDA error's text.
const char* LaunchRotaryRmsNormForward(const void* x, RotaryType type, const float* cos,
                                       const float* sin, int64_t rows, int64_t heads,
                                       int64_t seq_len, int64_t head_dim, float eps, void* z,
                                       float* rstd, void* stream);

// dx from dz (the gradient of z), recomputing y from x: dy = rstd (dz - z mean(dz z)), then the
// inverse rotation. Returns nullptr, or the CUDA error's text.
const char* LaunchRotaryRmsNormBackward(const void* x, const void* dz, RotaryType type,
                                        const float* cos, const float* sin, const float* rstd,
                                        int64_t rows, int64_t heads, int64_t seq_len,
                                        int64_t head_dim, void* dx, void* stream);

// The 16-byte vector kernels (XV_TRAIN_VECTOR_ROTARY): the same function, kVec = 16 / element
// size consecutive elements per lane, half / kVec lanes per row. They fit when half / kVec is a
// power of two up to 32 (bf16: head_dim 16, 32, ..., 512; fp32: 8, 16, ..., 256) and every pointer
// is 16-byte aligned; `other` is z (forward) or dz (backward).
bool RotaryVectorKernelFits(RotaryType type, int64_t head_dim, const void* x, const void* other,
                            const float* cos, const float* sin);

// As LaunchRotaryRmsNormForward; an error when RotaryVectorKernelFits(type, head_dim, x, z, ...)
// is false.
const char* LaunchRotaryRmsNormForwardVector(const void* x, RotaryType type, const float* cos,
                                             const float* sin, int64_t rows, int64_t heads,
                                             int64_t seq_len, int64_t head_dim, float eps, void* z,
                                             float* rstd, void* stream);

// As LaunchRotaryRmsNormBackward; an error when the vector kernel does not fit (dx 16-byte aligned
// too).
const char* LaunchRotaryRmsNormBackwardVector(const void* x, const void* dz, RotaryType type,
                                              const float* cos, const float* sin, const float* rstd,
                                              int64_t rows, int64_t heads, int64_t seq_len,
                                              int64_t head_dim, void* dx, void* stream);

}  // namespace xv::trainer::kernels
