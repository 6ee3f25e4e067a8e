// Fused elementwise CUDA kernels of the GPT block, plain CUDA over pointers (the ATen wrappers and
// composite fallbacks: trainer/model/relu_squared.h, trainer/model/residual_mix.h). Compiled only
// for a CUDA LibTorch. Arithmetic in fp32, one rounding to the tensors' dtype per output (ReLU^2
// keeps the composite's roundings exactly: see relu_squared.h). Contiguous tensors of n elements.
// Thread-safety: launches on the given stream; no state.
#pragma once

#include <cstdint>

namespace xv::trainer::kernels {

enum class ElementType { kFloat32 = 0, kBFloat16 = 1, kFloat16 = 2 };

// y = relu(x)^2. Returns nullptr, or the CUDA error's text.
const char* LaunchReluSquaredForward(const void* x, ElementType type, int64_t n, void* y,
                                     void* stream);
// dx = 2 * round(dy * relu(x)) (the round to the dtype). Returns nullptr, or the error's text.
const char* LaunchReluSquaredBackward(const void* x, const void* dy, ElementType type, int64_t n,
                                      void* dx, void* stream);

// y = a * x + b * x0 with a = *a_ptr, b = *b_ptr (fp32 scalars on the device).
const char* LaunchResidualMixForward(const void* x, const void* x0, ElementType type, int64_t n,
                                     const float* a_ptr, const float* b_ptr, void* y, void* stream);
// Number of fp32 pairs LaunchResidualMixBackward writes to `partials` for n elements.
int64_t ResidualMixBackwardPartials(int64_t n);
// dx = a * dy, dx0 = b * dy; partials[2 i] and partials[2 i + 1]: block i's sums of dy * x and
// dy * x0 (their totals are da and db).
const char* LaunchResidualMixBackward(const void* x, const void* x0, const void* dy,
                                      ElementType type, int64_t n, const float* a_ptr,
                                      const float* b_ptr, void* dx, void* dx0, float* partials,
                                      void* stream);

}  // namespace xv::trainer::kernels
