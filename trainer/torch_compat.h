// torch_compat: the one header that hides LibTorch version differences.
//
// Debian 12's LibTorch 1.13 (CPU) has the private at::_scaled_dot_product_attention (1.13
// signature, returns (out, weights)) but neither the public scaled_dot_product_attention nor
// at::rms_norm; the GPU builds use LibTorch 2.x, which has both, and on CUDA ATen's
// _flash_attention_forward with a native sliding window (window_size_left/right). Everything
// version-dependent goes through here. Thread-safety: stateless functions.
#pragma once

#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include <torch/torch.h>
#include <torch/version.h>

#define XV_TORCH_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||     \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

// ATen exposes _flash_attention_forward with window_size_left/right from 2.5 on (CUDA builds).
#if XV_TORCH_AT_LEAST(2, 5)
#define XV_TORCH_HAS_FLASH_WINDOW 1
#else
#define XV_TORCH_HAS_FLASH_WINDOW 0
#endif

// ATen's cuDNN attention (_scaled_dot_product_cudnn_attention with an optional bias, autograd
// through _scaled_dot_product_cudnn_attention_backward) has this signature from 2.5 on; it has no
// sliding window, so it serves full-causal layers only.
#if XV_TORCH_AT_LEAST(2, 5)
#define XV_TORCH_HAS_CUDNN_ATTENTION 1
#else
#define XV_TORCH_HAS_CUDNN_ATTENTION 0
#endif

namespace xv::trainer::compat {

inline std::string TorchVersionString() { return TORCH_VERSION; }

// F.rms_norm(x, (x.size(-1),), eps=eps) without weight. eps <= 0 means finfo(x.dtype).eps,
// upstream's default; `xv-train verify --precision fp64` passes fp32's eps explicitly so that an
// fp64 run computes the fp32 reference's function exactly. Half-precision inputs are normalised in
// fp32 and cast back, as ATen's composite does.
inline double MachineEpsilon(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16:
      return 0.0078125;  // finfo(bfloat16).eps
    case at::kHalf:
      return 0.0009765625;  // finfo(float16).eps
    case at::kDouble:
      return std::numeric_limits<double>::epsilon();
    default:
      return std::numeric_limits<float>::epsilon();
  }
}

inline torch::Tensor RmsNorm(const torch::Tensor& x, double eps = 0) {
#if XV_TORCH_AT_LEAST(2, 4)
  return at::rms_norm(x, {x.size(-1)}, c10::nullopt,
                      eps > 0 ? c10::optional<double>(eps) : c10::nullopt);
#else
  if (eps <= 0) eps = MachineEpsilon(x.scalar_type());
  torch::Tensor xf = x.scalar_type() == at::kDouble ? x : x.to(at::kFloat);
  torch::Tensor y = xf * torch::rsqrt(xf.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return y.to(x.scalar_type());
#endif
}

// Scaled dot-product attention over [B, H, T, D] tensors with an additive float mask [T, S]
// (0 = visible, -inf = hidden), scale 1/sqrt(D), no dropout. LibTorch >= 2.0: the public SDPA
// (ATen picks its fused CPU/GPU kernels); 1.13: the private composite one.
inline torch::Tensor ScaledDotProductAttention(const torch::Tensor& q, const torch::Tensor& k,
                                               const torch::Tensor& v, const torch::Tensor& mask) {
#if XV_TORCH_AT_LEAST(2, 0)
  return at::scaled_dot_product_attention(q, k, v, mask, 0.0, false);
#else
  return std::get<0>(at::_scaled_dot_product_attention(q, k, v, mask, 0.0, false, false));
#endif
}

// True when this build can run ATen's flash attention with a native window on `x` (CUDA, bf16 or
// fp16, LibTorch >= 2.5 with CUDA).
inline bool FlashAttentionUsable(const torch::Tensor& x) {
#if XV_TORCH_HAS_FLASH_WINDOW
  return x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) &&
         torch::cuda::is_available();
#else
  (void)x;
  return false;
#endif
}

// Flash attention over [B, T, H, D] q and [B, T, Hkv, D] k/v (Hkv divides H; the kernel handles
// GQA), causal, query i sees key j when i - j <= window_left. Returns [B, T, H, D].
// REQUIRES: FlashAttentionUsable(q).
inline torch::Tensor FlashAttention(const torch::Tensor& q, const torch::Tensor& k,
                                    const torch::Tensor& v, int64_t window_left) {
#if XV_TORCH_HAS_FLASH_WINDOW
  const int64_t t = q.size(1);
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  auto result = at::_flash_attention_forward(
      q, k, v, /*cum_seq_q=*/c10::nullopt, /*cum_seq_k=*/c10::nullopt, /*max_q=*/t, /*max_k=*/t,
      /*dropout_p=*/0.0, /*is_causal=*/true, /*return_debug_mask=*/false, scale,
      /*window_size_left=*/window_left >= t ? -1 : window_left, /*window_size_right=*/0);
  return std::get<0>(result);
#else
  (void)k;
  (void)v;
  (void)window_left;
  TORCH_CHECK(false, "flash attention needs LibTorch >= 2.5 with CUDA; this build has ",
              TORCH_VERSION);
  return q;
#endif
}

// True when this build has ATen's cuDNN attention and `x` is a CUDA bf16/fp16 tensor (whether the
// installed cuDNN runs it is only known by calling it: see attention.h's
// CudnnAttentionMatchesMath).
inline bool CudnnAttentionUsable(const torch::Tensor& x) {
#if XV_TORCH_HAS_CUDNN_ATTENTION
  return x.is_cuda() && (x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kHalf) &&
         torch::cuda::is_available();
#else
  (void)x;
  return false;
#endif
}

// Full causal attention through cuDNN over [B, T, H, D] q, k and v (same head count), scale
// 1/sqrt(D), differentiable. Returns [B, T, H, D] (a transposed view of cuDNN's [B, H, T, D]
// output, whose memory is laid out as [B, T, H, D]). REQUIRES: CudnnAttentionUsable(q).
inline torch::Tensor CudnnCausalAttention(const torch::Tensor& q, const torch::Tensor& k,
                                          const torch::Tensor& v) {
#if XV_TORCH_HAS_CUDNN_ATTENTION
  const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  auto result = at::_scaled_dot_product_cudnn_attention(
      q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), /*attn_bias=*/c10::nullopt,
      /*compute_log_sumexp=*/true, /*dropout_p=*/0.0, /*is_causal=*/true,
      /*return_debug_mask=*/false, scale);
  return std::get<0>(result).transpose(1, 2);
#else
  (void)k;
  (void)v;
  TORCH_CHECK(false, "cuDNN attention needs LibTorch >= 2.5 with CUDA; this build has ",
              TORCH_VERSION);
  return q;
#endif
}

}  // namespace xv::trainer::compat
