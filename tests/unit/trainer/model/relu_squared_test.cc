// ReluSquared is the plain relu(x).square() in fp32 and fp64, and in bf16 gives exactly what the
// plain path gives under autocast (square in fp32, rounded to bf16 by the next matmul; gradient
// rounded once). ReluSquaredLinear (relu(h)^2 recomputed in the backward) gives what ReluSquared
// followed by a bias-free linear layer gives, forward and gradients.
#include <gtest/gtest.h>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/model/relu_squared.h"

namespace xv::trainer {
namespace {

using testing::RelativeError;

struct ValueAndGrad {
  torch::Tensor y, dx;
};

ValueAndGrad Apply(const torch::Tensor& x, const torch::Tensor& dy, bool fused,
                   bool allow_kernels = true) {
  torch::Tensor xx = x.detach().clone().requires_grad_(true);
  torch::Tensor y;
  if (fused) {
    y = ReluSquared(xx, allow_kernels);
  } else if (x.scalar_type() == torch::kBFloat16) {
    // What autocast does with relu().square(): square (pow) in fp32, the consumer casts to bf16.
    y = torch::relu(xx).to(torch::kFloat).square().to(torch::kBFloat16);
  } else {
    y = torch::relu(xx).square();
  }
  y.backward(dy);
  return {y.detach(), xx.grad()};
}

TEST(ReluSquaredTest, EqualsThePlainPathInEveryDtype) {
  torch::manual_seed(5);
  const bool cuda = torch::cuda::is_available();
  std::vector<torch::Device> devices = {torch::kCPU};
  if (cuda) devices.push_back(torch::kCUDA);
  for (const auto& device : devices) {
    for (auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16}) {
      auto opts = torch::TensorOptions().dtype(dtype).device(device);
      torch::Tensor x = torch::randn({64, 96}, opts) * 3;
      x.index_put_({0, 0}, 0.0);  // the kink
      torch::Tensor dy = torch::randn({64, 96}, opts);
      ValueAndGrad plain = Apply(x, dy, false);
      ValueAndGrad fused = Apply(x, dy, true);
      SCOPED_TRACE(device.str() + " " + c10::toString(dtype));
      EXPECT_EQ(fused.y.scalar_type(), dtype);
      EXPECT_EQ(fused.dx.scalar_type(), dtype);
      // Bit for bit: the same roundings happen in both.
      EXPECT_TRUE(torch::equal(fused.y, plain.y));
      EXPECT_TRUE(torch::equal(fused.dx.abs(), plain.dx.abs()));  // -0 vs +0 where x <= 0
      EXPECT_EQ(fused.dx.masked_select(x <= 0).abs().max().item<double>(), 0.0);
      ValueAndGrad composite = Apply(x, dy, true, /*allow_kernels=*/false);
      EXPECT_TRUE(torch::equal(fused.y, composite.y));
      EXPECT_TRUE(torch::equal(fused.dx.abs(), composite.dx.abs()));
    }
  }
}

struct LinearGrads {
  torch::Tensor y, dh, dw;
};

// recompute: ReluSquaredLinear; else ReluSquared then matmul with w^T (the pair the MLP ran).
LinearGrads ApplyLinear(const torch::Tensor& h, const torch::Tensor& w, const torch::Tensor& dy,
                        bool recompute, bool allow_kernels) {
  torch::Tensor hh = h.detach().clone().requires_grad_(true);
  torch::Tensor ww = w.detach().clone().requires_grad_(true);
  torch::Tensor y = recompute ? ReluSquaredLinear(hh, ww, allow_kernels)
                              : torch::matmul(ReluSquared(hh, allow_kernels), ww.t());
  y.backward(dy);
  return {y.detach(), hh.grad(), ww.grad()};
}

TEST(ReluSquaredLinearTest, MatchesReluSquaredThenLinearInEveryDtype) {
  torch::manual_seed(7);
  std::vector<torch::Device> devices = {torch::kCPU};
  if (torch::cuda::is_available()) devices.push_back(torch::kCUDA);
  for (const auto& device : devices) {
    for (auto dtype : {torch::kFloat, torch::kDouble, torch::kBFloat16}) {
      auto opts = torch::TensorOptions().dtype(dtype).device(device);
      torch::Tensor h = torch::randn({3, 40, 96}, opts) * 2;
      torch::Tensor w = torch::randn({24, 96}, opts) * 0.1;
      torch::Tensor dy = torch::randn({3, 40, 24}, opts);
      // GEMMs may sum in another order (the weight's gradient is one product, not autograd's).
      const double tol = dtype == torch::kDouble ? 1e-12 : dtype == torch::kFloat ? 1e-5 : 1e-2;
      for (bool kernels : {true, false}) {
        SCOPED_TRACE(device.str() + " " + c10::toString(dtype) + (kernels ? " kernels" : ""));
        LinearGrads pair = ApplyLinear(h, w, dy, /*recompute=*/false, kernels);
        LinearGrads node = ApplyLinear(h, w, dy, /*recompute=*/true, kernels);
        EXPECT_EQ(node.y.scalar_type(), dtype);
        EXPECT_EQ(node.dh.scalar_type(), dtype);
        EXPECT_EQ(node.dw.scalar_type(), dtype);
        EXPECT_EQ(node.y.sizes(), pair.y.sizes());
        EXPECT_LE(RelativeError(node.y, pair.y), tol);
        EXPECT_LE(RelativeError(node.dh, pair.dh), tol);
        EXPECT_LE(RelativeError(node.dw, pair.dw), tol);
        EXPECT_EQ(node.dh.masked_select(h <= 0).abs().max().item<double>(), 0.0);
      }
    }
  }
}

TEST(ReluSquaredLinearTest, RejectsAWeightOfAnotherWidthOrDtype) {
  torch::Tensor h = torch::randn({4, 8});
  EXPECT_THROW(ReluSquaredLinear(h, torch::randn({3, 7})), c10::Error);
  EXPECT_THROW(ReluSquaredLinear(h, torch::randn({3, 8}, torch::kDouble)), c10::Error);
}

}  // namespace
}  // namespace xv::trainer
