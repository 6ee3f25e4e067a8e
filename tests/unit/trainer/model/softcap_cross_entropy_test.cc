// The chunked soft-cap + cross-entropy (SoftcapCrossEntropy) computes the plain path's function:
// forward loss and the logits' gradient for every reduction, ignored targets, chunk sizes that do
// and do not divide the rows, fp32/fp64 on the CPU and bf16 logits (on CUDA when present, else the
// CPU); and a bf16 run keeps its embeddings bf16 (GPT::CastEmbeddings).
#include <gtest/gtest.h>

#include "tests/unit/trainer/model/reference_fixture.h"
#include "trainer/device/autocast_scope.h"
#include "trainer/model/gpt.h"
#include "trainer/model/softcap_cross_entropy.h"

namespace xv::trainer {
namespace {

using testing::RelativeError;

struct LossAndGrad {
  torch::Tensor loss, grad;
};

LossAndGrad RunLoss(const torch::Tensor& logits, const torch::Tensor& targets, double softcap,
                    const std::string& reduction, int64_t chunk_rows, bool chunked,
                    const torch::Tensor& grad_out, bool allow_fused = true) {
  torch::Tensor x = logits.detach().clone().requires_grad_(true);
  torch::Tensor loss =
      chunked ? SoftcapCrossEntropy(x, targets, softcap, reduction, chunk_rows, allow_fused)
              : SoftcapCrossEntropyPlain(x, targets, softcap, reduction);
  loss.backward(reduction == "none" ? grad_out : torch::Tensor());
  return {loss.detach(), x.grad()};
}

// Targets with about one in five ignored (-1).
torch::Tensor Targets(int64_t n, int64_t vocab, const torch::TensorOptions& opts) {
  torch::Tensor t = torch::randint(vocab, {n}, opts.dtype(torch::kLong));
  return t.masked_fill(torch::rand({n}, opts.dtype(torch::kFloat)) < 0.2, -1);
}

TEST(SoftcapCrossEntropyTest, MatchesPlainPathOnCpu) {
  torch::manual_seed(1);
  const int64_t n = 37, vocab = 50;
  for (auto dtype : {torch::kFloat, torch::kDouble}) {
    auto opts = torch::TensorOptions().dtype(dtype);
    // Scaled so that the soft-cap bends the larger logits.
    torch::Tensor logits = torch::randn({n, vocab}, opts) * 12;
    torch::Tensor targets = Targets(n, vocab, opts);
    torch::Tensor grad_none = torch::randn({n}, opts);
    const double tol = dtype == torch::kDouble ? 1e-12 : 1e-5;
    for (double softcap : {15.0, 0.0}) {
      for (const char* reduction : {"mean", "sum", "none"}) {
        LossAndGrad plain = RunLoss(logits, targets, softcap, reduction, 0, false, grad_none);
        for (int64_t chunk : {int64_t{1}, int64_t{8}, int64_t{37}, int64_t{0}}) {
          LossAndGrad chunked =
              RunLoss(logits, targets, softcap, reduction, chunk, true, grad_none);
          SCOPED_TRACE(std::string(c10::toString(dtype)) + " softcap " + std::to_string(softcap) +
                       " " + reduction + " chunk " + std::to_string(chunk));
          ASSERT_EQ(chunked.loss.sizes(), plain.loss.sizes());
          EXPECT_EQ(chunked.loss.scalar_type(), plain.loss.scalar_type());
          EXPECT_LE(RelativeError(chunked.loss, plain.loss), tol);
          ASSERT_EQ(chunked.grad.scalar_type(), dtype);
          EXPECT_LE(RelativeError(chunked.grad, plain.grad), tol);
        }
      }
    }
  }
}

TEST(SoftcapCrossEntropyTest, IgnoredRowsGetNoGradientAndAllIgnoredMeanIsNan) {
  torch::Tensor logits = torch::randn({4, 6});
  torch::Tensor targets = torch::tensor({2, -1, 5, -1}, torch::kLong);
  LossAndGrad r = RunLoss(logits, targets, 15, "mean", 3, true, {});
  EXPECT_EQ(r.grad[1].abs().max().item<float>(), 0.0f);
  EXPECT_EQ(r.grad[3].abs().max().item<float>(), 0.0f);
  EXPECT_GT(r.grad[0].abs().max().item<float>(), 0.0f);
  torch::Tensor none = SoftcapCrossEntropy(logits, targets, 15, "none", 3);
  EXPECT_EQ(none[1].item<float>(), 0.0f);
  torch::Tensor all_ignored = torch::full({4}, -1, torch::kLong);
  EXPECT_TRUE(std::isnan(SoftcapCrossEntropy(logits, all_ignored, 15, "mean").item<float>()));
  EXPECT_THROW(SoftcapCrossEntropy(logits, targets, 15, "max"), c10::Error);
  EXPECT_THROW(SoftcapCrossEntropy(logits, targets.narrow(0, 0, 3), 15, "mean"), c10::Error);
}

// bf16 logits, as under autocast: the loss is fp32, the gradient comes back in bf16 and agrees
// with the plain path's (which casts its fp32 gradient to bf16 at the end) to bf16 rounding.
TEST(SoftcapCrossEntropyTest, Bf16LogitsGetBf16GradientMatchingPlainPath) {
  torch::manual_seed(2);
  const bool cuda = torch::cuda::is_available();
  auto opts = torch::TensorOptions().device(cuda ? torch::kCUDA : torch::kCPU);
  const int64_t n = cuda ? 4096 : 300, vocab = cuda ? 8192 : 512;
  torch::Tensor logits = (torch::randn({n, vocab}, opts) * 8).to(torch::kBFloat16);
  torch::Tensor targets = Targets(n, vocab, opts);
  LossAndGrad plain = RunLoss(logits, targets, 15, "mean", 0, false, {});
  LossAndGrad chunked = RunLoss(logits, targets, 15, "mean", n / 3 + 1, true, {});
  EXPECT_EQ(chunked.loss.scalar_type(), torch::kFloat);
  EXPECT_EQ(chunked.grad.scalar_type(), torch::kBFloat16);
  EXPECT_LE(RelativeError(chunked.loss, plain.loss), 1e-5);
  EXPECT_LE(RelativeError(chunked.grad.to(torch::kFloat), plain.grad.to(torch::kFloat)), 1e-2);
}

// The fused CUDA kernels against the composite (CUDA builds on a GPU; skipped elsewhere): every
// logits dtype, every reduction, with and without soft-cap, a vocabulary that takes the 16-byte
// vector path (8192) and one that does not (8190), out-of-range-free targets with ignored rows.
TEST(SoftcapCrossEntropyTest, FusedKernelsMatchTheCompositeOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  auto probe = torch::zeros({1, 8}, torch::TensorOptions().device(torch::kCUDA));
  if (!FusedCrossEntropyUsable(probe)) GTEST_SKIP() << "this build has no fused CUDA kernels";
  torch::manual_seed(4);
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  for (int64_t vocab : {int64_t{8192}, int64_t{8190}}) {
    const int64_t n = 1000;
    torch::Tensor targets = Targets(n, vocab, opts);
    torch::Tensor base = torch::randn({n, vocab}, opts) * 10;
    for (auto dtype : {torch::kFloat, torch::kBFloat16, torch::kHalf}) {
      torch::Tensor logits = base.to(dtype);
      torch::Tensor grad_none = torch::randn({n}, opts);
      const double tol = dtype == torch::kFloat ? 1e-5 : 1e-2;
      for (double softcap : {15.0, 0.0}) {
        for (const char* reduction : {"mean", "sum", "none"}) {
          SCOPED_TRACE(std::to_string(vocab) + " " + c10::toString(dtype) + " softcap " +
                       std::to_string(softcap) + " " + reduction);
          LossAndGrad composite =
              RunLoss(logits, targets, softcap, reduction, 300, true, grad_none, false);
          LossAndGrad fused = RunLoss(logits, targets, softcap, reduction, 0, true, grad_none);
          EXPECT_EQ(fused.loss.scalar_type(), composite.loss.scalar_type());
          EXPECT_LE(RelativeError(fused.loss, composite.loss), 1e-5);
          ASSERT_EQ(fused.grad.scalar_type(), dtype);
          EXPECT_LE(RelativeError(fused.grad.to(torch::kFloat), composite.grad.to(torch::kFloat)),
                    tol);
        }
      }
    }
  }
}

TEST(GptCastEmbeddingsTest, EmbeddingsBecomeBf16AndTheModelStillTrains) {
  GPTConfig cfg;
  cfg.sequence_len = 16;
  cfg.vocab_size = 64;
  cfg.n_layer = 2;
  cfg.n_head = 2;
  cfg.n_kv_head = 2;
  cfg.n_embd = 32;
  cfg.attention_backend = "math";
  torch::manual_seed(3);
  GPT model(cfg);
  model->InitWeights();
  model->CastEmbeddings(torch::kBFloat16);
  EXPECT_EQ(model->wte_weight().scalar_type(), torch::kBFloat16);
  for (auto& [name, w] : model->ValueEmbedParameters())
    EXPECT_EQ(w.scalar_type(), torch::kBFloat16) << name;
  EXPECT_EQ(model->lm_head_weight().scalar_type(), torch::kFloat);
  // The optimizer sees the same tensors (CastEmbeddings keeps the parameter objects).
  bool found = false;
  for (auto& [name, p] : model->NamedParameters()) {
    if (name == "transformer.wte.weight") {
      found = p.is_same(model->wte_weight());
      EXPECT_EQ(p.scalar_type(), torch::kBFloat16);
    }
  }
  EXPECT_TRUE(found);
  // A training step under bf16 autocast (GPU only: xv-train runs fp32 on the CPU).
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device for the bf16 autocast step";
  model->to(torch::kCUDA);
  torch::Tensor idx = torch::randint(
      cfg.vocab_size, {2, 16}, torch::TensorOptions().device(torch::kCUDA).dtype(torch::kLong));
  torch::Tensor loss;
  {
    AutocastScope autocast(torch::kCUDA, torch::kBFloat16);
    loss = model->forward(idx, idx.roll(-1, 1));
  }
  EXPECT_TRUE(std::isfinite(loss.item<float>()));
  loss.backward();
  EXPECT_EQ(model->wte_weight().grad().scalar_type(), torch::kBFloat16);
  EXPECT_EQ(model->lm_head_weight().grad().scalar_type(), torch::kFloat);
}

}  // namespace
}  // namespace xv::trainer
