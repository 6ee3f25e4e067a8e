// ResidualMix's fused CUDA kernels (CUDA builds on a GPU; skipped elsewhere) against the composite
// a * x + b * x0: values and all four gradients, fp32 and bf16, and with x and x0 the same tensor
// (the first layer); on the CPU the composite is the expression itself.
#include <gtest/gtest.h>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/model/residual_mix.h"

namespace xv::trainer {
namespace {

using testing::RelativeError;

struct Grads {
  torch::Tensor y, dx, dx0, da, db;
};

Grads RunMix(const torch::Tensor& x, const torch::Tensor& x0, const torch::Tensor& lambdas,
             const torch::Tensor& dy, bool allow_fused, bool same_input) {
  torch::Tensor xx = x.detach().clone().requires_grad_(true);
  torch::Tensor xx0 = same_input ? xx : x0.detach().clone().requires_grad_(true);
  torch::Tensor l = lambdas.detach().clone().requires_grad_(true);
  torch::Tensor y = ResidualMix(xx, xx0, l[0], l[1], allow_fused);
  y.backward(dy);
  torch::Tensor dl = l.grad();
  return {y.detach(), xx.grad(), same_input ? torch::Tensor() : xx0.grad(), dl[0], dl[1]};
}

TEST(ResidualMixTest, FusedKernelsMatchTheCompositeOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto f32 = torch::TensorOptions().device(torch::kCUDA);
  torch::Tensor lambdas = torch::tensor({0.9f, 0.15f}, f32);
  auto probe = torch::zeros({8}, f32);
  if (!FusedResidualMixUsable(probe, probe, lambdas[0], lambdas[1]))
    GTEST_SKIP() << "this build has no fused CUDA kernels";
  torch::manual_seed(7);
  // 3 x 50 x 37 elements: not a multiple of the 16-byte vector width, so the tail path runs too.
  torch::Tensor x = torch::randn({3, 50, 37}, f32), x0 = torch::randn({3, 50, 37}, f32);
  torch::Tensor dy = torch::randn({3, 50, 37}, f32);
  for (auto dtype : {torch::kFloat, torch::kBFloat16}) {
    for (bool same : {false, true}) {
      SCOPED_TRACE(std::string(c10::toString(dtype)) + (same ? " x0 = x" : ""));
      Grads c = RunMix(x.to(dtype), x0.to(dtype), lambdas, dy.to(dtype), false, same);
      Grads f = RunMix(x.to(dtype), x0.to(dtype), lambdas, dy.to(dtype), true, same);
      const double tol = dtype == torch::kFloat ? 1e-6 : 1e-2;
      ASSERT_EQ(f.y.scalar_type(), dtype);
      EXPECT_LE(RelativeError(f.y.to(torch::kFloat), c.y.to(torch::kFloat)), tol);
      EXPECT_LE(RelativeError(f.dx.to(torch::kFloat), c.dx.to(torch::kFloat)), tol);
      if (!same) EXPECT_LE(RelativeError(f.dx0.to(torch::kFloat), c.dx0.to(torch::kFloat)), tol);
      // The scalars' gradients: the kernel sums in fp32, the composite rounds each product and its
      // sum to bf16 in bf16 (1.1e-2 off here), so both are held against the exact sums.
      torch::Tensor dyd = dy.to(dtype).to(torch::kDouble), xd = x.to(dtype).to(torch::kDouble);
      torch::Tensor x0d = same ? xd : x0.to(dtype).to(torch::kDouble);
      torch::Tensor da = (dyd * xd).sum(), db = (dyd * x0d).sum();
      EXPECT_LE(RelativeError(f.da.to(torch::kDouble), da), 1e-5);
      EXPECT_LE(RelativeError(f.db.to(torch::kDouble), db), 1e-5);
      EXPECT_LE(RelativeError(c.da.to(torch::kDouble), da), dtype == torch::kFloat ? 1e-5 : 3e-2);
      EXPECT_EQ(f.da.scalar_type(), torch::kFloat);
    }
  }
}

}  // namespace
}  // namespace xv::trainer
