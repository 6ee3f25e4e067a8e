// xv-train end to end on the CPU: a tiny data directory (tokenizer metadata + shards written
// through the tokenizer library), a tiny recipe with a 3 s budget, and the real binary as a child
// process. Checks the event stream (docs/events.md) and the exit codes, including the `nan` event
// of a diverging run and of a non-finite parameter.
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tokenizer/tiktoken_metadata.h"
#include "tokenizer/token_shard_writer.h"

namespace fs = std::filesystem;

namespace {

constexpr int kRanks = 256;
constexpr int kVocab = kRanks + 4;  // + <|reserved_0..3|>, BOS = 256

// Documents of a toy language: BOS, then a deterministic walk with a little noise, so a model can
// learn it and val_bpb falls.
std::vector<std::vector<int32_t>> MakeDocuments(int count, uint32_t seed) {
  std::vector<std::vector<int32_t>> docs;
  uint32_t state = seed;
  for (int d = 0; d < count; ++d) {
    std::vector<int32_t> doc = {kRanks};
    state = state * 1664525u + 1013904223u;
    int len = 20 + static_cast<int>((state >> 16) % 100);
    int32_t tok = static_cast<int32_t>((state >> 8) % kRanks);
    for (int i = 0; i < len; ++i) {
      state = state * 1664525u + 1013904223u;
      tok = ((state >> 24) % 8 == 0) ? static_cast<int32_t>((state >> 8) % kRanks)
                                     : (tok * 7 + 3) % kRanks;
      doc.push_back(tok);
    }
    docs.push_back(doc);
  }
  return docs;
}

class TrainerRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* bin = std::getenv("XV_BINARY_DIR");
    ASSERT_NE(bin, nullptr) << "XV_BINARY_DIR not set (run through ctest)";
    trainer_ = std::string(bin) + "/bin/xv-train";
    ASSERT_TRUE(fs::exists(trainer_)) << trainer_;
    dir_ = fs::temp_directory_path() / ("xv_trainer_run_" + std::to_string(getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data" / "tokenizer");
    fs::create_directories(dir_ / "data" / "shards");
    xv::tok::TokenizerMeta meta;
    meta.pattern = R"('s|\w+| ?[^\s\w]+|\s+)";
    meta.specials = {"<|reserved_0|>", "<|reserved_1|>", "<|reserved_2|>", "<|reserved_3|>"};
    meta.bos = "<|reserved_0|>";
    meta.n_ranks = kRanks;
    meta.vocab_size = kVocab;
    meta.bos_id = kRanks;
    auto data = dir_ / "data";
    ASSERT_TRUE(
        xv::tok::WriteTokenizerMeta((data / "tokenizer/tokenizer.json").string(), meta).ok());
    std::vector<int32_t> bytes(kVocab, 1);
    for (int i = kRanks; i < kVocab; ++i) bytes[i] = 0;
    ASSERT_TRUE(
        xv::tok::WriteTokenBytes((data / "tokenizer/token_bytes.json").string(), bytes).ok());
    ASSERT_TRUE(xv::tok::WriteTokenShard((data / "shards/train-00000.xvt").string(), kVocab,
                                         MakeDocuments(2000, 1))
                    .ok());
    ASSERT_TRUE(xv::tok::WriteTokenShard((data / "shards/val-00000.xvt").string(), kVocab,
                                         MakeDocuments(200, 777))
                    .ok());
    std::ofstream(dir_ / "tiny.yaml") << "depth: 2\n"
                                         "aspect_ratio: 32\n"
                                         "head_dim: 32\n"
                                         "window_pattern: SL\n"
                                         "vocab_size: 260\n"
                                         "sequence_len: 64\n"
                                         "device_batch_size: 4\n"
                                         "total_batch_size: 512\n"
                                         "dtype: float32\n"
                                         "time_budget_s: 3\n"
                                         "eval_tokens: 1024\n"
                                         "attention_backend: math\n"
                                         "device: cpu\n"
                                         "threads: 2\n";
  }
  void TearDown() override { fs::remove_all(dir_); }

  struct Run {
    int exit_code = -1;
    double seconds = 0;
    std::vector<nlohmann::json> events;
    std::string log;
  };

  Run RunTrainer(const std::string& extra_args) {
    Run r;
    std::string events = (dir_ / "events.jsonl").string(), log = (dir_ / "stderr.txt").string();
    std::string cmd = trainer_ + " --recipe " + (dir_ / "tiny.yaml").string() + " --data " +
                      (dir_ / "data").string() + " " + extra_args + " > " + events + " 2> " + log;
    auto t0 = std::chrono::steady_clock::now();
    int status = std::system(cmd.c_str());
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    std::ifstream ev(events);
    std::string line;
    while (std::getline(ev, line)) {
      if (line.empty()) continue;
      r.events.push_back(nlohmann::json::parse(line));  // every stdout line is one JSON object
    }
    std::ifstream lg(log);
    r.log.assign(std::istreambuf_iterator<char>(lg), {});
    return r;
  }

  static std::vector<nlohmann::json> OfType(const Run& r, const std::string& type) {
    std::vector<nlohmann::json> out;
    for (const auto& e : r.events)
      if (e.value("type", "") == type) out.push_back(e);
    return out;
  }

  std::string trainer_;
  fs::path dir_;
};

// The JSON header of a safetensors file (8-byte little-endian length, then JSON).
nlohmann::json SafetensorsHeader(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  uint64_t len = 0;
  in.read(reinterpret_cast<char*>(&len), 8);
  std::string text(len, '\0');
  in.read(text.data(), static_cast<std::streamsize>(len));
  return nlohmann::json::parse(text);
}

TEST_F(TrainerRunTest, TinyRecipeTrainsEvaluatesAndSummarises) {
  Run r = RunTrainer("--save " + (dir_ / "final.safetensors").string());
  ASSERT_EQ(r.exit_code, 0) << r.log;
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.front()["type"], "start");
  EXPECT_EQ(r.events.back()["type"], "summary");
  const auto start = r.events.front();
  EXPECT_EQ(start["config"]["depth"], 2);
  EXPECT_EQ(start["config"]["derived"]["model_dim"], 64);
  EXPECT_EQ(start["config"]["derived"]["grad_accum_steps"], 2);
  EXPECT_EQ(start["config_hash"].get<std::string>().size(), 64u);
  EXPECT_EQ(start["device"]["backend"], "cpu");
  EXPECT_EQ(start["attention_backend"], "math");
  EXPECT_TRUE(start["windows_honoured"].get<bool>());
  EXPECT_FALSE(start["metric_version"].get<std::string>().empty());

