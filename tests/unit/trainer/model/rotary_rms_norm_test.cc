// The fused rotary + RMSNorm kernels (CUDA builds, on a GPU; skipped elsewhere) against the
// composite ApplyRotary + RmsNorm: outputs and input gradients for fp32 and bf16 and several head
// sizes, and in bf16 at least as close to an fp64 computation as the composite is.
#include <gtest/gtest.h>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/model/rotary.h"
#include "trainer/model/rotary_rms_norm.h"

namespace xv::trainer {
namespace {

using testing::RelativeError;

struct ValueAndGrad {
  torch::Tensor z, dx;
};

ValueAndGrad Apply(const torch::Tensor& x, const torch::Tensor& cos, const torch::Tensor& sin,
                   const torch::Tensor& dz, bool fused,
                   RotaryKernelChoice choice = RotaryKernelChoice::kAuto) {
  torch::Tensor xx = x.detach().clone().requires_grad_(true);
  torch::Tensor z = RotaryRmsNorm(xx, cos, sin, 0, fused, choice);
  z.backward(dz);
  return {z.detach(), xx.grad()};
}

TEST(RotaryRmsNormTest, FusedKernelsMatchTheCompositeOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto probe = torch::zeros({1, 1, 1, 8}, torch::TensorOptions().device(torch::kCUDA));
  if (!FusedRotaryUsable(probe)) GTEST_SKIP() << "this build has no fused CUDA kernels";
  torch::manual_seed(6);
  const int64_t b = 3, t = 50, h = 4;
  for (int64_t d : {int64_t{128}, int64_t{64}, int64_t{96}}) {
    auto tables = PrecomputeRotary(t * 2, d, 10000, torch::kCUDA);
    torch::Tensor cos = tables.first.narrow(1, 0, t), sin = tables.second.narrow(1, 0, t);
    auto f32 = torch::TensorOptions().device(torch::kCUDA);
    torch::Tensor x = torch::randn({b, t, h, d}, f32) * 2;
    torch::Tensor dz = torch::randn({b, t, h, d}, f32);
    SCOPED_TRACE("head_dim " + std::to_string(d));
    // fp32: the same function to fp32 rounding.
    ValueAndGrad composite = Apply(x, cos, sin, dz, false);
    ValueAndGrad fused = Apply(x, cos, sin, dz, true);
    EXPECT_LE(RelativeError(fused.z, composite.z), 1e-5);
    EXPECT_LE(RelativeError(fused.dx, composite.dx), 1e-5);
    // bf16: one rounding instead of one per op; compare both with fp64.
    ValueAndGrad exact = Apply(x.to(torch::kDouble), cos.to(torch::kDouble), sin.to(torch::kDouble),
                               dz.to(torch::kDouble), false);
    torch::Tensor xb = x.to(torch::kBFloat16), dzb = dz.to(torch::kBFloat16);
    ValueAndGrad composite_bf16 = Apply(xb, cos, sin, dzb, false);
    ValueAndGrad fused_bf16 = Apply(xb, cos, sin, dzb, true);
    ASSERT_EQ(fused_bf16.z.scalar_type(), torch::kBFloat16);
    ASSERT_EQ(fused_bf16.dx.scalar_type(), torch::kBFloat16);
    // The exact reference of the bf16 runs starts from the bf16 inputs.
    ValueAndGrad exact_bf16 = Apply(xb.to(torch::kDouble), cos.to(torch::kDouble),
                                    sin.to(torch::kDouble), dzb.to(torch::kDouble), false);
    const double ez_fused = RelativeError(fused_bf16.z.to(torch::kDouble), exact_bf16.z);
    const double ez_comp = RelativeError(composite_bf16.z.to(torch::kDouble), exact_bf16.z);
    const double ed_fused = RelativeError(fused_bf16.dx.to(torch::kDouble), exact_bf16.dx);
    const double ed_comp = RelativeError(composite_bf16.dx.to(torch::kDouble), exact_bf16.dx);
    EXPECT_LE(ez_fused, 8e-3);
    EXPECT_LE(ed_fused, 8e-3);
    EXPECT_LE(ez_fused, ez_comp * 1.05 + 1e-4);
    EXPECT_LE(ed_fused, ed_comp * 1.05 + 1e-4);
    EXPECT_LE(RelativeError(composite.z.to(torch::kDouble), exact.z), 1e-5);
  }
}

// The 16-byte vector kernels (several lanes per head vector) against the one-warp-per-row kernels:
// the same arithmetic per element, only the sums' order differs. Row counts that leave a block
// partly empty; head sizes that give 4, 8 and 16 lanes per row in bf16 and 8, 16, 32 in fp32.
TEST(RotaryRmsNormTest, VectorKernelsMatchTheScalarKernelsOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto probe = torch::zeros({1, 1, 1, 8}, torch::TensorOptions().device(torch::kCUDA));
  if (!FusedRotaryUsable(probe)) GTEST_SKIP() << "this build has no fused CUDA kernels";
  torch::manual_seed(7);
  const int64_t b = 3, t = 50, h = 3;
  for (int64_t d : {int64_t{64}, int64_t{128}, int64_t{256}}) {
    auto tables = PrecomputeRotary(t, d, 10000, torch::kCUDA);
    auto f32 = torch::TensorOptions().device(torch::kCUDA);
    torch::Tensor x = torch::randn({b, t, h, d}, f32) * 2;
    torch::Tensor dz = torch::randn({b, t, h, d}, f32);
    SCOPED_TRACE("head_dim " + std::to_string(d));
    for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
      torch::Tensor xt = x.to(dtype), dzt = dz.to(dtype);
      ValueAndGrad scalar =
          Apply(xt, tables.first, tables.second, dzt, true, RotaryKernelChoice::kScalar);
      ValueAndGrad vector =
          Apply(xt, tables.first, tables.second, dzt, true, RotaryKernelChoice::kVector);
      ASSERT_EQ(vector.z.scalar_type(), dtype);
      ASSERT_EQ(vector.dx.scalar_type(), dtype);
      EXPECT_FALSE(vector.z.isnan().any().item<bool>());
      // fp32: rounding of a reordered sum; bf16: at most one flipped rounding of an output.
      const double tol = dtype == torch::kFloat ? 1e-5 : 8e-3;
      EXPECT_LE(RelativeError(vector.z, scalar.z), tol) << dtype;
      EXPECT_LE(RelativeError(vector.dx, scalar.dx), tol) << dtype;
      if (dtype == torch::kBFloat16) {
        // Nearly every element is bit-identical.
        const double same = vector.z.eq(scalar.z).to(torch::kFloat).mean().item<double>();
        EXPECT_GE(same, 0.99) << dtype;
      }
    }
  }
  // A head size whose halves are not a power of two of 16-byte vectors has no vector kernel.
  torch::Tensor odd = torch::randn({1, 4, 2, 96}, torch::TensorOptions().device(torch::kCUDA));
  auto tables = PrecomputeRotary(4, 96, 10000, torch::kCUDA);
  EXPECT_THROW(
      RotaryRmsNorm(odd, tables.first, tables.second, 0, true, RotaryKernelChoice::kVector),
      c10::Error);
}

}  // namespace
}  // namespace xv::trainer
