// The `prepare` module of autoresearch forks (python/xv_autoresearch/prepare.py) against xv-train
// on one data directory written here through the tokenizer library (3 train shards and the val
// shard, documents of 1 to 150 tokens and some empty ones, so packing crops, crosses shards and
// starts new epochs):
//  - make_dataloader's rows and epochs equal xv-train's loader (DataDir::OpenLoader: the best-fit
//    packer behind its prefetch thread) for both splits, with upstream's buffer of 1000 and a small
//    one;
//  - evaluate_bpb equals xv-train's EvaluateBpbOfLoss on the same model outputs: a bigram model
//    whose logits are rows of a float64 table this test writes, evaluated on the val split as
//    xv-train evaluates (TrainingData::OpenBatches, EvalSteps);
//  - its metric version is xv-train's, its constants come from the XV_* variables, and its
//    Tokenizer reads the directory's vocabulary, BOS and ranks.
// Runs /usr/bin/python3 (Debian's, whatever python3 is first on PATH) with PYTHONPATH =
// python/xv_autoresearch (as xv-worker runs a fork); needs Debian's python3-torch and python3-numpy
// (deploy/install-deps.sh).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <torch/torch.h>
#include <nlohmann/json.hpp>

#include "tokenizer/tiktoken_metadata.h"
#include "tokenizer/tiktoken_ranks.h"
#include "tokenizer/token_shard_writer.h"
#include "trainer/data/data_dir.h"
#include "trainer/eval/bpb_evaluator.h"
#include "trainer/train/training_data.h"
#include "worker/autoresearch_source.h"