  auto steps = OfType(r, "step");
  ASSERT_GE(steps.size(), 2u);
  const auto& last = steps.back();
  for (const auto& s : steps) {
    EXPECT_TRUE(s["loss"].is_number()) << s;
    EXPECT_TRUE(s["mfu_percent"].is_null()) << "CPU peak is unknown: " << s;
  }
  // Throttled: a few per second at most (plus the first and last).
  EXPECT_LE(static_cast<double>(steps.size()), 2 + 4.5 * r.seconds);
  EXPECT_LT(last["loss"].get<double>(), steps.front()["loss"].get<double>());

  auto evals = OfType(r, "eval");
  ASSERT_EQ(evals.size(), 1u);
  EXPECT_EQ(evals[0]["eval_tokens"], 1024);

  const auto& summary = r.events.back();
  ASSERT_TRUE(summary["val_bpb"].is_number()) << summary;
  const double bpb = summary["val_bpb"].get<double>();
  EXPECT_TRUE(std::isfinite(bpb));
  // Untrained: ln(260)/ln(2) = 8.02 bits per (1-byte) token; a few seconds of training must beat
  // it.
  EXPECT_LT(bpb, std::log2(260.0));
  EXPECT_GT(bpb, 0.0);
  EXPECT_DOUBLE_EQ(bpb, evals[0]["val_bpb"].get<double>());
  const int64_t num_steps = summary["num_steps"];
  EXPECT_EQ(num_steps, last["step"].get<int64_t>() + 1);
  EXPECT_GE(num_steps, 12);  // past the 11 untimed steps
  EXPECT_GE(summary["training_seconds"].get<double>(), 3.0);
  EXPECT_LT(summary["training_seconds"].get<double>(), 10.0);
  EXPECT_EQ(summary["total_tokens"], num_steps * 512);
  EXPECT_EQ(summary["depth"], 2);
  EXPECT_TRUE(summary["mfu_percent"].is_null());
  EXPECT_TRUE(summary["peak_flops"].is_null());
  EXPECT_EQ(summary["memory_kind"], "host_rss");
  EXPECT_GT(summary["peak_vram_mb"].get<double>(), 1.0);
  EXPECT_GT(summary["tok_per_sec"].get<double>(), 0.0);
  EXPECT_GT(summary["num_params"].get<int64_t>(), 0);
  // --save: upstream state-dict names, fp32 weights.
  auto header = SafetensorsHeader(dir_ / "final.safetensors");
  ASSERT_TRUE(header.contains("transformer.wte.weight")) << header.dump();
  EXPECT_EQ(header["transformer.wte.weight"]["shape"], nlohmann::json({260, 64}));
  EXPECT_TRUE(header.contains("transformer.h.1.attn.c_q.weight"));
  EXPECT_TRUE(header.contains("lm_head.weight"));
  EXPECT_TRUE(header.contains("resid_lambdas"));
  EXPECT_TRUE(header.contains("value_embeds.1.weight"));
  // Upstream's summary block on stderr.
  EXPECT_NE(r.log.find("---\nval_bpb:"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("num_steps:"), std::string::npos);
}

// train_sequence_len: training rows of another length, evaluation rows of sequence_len (64) all
// the same. eval_tokens 1000 makes the lengths distinguishable: 1000 // (4 x 64) = 3 batches of
// 4 x 64 = 768 target tokens at the evaluation's 64, where rows of 4 would give 62 x 4 x 4 = 992
// and rows of 128 would give 1 x 4 x 128 = 512. Training at 4 also needs the rotary table to
// cover the evaluation's 64 positions (upstream sizes it 10 x the training length: 40).
TEST_F(TrainerRunTest, TrainsAtTrainSequenceLenAndEvaluatesAtSequenceLen) {
  struct Case {
    int train_len;
    int grad_accum;
    nlohmann::json windows;  // SL: S = T / 2, L = T, from the training length
  };
  for (const Case& c : {Case{4, 32, {{2, 0}, {4, 0}}}, Case{128, 1, {{64, 0}, {128, 0}}}}) {
    SCOPED_TRACE("train_sequence_len=" + std::to_string(c.train_len));
    Run r = RunTrainer("--set time_budget_s=0.5 --set eval_tokens=1000 --set train_sequence_len=" +
                       std::to_string(c.train_len));
    ASSERT_EQ(r.exit_code, 0) << r.log;
    const auto start = r.events.front();
    ASSERT_EQ(start["type"], "start");
    EXPECT_EQ(start["config"]["sequence_len"], 64);
    EXPECT_EQ(start["config"]["train_sequence_len"], c.train_len);
    const auto& derived = start["config"]["derived"];
    EXPECT_EQ(derived["tokens_per_micro_step"], 4 * c.train_len);  // 4 rows of train_len
    EXPECT_EQ(derived["grad_accum_steps"], c.grad_accum);
    EXPECT_EQ(derived["window_sizes"], c.windows);
    auto evals = OfType(r, "eval");
    ASSERT_EQ(evals.size(), 1u) << r.log;
    EXPECT_EQ(evals[0]["eval_tokens"], 3 * 4 * 64);  // the evaluation's rows, not train_len's
    const auto& summary = r.events.back();
    ASSERT_EQ(summary["type"], "summary") << summary;
    EXPECT_TRUE(std::isfinite(summary["val_bpb"].get<double>())) << summary;
    EXPECT_EQ(summary["total_tokens"], summary["num_steps"].get<int64_t>() * 512);
  }
}

TEST_F(TrainerRunTest, HugeLearningRatesEndWithNanEventAndExit3) {
  Run r = RunTrainer(
      "--set time_budget_s=120 --set matrix_lr=1e6 --set embedding_lr=1e6 "
      "--set unembedding_lr=1e6 --set scalar_lr=1e6");
  ASSERT_EQ(r.exit_code, 3) << r.log;
  auto nans = OfType(r, "nan");
  ASSERT_EQ(nans.size(), 1u) << r.log;
  EXPECT_LT(nans[0]["step"].get<int64_t>(), 20);
  // Whichever goes non-finite first: with every lr at 1e6 the gradients overflow a step before
  // the loss does (grad_norm), but the rule may see the loss or a parameter first on another
  // LibTorch. A loss names its micro-step; the others have none.
  const std::string what = nans[0]["what"];
  EXPECT_TRUE(what == "loss" || what == "grad_norm" || what == "parameter") << nans[0];
  if (what == "loss") {
    EXPECT_GE(nans[0]["micro_step"].get<int64_t>(), 0);
  } else {
    EXPECT_TRUE(nans[0]["micro_step"].is_null()) << nans[0];
  }
  EXPECT_TRUE(nans[0]["value"].is_string());
  std::printf("huge lrs: nan event %s\n", nans[0].dump().c_str());
  EXPECT_EQ(r.events.back()["type"], "error");
  EXPECT_EQ(r.events.back()["kind"], "diverged");
  EXPECT_TRUE(OfType(r, "summary").empty());
  EXPECT_LT(r.seconds, 60.0);  // long before the 120 s budget
}

// A parameter that is non-finite while the loss and the gradients stay finite: an inf in the row of
// token 257 (a reserved special the data never holds) of the token embedding, loaded with
// --init-from. The check after step 0's optimizer step names the tensor; exit code 3.
TEST_F(TrainerRunTest, NonFiniteParameterEndsWithNanEventNamingItAndExit3) {
  const fs::path base = dir_ / "base.safetensors", bad = dir_ / "inf_row.safetensors";
  Run saved = RunTrainer("--set time_budget_s=0.01 --set eval_tokens=256 --save " + base.string());
  ASSERT_EQ(saved.exit_code, 0) << saved.log;
  fs::copy_file(base, bad);
  const nlohmann::json header = SafetensorsHeader(bad);
  const auto& wte = header.at("transformer.wte.weight");
  ASSERT_EQ(wte["dtype"], "F32");
  ASSERT_EQ(wte["shape"], nlohmann::json({kVocab, 64}));
  std::ifstream in(bad, std::ios::binary);
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  in.close();
  const uint64_t offset = 8 + header_len + wte["data_offsets"][0].get<uint64_t>() + 257 * 64 * 4;
  {
    std::fstream out(bad, std::ios::binary | std::ios::in | std::ios::out);
    out.seekp(static_cast<std::streamoff>(offset));
    const float inf = std::numeric_limits<float>::infinity();
    out.write(reinterpret_cast<const char*>(&inf), sizeof(inf));
  }

  Run r = RunTrainer("--init-from " + bad.string());
  ASSERT_EQ(r.exit_code, 3) << r.log;
  auto nans = OfType(r, "nan");
  ASSERT_EQ(nans.size(), 1u) << r.log;
  EXPECT_EQ(nans[0]["step"], 0);
  EXPECT_EQ(nans[0]["what"], "parameter");
  EXPECT_EQ(nans[0]["parameter"], "transformer.wte.weight");
  EXPECT_EQ(nans[0]["value"], "inf");
  EXPECT_TRUE(nans[0]["micro_step"].is_null()) << nans[0];
  EXPECT_TRUE(OfType(r, "step").empty());  // ended in its first step
  EXPECT_EQ(r.events.back()["type"], "error");
  EXPECT_EQ(r.events.back()["kind"], "diverged");
  EXPECT_NE(r.events.back()["message"].get<std::string>().find("transformer.wte.weight"),
            std::string::npos)
      << r.events.back();
  EXPECT_TRUE(OfType(r, "summary").empty());
}

TEST_F(TrainerRunTest, BadOverrideIsInvalidConfigNamingTheField) {
  Run r = RunTrainer("--set matrix_lr=-1");
  EXPECT_EQ(r.exit_code, 2) << r.log;
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back()["type"], "error");
  EXPECT_EQ(r.events.back()["kind"], "invalid_config");
  EXPECT_NE(r.events.back()["message"].get<std::string>().find("matrix_lr"), std::string::npos);
}

