#include "trainer/model/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>

#include "trainer/model/speed_levers.h"
#include "trainer/torch_compat.h"

namespace xv::trainer {

bool FlashAttentionHonoursWindows(const torch::Tensor& x) {
  if (!compat::FlashAttentionUsable(x)) return false;
  static std::mutex mu;
  static std::map<std::pair<int, int>, bool> verdicts;  // (device index, dtype) -> verdict
  const std::pair<int, int> key(x.device().index(), static_cast<int>(x.scalar_type()));
  std::lock_guard<std::mutex> lock(mu);
  auto it = verdicts.find(key);
  if (it != verdicts.end()) return it->second;
  bool honoured = false;
  try {
    torch::NoGradGuard no_grad;
    // Deterministic data (no RNG draw, so seeded runs are unchanged): 64 positions, 2 heads of 64,
    // values that drift with the position so a 7-token window and full causal attention differ.
    const int64_t t = 64, h = 2, d = 64, window = 7;
    auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(x.device());
    torch::Tensor pos = torch::arange(t, f32).reshape({1, t, 1, 1});
    torch::Tensor lane = torch::arange(h * d, f32).reshape({1, 1, h, d});
    torch::Tensor q = torch::sin(pos * 0.37 + lane * 0.11).to(x.scalar_type());
    torch::Tensor k = torch::cos(pos * 0.23 - lane * 0.07).to(x.scalar_type());
    torch::Tensor v = torch::sin(pos * 0.05 + lane * 0.03).to(x.scalar_type());
    torch::Tensor flash = compat::FlashAttention(q, k, v, window).to(torch::kFloat);
    torch::Tensor windowed = CausalAttention(q, k, v, window, "math").to(torch::kFloat);
    torch::Tensor full = CausalAttention(q, k, v, t, "math").to(torch::kFloat);
    const double err_windowed = (flash - windowed).abs().max().item<double>();
    const double err_full = (flash - full).abs().max().item<double>();
    honoured = err_windowed < 0.05 && err_windowed < 0.25 * err_full;
  } catch (const c10::Error&) {
    honoured = false;  // the kernel refused the window (or the device): not usable with windows
  }
  verdicts[key] = honoured;
  return honoured;
}

namespace {

// ||a - b|| / ||b|| in fp32.
double RelativeDifference(const torch::Tensor& a, const torch::Tensor& b) {
  torch::Tensor bf = b.to(torch::kFloat);
  return ((a.to(torch::kFloat) - bf).norm() / bf.norm().clamp_min(1e-30)).item<double>();
}

struct AttentionGrads {
  torch::Tensor y, dq, dk, dv;
};

AttentionGrads AttentionWithGrads(const torch::Tensor& q, const torch::Tensor& k,
                                  const torch::Tensor& v, const torch::Tensor& dy,
                                  const std::string& backend) {
  torch::Tensor qq = q.detach().clone().requires_grad_(true);
  torch::Tensor kk = k.detach().clone().requires_grad_(true);
  torch::Tensor vv = v.detach().clone().requires_grad_(true);
  torch::Tensor y = CausalAttention(qq, kk, vv, q.size(1), backend);
  auto grads = torch::autograd::grad({y}, {qq, kk, vv}, {dy});
  return {y.detach(), grads[0], grads[1], grads[2]};
}

}  // namespace

bool CudnnAttentionMatchesMath(const torch::Tensor& x) {
  if (!compat::CudnnAttentionUsable(x)) return false;
  const int64_t d = x.dim() == 4 ? x.size(3) : 64;
  static std::mutex mu;
  static std::map<std::tuple<int, int, int64_t>, bool> verdicts;
  const std::tuple<int, int, int64_t> key(x.device().index(), static_cast<int>(x.scalar_type()), d);
  std::lock_guard<std::mutex> lock(mu);
  auto it = verdicts.find(key);
  if (it != verdicts.end()) return it->second;
  bool matches = false;
  try {
    torch::AutoGradMode grad_mode(true);
    // Deterministic data (no RNG draw): 2 x 128 positions, 2 heads, values that vary with the
    // position so causal masking matters.
    const int64_t b = 2, t = 128, h = 2;
    auto f32 = torch::TensorOptions().dtype(torch::kFloat).device(x.device());
    torch::Tensor pos = torch::arange(b * t, f32).reshape({b, t, 1, 1});
    torch::Tensor lane = torch::arange(h * d, f32).reshape({1, 1, h, d});
    torch::Tensor q = torch::sin(pos * 0.37 + lane * 0.11).to(x.scalar_type());
    torch::Tensor k = torch::cos(pos * 0.23 - lane * 0.07).to(x.scalar_type());
    torch::Tensor v = torch::sin(pos * 0.05 + lane * 0.03).to(x.scalar_type());
    torch::Tensor dy = torch::cos(pos * 0.13 + lane * 0.05).to(x.scalar_type());
    AttentionGrads c = AttentionWithGrads(q, k, v, dy, "cudnn");
    AttentionGrads m = AttentionWithGrads(q, k, v, dy, "math");
    double worst = 0;
    for (auto [a, r] : {std::pair(c.y, m.y), std::pair(c.dq, m.dq), std::pair(c.dk, m.dk),
                        std::pair(c.dv, m.dv)}) {
      worst = std::max(worst, RelativeDifference(a, r));
    }
    matches = worst < 3e-2;
  } catch (const c10::Error&) {
    matches = false;  // no cuDNN kernel for this device, dtype or shape
  }
  verdicts[key] = matches;
  return matches;
}

std::string LayerAttentionBackend(const torch::Tensor& q, const torch::Tensor& k,
                                  int64_t window_left, const std::string& backend) {
  static const bool cudnn_lever = SpeedLeverEnabled(kLeverCudnnAttention);
  const bool full_causal = window_left < 0 || window_left >= q.size(1) - 1;
  if (backend == "flash" && cudnn_lever && full_causal && k.size(2) == q.size(2) &&
      CudnnAttentionMatchesMath(q)) {
    return "cudnn";
  }
  return backend;
}

std::string ResolveAttentionBackend(const std::string& requested, const torch::Tensor& x) {
  if (requested == "auto") return FlashAttentionHonoursWindows(x) ? "flash" : "sdpa";
  if (requested == "flash") {
    TORCH_CHECK(
        compat::FlashAttentionUsable(x),
        "attention_backend: flash needs CUDA/ROCm bf16/fp16 tensors and LibTorch >= 2.5 built "
        "with CUDA or ROCm (this build: LibTorch ",
        compat::TorchVersionString(), ", tensors on ", x.device().str(), " in ",
        c10::toString(x.scalar_type()), "); use auto, sdpa or math");
    TORCH_CHECK(FlashAttentionHonoursWindows(x),
                "attention_backend: flash on this device (LibTorch ", compat::TorchVersionString(),
                ") ignores or refuses sliding windows (checked against the math backend); use "
                "auto or sdpa");
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
  if (backend == "cudnn") {
    TORCH_CHECK(k.size(2) == n_head,
                "CausalAttention: cudnn needs as many kv heads as query heads");
    return compat::CudnnCausalAttention(q, k.to(q.scalar_type()), v.to(q.scalar_type()))
        .contiguous();
  }
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
