// Rotary embedding followed by RMSNorm over each head vector, the attention's
//   q = norm(apply_rotary_emb(q, cos, sin)); k = norm(apply_rotary_emb(k, cos, sin))
// as one autograd node. On CUDA tensors of a CUDA build (XV_TRAINER_CUDA_KERNELS) two fused kernels
// do it (trainer/kernels/rotary_rms_norm_kernels.h): one read of x and one write of the result
// forward, reads of x and the gradient and one write backward, saving only x and one fp32 scale per
// head vector; arithmetic in fp32 with one rounding to x's dtype at the end (as a compiled upstream
// does; eager upstream rounds after each op in bf16). Elsewhere (CPU, ROCm,
// XV_TRAIN_FUSED_ROTARY=0) the composite ApplyRotary + compat::RmsNorm runs, which is also the
// reference of the tests. Thread-safety: stateless.
#pragma once

#include <torch/torch.h>

namespace xv::trainer {

// Which fused kernels run: kAuto, the 16-byte vector kernels where they fit (head_dim / 2 a power
// of two times 16 bytes of elements, up to 32 lanes; 16-byte aligned tensors) and
// XV_TRAIN_VECTOR_ROTARY is not 0, else the one-warp-per-row kernels; kScalar and kVector force one
// (tests; kVector where it does not fit throws).
enum class RotaryKernelChoice { kAuto = 0, kScalar = 1, kVector = 2 };

// x: [B, T, H, D]; cos, sin: [1, >= T, 1, D/2] fp32 tables (PrecomputeRotary, narrowed to T);
// norm_eps <= 0: the machine epsilon of x's dtype. Result in x's dtype, differentiable in x.
// `choice` applies only where the fused kernels run.
torch::Tensor RotaryRmsNorm(const torch::Tensor& x, const torch::Tensor& cos,
                            const torch::Tensor& sin, double norm_eps, bool allow_fused = true,
                            RotaryKernelChoice choice = RotaryKernelChoice::kAuto);

// True when RotaryRmsNorm runs the fused kernels on `x` (CUDA build, CUDA tensor of fp32/bf16/fp16,
// even head_dim <= 256, XV_TRAIN_FUSED_ROTARY not 0).
bool FusedRotaryUsable(const torch::Tensor& x);

}  // namespace xv::trainer