TEST_F(TrainerRunTest, VocabMismatchIsDataError) {
  Run r = RunTrainer("--set vocab_size=300");
  EXPECT_EQ(r.exit_code, 5) << r.log;
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back()["kind"], "data_error");
  EXPECT_NE(r.events.back()["message"].get<std::string>().find("vocab_size"), std::string::npos);
}

TEST_F(TrainerRunTest, UnreadableInitCheckpointIsDataErrorNamingTheFlag) {
  std::ofstream(dir_ / "bad.safetensors") << "not a safetensors file";
  Run r = RunTrainer("--init-from " + (dir_ / "bad.safetensors").string());
  EXPECT_EQ(r.exit_code, 5) << r.log;
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back()["kind"], "data_error");
  EXPECT_NE(r.events.back()["message"].get<std::string>().find("--init-from"), std::string::npos);
  EXPECT_TRUE(OfType(r, "start").empty());
}

TEST_F(TrainerRunTest, MissingDataDirectoryIsDataError) {
  fs::remove_all(dir_ / "data" / "shards");
  Run r = RunTrainer("");
  EXPECT_EQ(r.exit_code, 5) << r.log;
  ASSERT_FALSE(r.events.empty());
  EXPECT_EQ(r.events.back()["kind"], "data_error");
}

}  // namespace
