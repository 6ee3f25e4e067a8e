#include "trainer/model/attention.h"

#include <cmath>
#include <limits>

#include "trainer/torch_compat.h"

namespace xv::trainer {

std::string ResolveAttentionBackend(const std::string& requested, const torch::Tensor& x) {
  if (requested == "auto") return compat::FlashAttentionUsable(x) ? "flash" : "sdpa";
  if (requested == "flash") {
    TORCH_CHECK(
        compat::FlashAttentionUsable(x),
        "attention_backend: flash needs CUDA bf16/fp16 tensors and LibTorch >= 2.5 built with "
        "CUDA (this build: LibTorch ",
        compat::TorchVersionString(), ", tensors on ", x.device().str(), " in ",
        c10::toString(x.scalar_type()), "); use auto, sdpa or math");
    return requested;
  }
  TORCH_CHECK(requested == "sdpa" || requested == "math",
              "attention_backend: expected auto|flash|sdpa|math, got '", requested, "'");
  return requested;
}

torch::Tensor CausalBandMask(int64_t t, int64_t window_left, torch::Device device) {
  auto opts = torch::TensorOptions().dtype(torch::kInt64).device(device);
  torch::Tensor i = torch::arange(t, opts).unsqueeze(1);
  torch::Tensor j = torch::arange(t, opts).unsqueeze(0);
  torch::Tensor diff = i - j;
  return (diff >= 0).logical_and(diff <= window_left);
}

namespace {

// [B, T, Hkv, D] -> [B, H, T, D], repeating each kv head H/Hkv times (repeat_interleave order).
torch::Tensor ExpandKvHeads(const torch::Tensor& x, int64_t n_head) {
  torch::Tensor y = x.transpose(1, 2);
  const int64_t kv = y.size(1);
  if (kv == n_head) return y;
  return y.repeat_interleave(n_head / kv, /*dim=*/1);
}

}  // namespace

torch::Tensor CausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                              const torch::Tensor& v, int64_t window_left,
                              const std::string& backend) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4,
              "CausalAttention: expected [B, T, H, D] tensors");
  const int64_t n_head = q.size(2);
  TORCH_CHECK(n_head % k.size(2) == 0, "CausalAttention: kv heads (", k.size(2),
              ") must divide query heads (", n_head, ")");
  const int64_t t = q.size(1);
  if (backend == "flash") {
    // The kernel needs one dtype; under autocast v can arrive in fp32 (the value embeddings are
    // fp32 parameters here, bf16 upstream), so k and v follow q.
    return compat::FlashAttention(q, k.to(q.scalar_type()), v.to(q.scalar_type()), window_left)
        .contiguous();
  }
  torch::Tensor qh = q.transpose(1, 2);  // [B, H, T, D]
  torch::Tensor kh = ExpandKvHeads(k, n_head);
  torch::Tensor vh = ExpandKvHeads(v, n_head);
  torch::Tensor visible = CausalBandMask(t, window_left, q.device());
  torch::Tensor y;
  if (backend == "sdpa") {
    torch::Tensor mask =
        torch::zeros({t, t}, q.options())
            .masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
    y = compat::ScaledDotProductAttention(qh, kh, vh, mask);
  } else {
    TORCH_CHECK(backend == "math", "CausalAttention: unknown backend '", backend, "'");
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
    torch::Tensor scores = torch::matmul(qh, kh.transpose(-2, -1)) * scale;
    const bool half =
        scores.scalar_type() == torch::kBFloat16 || scores.scalar_type() == torch::kHalf;
    if (half) scores = scores.to(torch::kFloat32);
    scores = scores.masked_fill(visible.logical_not(), -std::numeric_limits<float>::infinity());
    torch::Tensor probs = torch::softmax(scores, -1).to(vh.scalar_type());
    y = torch::matmul(probs, vh);
  }
  return y.transpose(1, 2).contiguous();
}

}  // namespace xv::trainer
