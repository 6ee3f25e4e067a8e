#include "trainer/model/rotary.h"

namespace xv::trainer {

std::pair<torch::Tensor, torch::Tensor> PrecomputeRotary(int64_t seq_len, int64_t head_dim,
                                                         double base, torch::Device device) {
  auto f32 = torch::TensorOptions().dtype(torch::kFloat32).device(device);
  torch::Tensor channel_range = torch::arange(0, head_dim, 2, f32);
  torch::Tensor inv_freq = 1.0 / torch::pow(base, channel_range / static_cast<double>(head_dim));
  torch::Tensor t = torch::arange(seq_len, f32);
  torch::Tensor freqs = torch::outer(t, inv_freq);
  torch::Tensor cos = freqs.cos().unsqueeze(0).unsqueeze(2);
  torch::Tensor sin = freqs.sin().unsqueeze(0).unsqueeze(2);
  // Upstream keeps the tables in bf16; the values are rounded the same way here (and stored in fp32
  // so fp32 runs compute in fp32, as the reference vectors do).
  cos = cos.to(torch::kBFloat16).to(torch::kFloat32);
  sin = sin.to(torch::kBFloat16).to(torch::kFloat32);
  return {cos, sin};
}

torch::Tensor ApplyRotary(const torch::Tensor& x, const torch::Tensor& cos,
                          const torch::Tensor& sin) {
  TORCH_CHECK(x.dim() == 4, "ApplyRotary: expected [B, T, H, D], got ", x.sizes());
  const int64_t d = x.size(3) / 2;
  torch::Tensor c = cos.to(x.scalar_type());
  torch::Tensor s = sin.to(x.scalar_type());
  torch::Tensor x1 = x.narrow(3, 0, d);
  torch::Tensor x2 = x.narrow(3, d, d);
  torch::Tensor y1 = x1 * c + x2 * s;
  torch::Tensor y2 = x1 * (-s) + x2 * c;
  return torch::cat({y1, y2}, 3);
}

}  // namespace xv::trainer
