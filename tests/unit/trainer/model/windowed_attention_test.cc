// Windowed attention composed from causal attention over blocks (windowed_attention.h) against the
// band mask of the math backend: with the math kernels on the CPU (fp64 and fp32, 2 to 8 blocks,
// forward and the three gradients), and with cuDNN's kernels on CUDA in bf16.
#include <cstdio>

#include <gtest/gtest.h>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/model/attention.h"
#include "trainer/model/windowed_attention.h"
#include "trainer/torch_compat.h"

namespace xv::trainer {
namespace {

using testing::RelativeError;

struct Grads {
  torch::Tensor y, dq, dk, dv;
};

template <typename Attention>
Grads RunAttention(const torch::Tensor& q, const torch::Tensor& k, const torch::Tensor& v,
          const torch::Tensor& dy, Attention attention) {
  auto qq = q.detach().clone().requires_grad_(true);
  auto kk = k.detach().clone().requires_grad_(true);
  auto vv = v.detach().clone().requires_grad_(true);
  torch::Tensor y = attention(qq, kk, vv);
  y.backward(dy);
  return {y.detach(), qq.grad(), kk.grad(), vv.grad()};
}

TEST(BlockWindowedAttentionTest, AppliesWhereTheWindowSplitsTheSequenceIntoBlocks) {
  EXPECT_TRUE(BlockWindowApplies(2048, 1024));
  EXPECT_TRUE(BlockWindowApplies(2048, 256));
  EXPECT_FALSE(BlockWindowApplies(2048, 2048));  // one block: full causal
  EXPECT_FALSE(BlockWindowApplies(2048, 1000));  // does not divide
  EXPECT_FALSE(BlockWindowApplies(2048, 0));
  EXPECT_FALSE(BlockWindowApplies(2048, -1));
}

TEST(BlockWindowedAttentionTest, MathBlocksMatchTheBandMaskOnCpu) {
  torch::manual_seed(3);
  const auto math = MathCausalAttentionKernels();
  struct Case {
    int64_t t, window;
    torch::ScalarType dtype;
    double tolerance;
  };
  for (const Case& c : {Case{64, 32, torch::kDouble, 1e-12}, Case{96, 32, torch::kDouble, 1e-12},
                        Case{128, 16, torch::kDouble, 1e-12}, Case{64, 16, torch::kFloat, 2e-6}}) {
    const int64_t b = 2, h = 3, d = 16;
    auto opts = torch::TensorOptions().dtype(c.dtype);
    auto q = torch::randn({b, c.t, h, d}, opts), k = torch::randn({b, c.t, h, d}, opts);
    auto v = torch::randn({b, c.t, h, d}, opts), dy = torch::randn({b, c.t, h, d}, opts);
    Grads blocks = RunAttention(q, k, v, dy, [&](auto& qq, auto& kk, auto& vv) {
      return BlockWindowedAttention(qq, kk, vv, c.window, math);
    });
    Grads band = RunAttention(q, k, v, dy, [&](auto& qq, auto& kk, auto& vv) {
      return CausalAttention(qq, kk, vv, c.window, "math");
    });
    Grads full = RunAttention(q, k, v, dy, [&](auto& qq, auto& kk, auto& vv) {
      return CausalAttention(qq, kk, vv, c.t, "math");
    });
    SCOPED_TRACE("t " + std::to_string(c.t) + ", window " + std::to_string(c.window));
    EXPECT_EQ(blocks.y.sizes(), q.sizes());
    EXPECT_LE(RelativeError(blocks.y, band.y), c.tolerance);
    EXPECT_LE(RelativeError(blocks.dq, band.dq), c.tolerance);
    EXPECT_LE(RelativeError(blocks.dk, band.dk), c.tolerance);
    EXPECT_LE(RelativeError(blocks.dv, band.dv), c.tolerance);
    // The window matters on these shapes, so agreeing with the band is not agreeing with anything.
    EXPECT_GT(RelativeError(band.y, full.y), 1e-2);
    EXPECT_GT(RelativeError(band.dk, full.dk), 1e-2);
  }
}

TEST(BlockWindowedAttentionTest, RefusesWindowsThatDoNotSplitTheSequence) {
  auto x = torch::zeros({1, 48, 2, 8}, torch::TensorOptions().dtype(torch::kDouble));
  EXPECT_THROW(BlockWindowedAttention(x, x, x, 32, MathCausalAttentionKernels()), c10::Error);
  EXPECT_THROW(BlockWindowedAttention(x, x, x, 48, MathCausalAttentionKernels()), c10::Error);
  EXPECT_EQ(CudnnBlockAttentionKernels(x), nullptr);  // not CUDA bf16/fp16
  EXPECT_EQ(LayerAttentionBackend(x, x, 24, "math"), "math");
}

TEST(BlockWindowedAttentionTest, CudnnBlocksMatchMathOnCudaInBf16) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  torch::manual_seed(5);
  auto opts = torch::TensorOptions().device(torch::kCUDA).dtype(torch::kBFloat16);
  for (int64_t d : {64, 128}) {
    for (int64_t window : {128, 64}) {
      const int64_t b = 2, t = 256, h = 4;
      auto q = torch::randn({b, t, h, d}, opts), k = torch::randn({b, t, h, d}, opts);
      auto v = torch::randn({b, t, h, d}, opts), dy = torch::randn({b, t, h, d}, opts);
      ASSERT_TRUE(compat::CudnnAttentionUsable(q)) << "LibTorch " << compat::TorchVersionString();
      ASSERT_NE(CudnnBlockAttentionKernels(q), nullptr) << "head size " << d;
      ASSERT_TRUE(CudnnBandAttentionMatchesMath(q)) << "head size " << d;
      auto with = [&](const std::string& backend) {
        return RunAttention(q, k, v, dy, [&](auto& qq, auto& kk, auto& vv) {
          return CausalAttention(qq, kk, vv, window, backend);
        });
      };
      Grads m = with("math");
      for (const char* backend : {"cudnn-blocks", "cudnn-band", "flash"}) {
        Grads c = with(backend);
        std::printf("head size %ld, window %ld, %s vs math: y %.2e dq %.2e dk %.2e dv %.2e\n",
                    static_cast<long>(d), static_cast<long>(window), backend,
                    RelativeError(c.y, m.y), RelativeError(c.dq, m.dq), RelativeError(c.dk, m.dk),
                    RelativeError(c.dv, m.dv));
        EXPECT_LE(RelativeError(c.y, m.y), 2e-2) << backend;
        EXPECT_LE(RelativeError(c.dq, m.dq), 3e-2) << backend;
        EXPECT_LE(RelativeError(c.dk, m.dk), 3e-2) << backend;
        EXPECT_LE(RelativeError(c.dv, m.dv), 3e-2) << backend;
      }
    }
  }
}

}  // namespace
}  // namespace xv::trainer
