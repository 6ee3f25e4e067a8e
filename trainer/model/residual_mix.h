// The residual stream's per-layer mix, upstream's
//   x = resid_lambdas[i] * x + x0_lambdas[i] * x0
// On CUDA tensors of a CUDA build (XV_TRAINER_CUDA_KERNELS) one kernel each way does it
// (trainer/kernels/elementwise_kernels.h): forward one pass with one rounding (eager upstream
// rounds each product and the sum in bf16), backward one pass writing both input gradients and
// per-block partial sums of the two scalars' gradients, accumulated in fp32 (eager upstream rounds
// them to the activations' dtype). The composite (the expression above) runs elsewhere and with
// XV_TRAIN_FUSED_RESIDUAL=0; on the GPU its 0-dim device scalars send ATen to a slow broadcasting
// path. Thread-safety: stateless.
#pragma once

#include <torch/torch.h>

namespace xv::trainer {

// a, b: 0-dim (or one-element) fp32 tensors (parameters' entries); x, x0: the same shape and dtype.
// Differentiable in all four (first order).
torch::Tensor ResidualMix(const torch::Tensor& x, const torch::Tensor& x0, const torch::Tensor& a,
                          const torch::Tensor& b, bool allow_fused = true);

// True when ResidualMix runs the fused kernels for these operands.
bool FusedResidualMixUsable(const torch::Tensor& x, const torch::Tensor& x0, const torch::Tensor& a,
                            const torch::Tensor& b);

}  // namespace xv::trainer
