#include "trainer/model/relu_squared.h"

#include "trainer/model/speed_levers.h"

#if defined(XV_TRAINER_CUDA_KERNELS)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/kernels/elementwise_kernels.h"
#endif

namespace xv::trainer {

namespace {

#if defined(XV_TRAINER_CUDA_KERNELS)
kernels::ElementType KernelType(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kBFloat16:
      return kernels::ElementType::kBFloat16;
    case torch::kHalf:
      return kernels::ElementType::kFloat16;
    default:
      return kernels::ElementType::kFloat32;
  }
}
#endif

// relu(x)^2 in x's dtype, no autograd: the fused kernel or relu and a product. x contiguous.
torch::Tensor ReluSquaredValues(const torch::Tensor& x, bool fused) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  if (fused) {
    c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor y = torch::empty_like(x);
    const char* err = kernels::LaunchReluSquaredForward(
        x.data_ptr(), KernelType(x), x.numel(), y.data_ptr(),
        at::cuda::getCurrentCUDAStream(x.device().index()).stream());
    TORCH_CHECK(err == nullptr, "fused ReLU^2 forward kernel: ", err);
    return y;
  }
#endif
  (void)fused;
  torch::Tensor r = torch::relu(x);
  return r * r;
}

// dx = 2 * round(dy * relu(x)), no autograd. x contiguous; dy in x's dtype.
torch::Tensor ReluSquaredGradient(const torch::Tensor& x, const torch::Tensor& dy, bool fused) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  if (fused) {
    c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor dyc = dy.contiguous();
    torch::Tensor dx = torch::empty_like(x);
    const char* err = kernels::LaunchReluSquaredBackward(
        x.data_ptr(), dyc.data_ptr(), KernelType(x), x.numel(), dx.data_ptr(),
        at::cuda::getCurrentCUDAStream(x.device().index()).stream());
    TORCH_CHECK(err == nullptr, "fused ReLU^2 backward kernel: ", err);
    return dx;
  }
#endif
  (void)fused;
  return (dy * torch::relu(x)).mul_(2);
}

class ReluSquaredLinearFunction : public torch::autograd::Function<ReluSquaredLinearFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& h,
                               const torch::Tensor& w, bool fused) {
    ctx->saved_data["fused"] = fused;
    torch::Tensor hc = h.contiguous();
    ctx->save_for_backward({hc, w});
    return torch::matmul(ReluSquaredValues(hc, fused), w.t());
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const auto saved = ctx->get_saved_variables();
    const torch::Tensor& h = saved[0];
    const torch::Tensor& w = saved[1];
    const bool fused = ctx->saved_data["fused"].toBool();
    const int64_t hidden = h.size(-1), out = w.size(0);
    torch::Tensor dy = grad_outputs[0].to(h.scalar_type());
    torch::Tensor dw;
    {
      // relu(h)^2 again, alive only for the weight's gradient.
      torch::Tensor a = ReluSquaredValues(h, fused);
      dw = dy.reshape({-1, out}).t().mm(a.reshape({-1, hidden}));
    }
    torch::Tensor dh = ReluSquaredGradient(h, torch::matmul(dy, w), fused);
    return {dh, dw, torch::Tensor()};
  }
};

class ReluSquaredFunction : public torch::autograd::Function<ReluSquaredFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x,
                               bool fused) {
    ctx->saved_data["fused"] = fused;
#if defined(XV_TRAINER_CUDA_KERNELS)
    if (fused) {
      c10::cuda::CUDAGuard guard(x.device());
      torch::Tensor xc = x.contiguous();
      torch::Tensor y = torch::empty_like(xc);
      const char* err = kernels::LaunchReluSquaredForward(
          xc.data_ptr(), KernelType(xc), xc.numel(), y.data_ptr(),
          at::cuda::getCurrentCUDAStream(xc.device().index()).stream());
      TORCH_CHECK(err == nullptr, "fused ReLU^2 forward kernel: ", err);
      ctx->save_for_backward({xc});
      return y;
    }
#endif
    torch::Tensor r = torch::relu(x);
    ctx->save_for_backward({r});
    return r * r;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    const torch::Tensor saved = ctx->get_saved_variables()[0];
#if defined(XV_TRAINER_CUDA_KERNELS)
    if (ctx->saved_data["fused"].toBool()) {
      c10::cuda::CUDAGuard guard(saved.device());
      torch::Tensor dy = grad_outputs[0].to(saved.scalar_type()).contiguous();
      torch::Tensor dx = torch::empty_like(saved);
      const char* err = kernels::LaunchReluSquaredBackward(
          saved.data_ptr(), dy.data_ptr(), KernelType(saved), saved.numel(), dx.data_ptr(),
          at::cuda::getCurrentCUDAStream(saved.device().index()).stream());
      TORCH_CHECK(err == nullptr, "fused ReLU^2 backward kernel: ", err);
      return {dx, torch::Tensor()};
    }
#endif
    // d/dx relu(x)^2 = 2 relu(x) (0 where x <= 0, where r is 0); `saved` is relu(x).
    return {(grad_outputs[0] * saved).mul_(2), torch::Tensor()};
  }
};

}  // namespace

bool FusedReluSquaredUsable(const torch::Tensor& x) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  static const bool enabled = SpeedLeverEnabled(kLeverFusedReluSquared);
  const auto dtype = x.scalar_type();
  return enabled && x.is_cuda() &&
         (dtype == torch::kFloat || dtype == torch::kBFloat16 || dtype == torch::kHalf);
#else
  (void)x;
  return false;
#endif
}

torch::Tensor ReluSquaredLinear(const torch::Tensor& h, const torch::Tensor& w, bool allow_fused) {
  TORCH_CHECK(w.dim() == 2 && w.size(1) == h.size(-1), "ReluSquaredLinear: weight ", w.sizes(),
              " does not take inputs of width ", h.size(-1));
  TORCH_CHECK(w.scalar_type() == h.scalar_type(), "ReluSquaredLinear: weight in ",
              c10::toString(w.scalar_type()), ", input in ", c10::toString(h.scalar_type()));
  return ReluSquaredLinearFunction::apply(h, w, allow_fused && FusedReluSquaredUsable(h));
}

torch::Tensor ReluSquared(const torch::Tensor& x, bool allow_fused) {
  return ReluSquaredFunction::apply(x, allow_fused && FusedReluSquaredUsable(x));
}

}  // namespace xv::trainer
