#include "trainer/model/residual_mix.h"

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

class ResidualMixFunction : public torch::autograd::Function<ResidualMixFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& x0_in, const torch::Tensor& a_in,
                               const torch::Tensor& b_in) {
    c10::cuda::CUDAGuard guard(x_in.device());
    torch::Tensor x = x_in.contiguous(), x0 = x0_in.contiguous();
    torch::Tensor a = a_in.to(torch::kFloat).contiguous(), b = b_in.to(torch::kFloat).contiguous();
    torch::Tensor y = torch::empty_like(x);
    const char* err = kernels::LaunchResidualMixForward(
        x.data_ptr(), x0.data_ptr(), KernelType(x), x.numel(), a.data_ptr<float>(),
        b.data_ptr<float>(), y.data_ptr(),
        at::cuda::getCurrentCUDAStream(x.device().index()).stream());
    TORCH_CHECK(err == nullptr, "fused residual mix forward kernel: ", err);
    ctx->save_for_backward({x, x0, a, b});
    ctx->saved_data["a_dtype"] = static_cast<int64_t>(a_in.scalar_type());
    ctx->saved_data["b_dtype"] = static_cast<int64_t>(b_in.scalar_type());
    return y;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor &x = saved[0], &x0 = saved[1], &a = saved[2], &b = saved[3];
    c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor dy = grad_outputs[0].to(x.scalar_type()).contiguous();
    torch::Tensor dx = torch::empty_like(x), dx0 = torch::empty_like(x0);
    const int64_t n = x.numel();
    torch::Tensor partials = torch::empty({kernels::ResidualMixBackwardPartials(n), 2},
                                          x.options().dtype(torch::kFloat));
    const char* err = kernels::LaunchResidualMixBackward(
        x.data_ptr(), x0.data_ptr(), dy.data_ptr(), KernelType(x), n, a.data_ptr<float>(),
        b.data_ptr<float>(), dx.data_ptr(), dx0.data_ptr(), partials.data_ptr<float>(),
        at::cuda::getCurrentCUDAStream(x.device().index()).stream());
    TORCH_CHECK(err == nullptr, "fused residual mix backward kernel: ", err);
    torch::Tensor sums = partials.sum(0);
    auto a_dtype = static_cast<torch::ScalarType>(ctx->saved_data["a_dtype"].toInt());
    auto b_dtype = static_cast<torch::ScalarType>(ctx->saved_data["b_dtype"].toInt());
    torch::Tensor da = sums[0].reshape(a.sizes()).to(a_dtype);
    torch::Tensor db = sums[1].reshape(b.sizes()).to(b_dtype);
    return {dx, dx0, da, db};
  }
};
#endif

}  // namespace

bool FusedResidualMixUsable(const torch::Tensor& x, const torch::Tensor& x0, const torch::Tensor& a,
                            const torch::Tensor& b) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  static const bool enabled = SpeedLeverEnabled(kLeverFusedResidual);
  const auto dtype = x.scalar_type();
  return enabled && x.is_cuda() && x0.is_cuda() && a.is_cuda() && b.is_cuda() &&
         x0.scalar_type() == dtype && x.sizes() == x0.sizes() && a.numel() == 1 && b.numel() == 1 &&
         (dtype == torch::kFloat || dtype == torch::kBFloat16 || dtype == torch::kHalf);
#else
  (void)x, (void)x0, (void)a, (void)b;
  return false;
#endif
}

torch::Tensor ResidualMix(const torch::Tensor& x, const torch::Tensor& x0, const torch::Tensor& a,
                          const torch::Tensor& b, bool allow_fused) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  if (allow_fused && FusedResidualMixUsable(x, x0, a, b))
    return ResidualMixFunction::apply(x, x0, a, b);
#else
  (void)allow_fused;
#endif
  return a * x + b * x0;
}

}  // namespace xv::trainer
