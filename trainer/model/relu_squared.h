// ReLU^2 in the activations' own dtype: relu(x).square() as one autograd node that saves relu(x)
// only.
//
// Under bf16 autocast the plain `torch::relu(h).square()` runs square as pow, which autocast sends
// to fp32: an fp32 copy of the MLP's hidden activations (4x the residual width) is made, squared,
// saved for the backward and cast back to bf16 by c_proj, and the backward casts its gradient up
// and down again. The values are the same in bf16: relu(x) is a bf16 number, its square is exact in
// fp32, and c_proj rounds it to bf16 as the bf16 product does; the backward's 2 * dy * relu(x) is
// exact in fp32 before its one rounding, and round(dy * r) * 2 is that same bf16 number. So this
// function gives the plain path's forward values and gradients in bf16, and computes the identical
// function in fp32/fp64 (ATen's pow(x, 2) is x * x), with no fp32 copies. Thread-safety: stateless.
#pragma once

#include <torch/torch.h>

namespace xv::trainer {

// relu(x)^2, differentiable in x (first order); result in x's dtype. allow_fused = false forces the
// composite (the tests compare the two).
torch::Tensor ReluSquared(const torch::Tensor& x, bool allow_fused = true);

// relu(h)^2 @ w^T, differentiable in h and w (first order), as one node that saves h and w only and
// recomputes relu(h)^2 in the backward: ReluSquared followed by a bias-free linear layer saves
// both h and relu(h)^2 (c_proj's input), and the latter is the MLP's largest saved activation
// (4x the residual width, one per layer). Same roundings as that pair (relu(h)^2 rounded once to
// h's dtype, the products in h's dtype); the backward runs relu(h)^2 once more. h: [..., hidden];
// w: [out, hidden] in h's dtype (cast it first, as autocast would). Returns [..., out].
// allow_fused = false forces the composite elementwise parts.
torch::Tensor ReluSquaredLinear(const torch::Tensor& h, const torch::Tensor& w,
                                bool allow_fused = true);

// True when ReluSquared runs the fused kernels on `x`.
bool FusedReluSquaredUsable(const torch::Tensor& x);

}  // namespace xv::trainer
