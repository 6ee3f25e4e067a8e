// evaluate_bpb semantics: with a zero lm_head every logit is 0, so every target costs ln(V) nats
// and val_bpb = (#targets with byte length > 0) * ln(V) / (ln 2 * sum of target byte lengths);
// specials (0 bytes) and ignored targets count in neither sum.
#include "trainer/eval/bpb_evaluator.h"

#include <gtest/gtest.h>

#include <cmath>

namespace xv::trainer {
namespace {

class FixedBatches : public BatchSource {
 public:
  explicit FixedBatches(std::vector<TokenBatch> batches) : batches_(std::move(batches)) {}
  Status Next(TokenBatch* out) override {
    if (next_ >= batches_.size()) return Status::DataLoss("fixture: out of batches");
    *out = batches_[next_++];
    return Status::Ok();
  }
  size_t served() const { return next_; }

 private:
  std::vector<TokenBatch> batches_;
  size_t next_ = 0;
};

GPT TinyModelWithZeroHead(int64_t vocab) {
  GPTConfig cfg;
  cfg.vocab_size = vocab;
  cfg.sequence_len = 8;
  cfg.n_layer = 2;
  cfg.n_head = 1;
  cfg.n_kv_head = 1;
  cfg.n_embd = 32;
  cfg.window_pattern = "SL";
  torch::manual_seed(0);
  GPT model(cfg);
  model->InitWeights();
  torch::NoGradGuard g;
  model->lm_head_weight().zero_();
  return model;
}

TEST(EvaluateBpb, UniformModelGivesLnVOverLn2PerByteOfRealTokens) {
  const int64_t vocab = 16;
  GPT model = TinyModelWithZeroHead(vocab);
  // ids 0..11 have 1..3 bytes, 12..15 are specials (0 bytes).
  std::vector<int32_t> token_bytes(vocab);
  for (int i = 0; i < vocab; ++i) token_bytes[i] = i < 12 ? 1 + i % 3 : 0;
  std::vector<TokenBatch> batches;
  int64_t counted = 0, bytes = 0;
  for (int b = 0; b < 2; ++b) {
    TokenBatch batch;
    batch.rows = 2;
    batch.cols = 9;  // T + 1
    for (int r = 0; r < 2; ++r) {
      for (int c = 0; c < 9; ++c) {
        int32_t id = c == 0 ? 12 : (r * 5 + c * 3 + b * 7) % vocab;
        batch.tokens.push_back(id);
        if (c > 0) {  // targets are row[1:]
          bytes += token_bytes[id];
          counted += token_bytes[id] > 0;
        }
      }
    }
    batches.push_back(batch);
  }
  ASSERT_GT(counted, 0);
  ASSERT_LT(counted, 32);  // some specials among the targets
  FixedBatches source(batches);
  BpbResult r;
  Status s =
      EvaluateBpb(model, &source, token_bytes, 2, torch::Device(torch::kCPU), torch::kFloat, &r);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(source.served(), 2u);
  EXPECT_EQ(r.tokens, 32);
  EXPECT_EQ(r.total_bytes, bytes);
  const double expected = counted * std::log(16.0) / (std::log(2.0) * bytes);
  EXPECT_NEAR(r.val_bpb, expected, 1e-6 * expected);
}

TEST(EvaluateBpb, TargetOutsideVocabularyIsAnError) {
  GPT model = TinyModelWithZeroHead(16);
  std::vector<int32_t> token_bytes(16, 1);
  TokenBatch batch;
  batch.rows = 1;
  batch.cols = 9;
  batch.tokens = {0, 1, 2, 3, 4, 5, 6, 7, 8};
  // Only the bytes table is checked here: a table shorter than the model's vocabulary.
  std::vector<int32_t> short_table(8, 1);
  FixedBatches source({batch});
  BpbResult r;
  Status s =
      EvaluateBpb(model, &source, short_table, 1, torch::Device(torch::kCPU), torch::kFloat, &r);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("outside the vocabulary"), std::string::npos) << s.message();
}

TEST(EvalSteps, UpstreamIntegerDivisionAtLeastOne) {
  EXPECT_EQ(EvalSteps(40 * 524288, 128, 2048), 80);
  EXPECT_EQ(EvalSteps(100, 4, 64), 1);
}

}  // namespace
}  // namespace xv::trainer