namespace xv {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr int kRanks = 300;
constexpr int kVocab = kRanks + 4;  // + <|reserved_0..3|>, BOS = 300

std::string SourceDir() {
  const char* s = std::getenv("XV_SOURCE_DIR");
  return s ? s : ".";
}

// Documents [BOS, ids...] of 0 to 150 ids; every 17th is empty (no BOS either: skipped by both).
std::vector<std::vector<int32_t>> MakeDocuments(int count, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::vector<int32_t>> docs;
  for (int d = 0; d < count; ++d) {
    if (d % 17 == 5) {
      docs.push_back({});
      continue;
    }
    std::vector<int32_t> doc = {kRanks};
    const int len = static_cast<int>(rng() % 150);
    for (int i = 0; i < len; ++i) doc.push_back(static_cast<int32_t>(rng() % kRanks));
    docs.push_back(doc);
  }
  return docs;
}

class PrepareParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("xv_prepare_parity_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    data_ = dir_ / "data";
    fs::create_directories(data_ / "tokenizer");
    fs::create_directories(data_ / "shards");
    tok::TokenizerMeta meta;
    meta.pattern = R"('s|\w+| ?[^\s\w]+|\s+)";
    meta.specials = {"<|reserved_0|>", "<|reserved_1|>", "<|reserved_2|>", "<|reserved_3|>"};
    meta.bos = "<|reserved_0|>";
    meta.n_ranks = kRanks;
    meta.vocab_size = kVocab;
    meta.bos_id = kRanks;
    ASSERT_TRUE(tok::WriteTokenizerMeta((data_ / "tokenizer/tokenizer.json").string(), meta).ok());
    // Ranks: the 256 bytes, then 44 two-byte tokens; raw byte lengths 1, 2 and 0 for specials.
    tok::TokenRanks ranks;
    for (int b = 0; b < 256; ++b) ranks.push_back(std::string(1, static_cast<char>(b)));
    for (int r = 256; r < kRanks; ++r)
      ranks.push_back(std::string("a") + static_cast<char>(r - 200));
    ASSERT_TRUE(tok::WriteTiktokenRanks((data_ / "tokenizer/ranks.tiktoken").string(), ranks).ok());
    std::vector<int32_t> bytes(kVocab, 0);
    for (int r = 0; r < kRanks; ++r) bytes[r] = static_cast<int32_t>(ranks[r].size());
    ASSERT_TRUE(tok::WriteTokenBytes((data_ / "tokenizer/token_bytes.json").string(), bytes).ok());
    token_bytes_ = bytes;
    for (int s = 0; s < 3; ++s) {
      char name[32];
      std::snprintf(name, sizeof name, "shards/train-%05d.xvt", s);
      ASSERT_TRUE(
          tok::WriteTokenShard((data_ / name).string(), kVocab, MakeDocuments(300 + 50 * s, s + 1))
              .ok());
    }
    ASSERT_TRUE(tok::WriteTokenShard((data_ / "shards/val-00000.xvt").string(), kVocab,
                                     MakeDocuments(120, 99))
                    .ok());
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // Runs prepare_parity.py with `args` and the XV_* variables `env` ("NAME=value ..."); parses
  // its stdout as JSON (null on failure, with the output added to the test's failure).
  json RunPython(const std::string& args, const std::string& env = "") {
    const std::string out = (dir_ / "python.out").string(), err = (dir_ / "python.err").string();
    const std::string cmd =
        "env PYTHONPATH=" + SourceDir() + "/python/xv_autoresearch XV_DATA_DIR=" + data_.string() +
        " " + env + " /usr/bin/python3 " + SourceDir() + "/tests/unit/python/prepare_parity.py " +
        args + " >" + out + " 2>" + err;
    const int rc = std::system(cmd.c_str());
    std::ifstream o(out), e(err);
    std::string out_text((std::istreambuf_iterator<char>(o)), {});
    std::string err_text((std::istreambuf_iterator<char>(e)), {});
    EXPECT_EQ(rc, 0) << cmd << "\n" << err_text;
    json j = json::parse(out_text, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << cmd << "\nstdout: " << out_text.substr(0, 2000) << "\n"
                                   << err_text;
    return j.is_discarded() ? json() : j;
  }

  // xv-train's rows and epochs for the same arguments, through the prefetching loader.
  void LoaderRows(data::Split split, int64_t b, int64_t t, int batches, int64_t buffer_size,
                  std::vector<std::vector<int32_t>>* rows, std::vector<int64_t>* epochs) {
    std::unique_ptr<data::DataDir> dir;
    ASSERT_TRUE(data::DataDir::Open(data_.string(), &dir).ok());
    data::BestFitPackerOptions options;
    options.batch_size = b;
    options.seq_len = t;
    options.buffer_size = buffer_size;
    std::unique_ptr<data::PrefetchingBatchLoader> loader;
    Status st = dir->OpenLoader(split, options, /*queue_depth=*/2, &loader);
    ASSERT_TRUE(st.ok()) << st.message();
    data::PackedBatch batch;
    for (int i = 0; i < batches; ++i) {
      st = loader->Next(&batch);
      ASSERT_TRUE(st.ok()) << st.message();
      for (int64_t r = 0; r < b; ++r) {
        rows->emplace_back(batch.tokens.begin() + r * (t + 1),
                           batch.tokens.begin() + (r + 1) * (t + 1));
      }
      epochs->push_back(batch.epoch);
    }
  }

  void ExpectSameRows(data::Split split, int64_t b, int64_t t, int batches, int64_t buffer_size) {
    SCOPED_TRACE(std::string(data::SplitName(split)) + " B=" + std::to_string(b) +
                 " T=" + std::to_string(t) + " buffer " + std::to_string(buffer_size));
    std::vector<std::vector<int32_t>> rows;
    std::vector<int64_t> epochs;
    LoaderRows(split, b, t, batches, buffer_size, &rows, &epochs);
    json py = RunPython("rows " + std::string(data::SplitName(split)) + " " + std::to_string(b) +
                        " " + std::to_string(t) + " " + std::to_string(batches) + " " +
                        std::to_string(buffer_size));
    ASSERT_TRUE(py.is_object());
    ASSERT_EQ(py["rows"].size(), rows.size());
    for (size_t r = 0; r < rows.size(); ++r) {
      ASSERT_EQ(py["rows"][r].get<std::vector<int32_t>>(), rows[r]) << "row " << r;
      EXPECT_EQ(rows[r][0], kRanks) << "row " << r << " does not start with BOS";
    }
    EXPECT_EQ(py["epochs"].get<std::vector<int64_t>>(), epochs);
  }

  fs::path dir_, data_;
  std::vector<int32_t> token_bytes_;
};

TEST_F(PrepareParityTest, RowsEqualXvTrainLoaderRows) {
  // 24 batches of 4 x 65 tokens run through every train document twice (epochs 1 to 3): crops,
  // shard boundaries and the cycle are all covered.
  ExpectSameRows(data::Split::kTrain, 4, 64, 24, 1000);
  ExpectSameRows(data::Split::kTrain, 3, 32, 30, 16);
  ExpectSameRows(data::Split::kVal, 2, 128, 12, 1000);
}

TEST_F(PrepareParityTest, EvaluateBpbEqualsXvTrainOnTheSameModelOutputs) {
  // The model: logits[x] = table[x], a fixed float64 table (written for Python, used here).
  torch::manual_seed(7);
  torch::Tensor table = torch::randn({kVocab, kVocab}, torch::kDouble) * 2.0;
  const std::string table_path = (dir_ / "table.f64").string();
  {
    std::ofstream f(table_path, std::ios::binary);
    f.write(static_cast<const char*>(table.data_ptr()), table.numel() * sizeof(double));
    ASSERT_TRUE(f.good());
  }
  const int64_t batch = 3, seq = 48, eval_tokens = 3 * 48 * 7 + 5;  // 7 eval batches
  std::unique_ptr<trainer::TrainingData> data;
  ASSERT_TRUE(trainer::TrainingData::Open(data_.string(), &data).ok());
  std::unique_ptr<trainer::BatchSource> val;
  ASSERT_TRUE(data->OpenBatches("val", batch, seq, &val).ok());
  trainer::BpbResult xv;
  Status st = trainer::EvaluateBpbOfLoss(
      [&](const torch::Tensor& x, const torch::Tensor& y) {
        return torch::nn::functional::cross_entropy(
            table.index({x}).view({-1, kVocab}), y.view(-1),
            torch::nn::functional::CrossEntropyFuncOptions().reduction(torch::kNone));
      },
      val.get(), data->token_bytes(), trainer::EvalSteps(eval_tokens, batch, seq),
      torch::Device(torch::kCPU), &xv);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(xv.tokens, 7 * batch * seq);

  // Python trains at MAX_SEQ_LEN 2048 (train_sequence_len, not the eval's) and evaluates at the
  // pinned sequence_len.
  json py =
      RunPython("bpb " + table_path + " " + std::to_string(kVocab) + " " + std::to_string(batch),
                "XV_TRAIN_SEQUENCE_LEN=2048 XV_SEQUENCE_LEN=" + std::to_string(seq) +
                    " XV_EVAL_TOKENS=" + std::to_string(eval_tokens));
  ASSERT_TRUE(py.is_object());
  const double fork = py["val_bpb"].get<double>();
  EXPECT_NEAR(fork, xv.val_bpb, 1e-12 * xv.val_bpb) << "fork " << fork << " xv " << xv.val_bpb;
  EXPECT_GT(xv.val_bpb, 1.0);  // random logits over 304 ids: several bits per byte

  // A different pinned eval length is a different quantity (the check can fail).
  json other =
      RunPython("bpb " + table_path + " " + std::to_string(kVocab) + " " + std::to_string(batch),
                "XV_SEQUENCE_LEN=40 XV_EVAL_TOKENS=" + std::to_string(eval_tokens));
  ASSERT_TRUE(other.is_object());
  EXPECT_NE(other["val_bpb"].get<double>(), xv.val_bpb);
}

TEST_F(PrepareParityTest, ConstantsTokenizerAndMetricVersionFollowXv) {
  json meta = RunPython("meta", "XV_SEQUENCE_LEN=256 XV_TIME_BUDGET_S=8 XV_EVAL_TOKENS=16384");
  ASSERT_TRUE(meta.is_object());
  EXPECT_EQ(meta["metric_version"], trainer::kBpbMetricVersion);
  // The worker stamps an autoresearch trainer's summary with the same version.
  EXPECT_EQ(std::string(worker::kPrepareModuleMetricVersion), trainer::kBpbMetricVersion);
  EXPECT_EQ(meta["vocab_size"], kVocab);
  EXPECT_EQ(meta["bos_id"], kRanks);
  EXPECT_EQ(meta["max_seq_len"], 256);
  EXPECT_EQ(meta["time_budget"], 8);
  EXPECT_EQ(meta["eval_tokens"], 16384);
  EXPECT_EQ(meta["eval_seq_len"], 256);  // sequence_len; training at it too (no train length)
  // train_sequence_len: MAX_SEQ_LEN (the fork's training length), the evaluation's unchanged;
  // 0 means sequence_len.
  json train = RunPython("meta", "XV_SEQUENCE_LEN=256 XV_TRAIN_SEQUENCE_LEN=128");
  ASSERT_TRUE(train.is_object());
  EXPECT_EQ(train["max_seq_len"], 128);
  EXPECT_EQ(train["eval_seq_len"], 256);
  json zero = RunPython("meta", "XV_SEQUENCE_LEN=256 XV_TRAIN_SEQUENCE_LEN=0");
  ASSERT_TRUE(zero.is_object());
  EXPECT_EQ(zero["max_seq_len"], 256);
  int64_t sum = 0;
  for (int32_t b : token_bytes_) sum += b;
  EXPECT_EQ(meta["token_bytes_sum"], sum);
  EXPECT_EQ(meta["decoded"], "hi!");
  // Upstream's values when the worker sets nothing.
  json defaults = RunPython("meta");
  ASSERT_TRUE(defaults.is_object());
  EXPECT_EQ(defaults["max_seq_len"], 2048);
  EXPECT_EQ(defaults["time_budget"], 300);
  EXPECT_EQ(defaults["eval_tokens"], 40 * 524288);
}

}  // namespace
}  // namespace xv
