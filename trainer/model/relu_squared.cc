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

torch::Tensor ReluSquared(const torch::Tensor& x, bool allow_fused) {
  return ReluSquaredFunction::apply(x, allow_fused && FusedReluSquaredUsable(x));
}

}  // namespace xv::trainer
