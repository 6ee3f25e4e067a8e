// Rotary position embeddings as upstream: tables for 10x the sequence, rotate-half layout
// (first half / second half of each head's channels).
// Thread-safety: stateless functions.
#pragma once

#include <cstdint>
#include <utility>

#include <torch/torch.h>

namespace xv::trainer {

// cos/sin tables [1, seq_len, 1, head_dim/2] on `device`: inv_freq = 1 / base^(arange(0, head_dim,
// 2) / head_dim), angles = outer(arange(seq_len), inv_freq), computed in fp32 and rounded to bf16
// values as upstream's tables are (the reference vectors agree only with the rounded tables); held
// in fp32.
std::pair<torch::Tensor, torch::Tensor> PrecomputeRotary(int64_t seq_len, int64_t head_dim,
                                                         double base, torch::Device device);

// x: [B, T, H, D]; cos/sin: [1, T, 1, D/2] (cast to x's dtype, as upstream keeps them in the
// compute dtype). y1 = x1*cos + x2*sin, y2 = -x1*sin + x2*cos, concatenated on the last dim.
torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos,
                          const torch::Tensor& sin);

}  // namespace xv::trainer
