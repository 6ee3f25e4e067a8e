#include "trainer/model/rotary_rms_norm.h"

#include "trainer/model/rotary.h"
#include "trainer/model/speed_levers.h"
#include "trainer/torch_compat.h"

#if defined(XV_TRAINER_CUDA_KERNELS)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "trainer/kernels/rotary_rms_norm_kernels.h"
#endif

namespace xv::trainer {

namespace {

#if defined(XV_TRAINER_CUDA_KERNELS)
kernels::RotaryType KernelType(const torch::Tensor& t) {
  switch (t.scalar_type()) {
    case torch::kBFloat16:
      return kernels::RotaryType::kBFloat16;
    case torch::kHalf:
      return kernels::RotaryType::kFloat16;
    default:
      return kernels::RotaryType::kFloat32;
  }
}

// Whether the 16-byte vector kernels run for this call (kAuto: where they fit and
// XV_TRAIN_VECTOR_ROTARY is not 0; kVector where they do not fit fails in the launch).
bool UseVectorKernels(RotaryKernelChoice choice, kernels::RotaryType type, int64_t head_dim,
                      const void* x, const void* other, const float* cos, const float* sin) {
  switch (choice) {
    case RotaryKernelChoice::kScalar:
      return false;
    case RotaryKernelChoice::kVector:
      return true;
    case RotaryKernelChoice::kAuto:
      break;
  }
  static const bool enabled = SpeedLeverEnabled(kLeverVectorRotary);
  return enabled && kernels::RotaryVectorKernelFits(type, head_dim, x, other, cos, sin);
}

class RotaryRmsNormFunction : public torch::autograd::Function<RotaryRmsNormFunction> {
 public:
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in,
                               const torch::Tensor& cos_in, const torch::Tensor& sin_in, double eps,
                               int64_t choice_in) {
    const auto choice = static_cast<RotaryKernelChoice>(choice_in);
    c10::cuda::CUDAGuard guard(x_in.device());
    torch::Tensor x = x_in.contiguous();
    const int64_t b = x.size(0), t = x.size(1), h = x.size(2), d = x.size(3);
    torch::Tensor cos = cos_in.narrow(1, 0, t).to(torch::kFloat).contiguous();
    torch::Tensor sin = sin_in.narrow(1, 0, t).to(torch::kFloat).contiguous();
    torch::Tensor z = torch::empty_like(x);
    torch::Tensor rstd = torch::empty({b * t * h}, x.options().dtype(torch::kFloat));
    const bool vector = UseVectorKernels(choice, KernelType(x), d, x.data_ptr(), z.data_ptr(),
                                         cos.data_ptr<float>(), sin.data_ptr<float>());
    const auto launch =
        vector ? kernels::LaunchRotaryRmsNormForwardVector : kernels::LaunchRotaryRmsNormForward;
    const char* err =
        launch(x.data_ptr(), KernelType(x), cos.data_ptr<float>(), sin.data_ptr<float>(), b * t * h,
               h, t, d, static_cast<float>(eps), z.data_ptr(), rstd.data_ptr<float>(),
               at::cuda::getCurrentCUDAStream(x.device().index()).stream());
    TORCH_CHECK(err == nullptr, "fused rotary + RMSNorm forward kernel: ", err);
    ctx->save_for_backward({x, cos, sin, rstd});
    ctx->saved_data["choice"] = choice_in;
    return z;
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grad_outputs) {
    auto saved = ctx->get_saved_variables();
    const torch::Tensor& x = saved[0];
    c10::cuda::CUDAGuard guard(x.device());
    torch::Tensor dz = grad_outputs[0].to(x.scalar_type()).contiguous();
    const int64_t b = x.size(0), t = x.size(1), h = x.size(2), d = x.size(3);
    torch::Tensor dx = torch::empty_like(x);
    const auto choice = static_cast<RotaryKernelChoice>(ctx->saved_data["choice"].toInt());
    // dx comes from the same allocator as dz: 16-byte aligned whenever dz is.
    const bool vector = UseVectorKernels(choice, KernelType(x), d, x.data_ptr(), dz.data_ptr(),
                                         saved[1].data_ptr<float>(), saved[2].data_ptr<float>());
    const auto launch =
        vector ? kernels::LaunchRotaryRmsNormBackwardVector : kernels::LaunchRotaryRmsNormBackward;
    const char* err =
        launch(x.data_ptr(), dz.data_ptr(), KernelType(x), saved[1].data_ptr<float>(),
               saved[2].data_ptr<float>(), saved[3].data_ptr<float>(), b * t * h, h, t, d,
               dx.data_ptr(), at::cuda::getCurrentCUDAStream(x.device().index()).stream());
    TORCH_CHECK(err == nullptr, "fused rotary + RMSNorm backward kernel: ", err);
    return {dx, torch::Tensor(), torch::Tensor(), torch::Tensor(), torch::Tensor()};
  }
};
#endif

}  // namespace

bool FusedRotaryUsable(const torch::Tensor& x) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  static const bool enabled = SpeedLeverEnabled(kLeverFusedRotary);
  const auto dtype = x.scalar_type();
  return enabled && x.is_cuda() && x.dim() == 4 && x.size(3) % 2 == 0 && x.size(3) <= 256 &&
         (dtype == torch::kFloat || dtype == torch::kBFloat16 || dtype == torch::kHalf);
#else
  (void)x;
  return false;
#endif
}

torch::Tensor RotaryRmsNorm(const torch::Tensor& x, const torch::Tensor& cos,
                            const torch::Tensor& sin, double norm_eps, bool allow_fused,
                            RotaryKernelChoice choice) {
#if defined(XV_TRAINER_CUDA_KERNELS)
  if (allow_fused && FusedRotaryUsable(x)) {
    const double eps = norm_eps > 0 ? norm_eps : compat::MachineEpsilon(x.scalar_type());
    return RotaryRmsNormFunction::apply(x, cos, sin, eps, static_cast<int64_t>(choice));
  }
#else
  (void)allow_fused;
  (void)choice;
#endif
  return compat::RmsNorm(ApplyRotary(x, cos.narrow(1, 0, x.size(1)), sin.narrow(1, 0, x.size(1))),
                         norm_eps);
}

}  // namespace xv::trainer
