// Hostile input for the parsers that take text or bytes from outside: recipe YAML, trainer stdout
// (xv events and upstream train.py output), the worker's event spool files, and xvctl's override
// flags. Each test runs one target (fuzz_targets.h) on its seed corpus
// (tests/fuzz/corpus/<target>/) and on mutants for XV_FUZZ_SECONDS (default 10 s) or XV_FUZZ_RUNS
// inputs, and fails on any exception or broken contract; a crash, a sanitizer report or a hang ends
// the process with the input written as hex (fuzz_driver.h). The driver itself is tested first: a
// planted bug is found, reported and replayable.
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_driver.h"
#include "fuzz_targets.h"
#include "worker/event_spool.h"

namespace xv::fuzz {
namespace {

namespace fs = std::filesystem;

std::string SourceDir() {
  const char* d = std::getenv("XV_SOURCE_DIR");
  return d != nullptr ? d : XV_FUZZ_SOURCE_DIR;
}

std::vector<std::string> Corpus(const std::string& target) {
  return ReadCorpusDir(SourceDir() + "/tests/fuzz/corpus/" + target);
}

void Append(std::vector<std::string>* to, const std::vector<std::string>& more) {
  to->insert(to->end(), more.begin(), more.end());
}

void ExpectClean(const FuzzReport& report, size_t seeds) {
  EXPECT_EQ(report.failures, 0) << report.first_failure;
  // Mutants ran, not only the seeds (unless XV_FUZZ_RUNS asks for none).
  EXPECT_GT(report.inputs, static_cast<int64_t>(seeds));
}

FuzzOptions Options() { return FuzzOptions::FromEnv(/*default_seconds=*/10.0); }

// --- the driver --------------------------------------------------------------------------------

int PlantedBug(const uint8_t* data, size_t size) {
  for (size_t i = 0; i + 1 < size; ++i) {
    if (data[i] == '<' && data[i + 1] == 0xff) throw FuzzContractViolation("planted bug");
  }
  return 0;
}

int PlantedAbort(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == 'X') std::abort();
  return 0;
}

TEST(FuzzDriver, HexRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  EXPECT_EQ(FromHex(ToHex(all)), all);
  EXPECT_EQ(ToHex("\x01\xab"), "01ab\n");
}

TEST(FuzzDriver, FindsReportsAndReplaysAPlantedBug) {
  FuzzOptions o;
  o.seed = 7;
  o.runs = 200000;
  o.seconds = 20;
  o.out_dir =
      (fs::temp_directory_path() / ("xv-fuzz-driver-" + std::to_string(::getpid()))).string();
  const std::vector<std::string> seeds = {"<<<<<<<<", "abc<def"};
  const FuzzReport report = RunFuzzer("planted", PlantedBug, seeds, {"<"}, o);
  ASSERT_GT(report.failures, 0) << "the mutator never produced '<' followed by 0xff";
  EXPECT_NE(report.first_failure.find("planted bug"), std::string::npos) << report.first_failure;
  EXPECT_NE(report.first_failure.find("XV_FUZZ_SEED=7"), std::string::npos);
  ASSERT_FALSE(report.failure_files.empty());

  // The file holds the failing input: replaying it fails again, and only it runs.
  o.replay = report.failure_files[0];
  const FuzzReport replay = RunFuzzer("planted-replay", PlantedBug, seeds, {}, o);
  EXPECT_EQ(replay.inputs, 1);
  EXPECT_EQ(replay.failures, 1);

  // The same seed gives the same inputs.
  o.replay.clear();
  o.runs = report.inputs;
  o.seconds = 60;
  const FuzzReport again = RunFuzzer("planted-again", PlantedBug, seeds, {"<"}, o);
  EXPECT_EQ(again.failures, report.failures);
  fs::remove_all(o.out_dir);
}

TEST(FuzzDriverDeathTest, ACrashWritesTheInputBeforeTheProcessDies) {
  const std::string dir =
      (fs::temp_directory_path() / ("xv-fuzz-crash-" + std::to_string(::getpid()))).string();
  FuzzOptions o;
  o.seed = 3;
  o.runs = 10;
  o.out_dir = dir;
  EXPECT_DEATH(RunFuzzer("abort", PlantedAbort, {"ok", "X marks"}, {}, o),
               "xv fuzz: abort in target abort, XV_FUZZ_SEED=3, input 1 \\(a seed\\)");
  std::ifstream in(dir + "/abort-crash.hex");
  std::stringstream hex;
  hex << in.rdbuf();
  EXPECT_EQ(FromHex(hex.str()), "X marks");
  fs::remove_all(dir);
}

#if defined(__SANITIZE_ADDRESS__)
int PlantedOverflow(const uint8_t* data, size_t size) {
  if (size > 0 && data[0] == 'X') {
    std::vector<uint8_t> copy(data, data + size);
    volatile uint8_t past_the_end = copy.data()[copy.size()];  // heap-buffer-overflow
    (void)past_the_end;
  }
  return 0;
}

TEST(FuzzDriverDeathTest, ASanitizerReportWritesTheInputBeforeTheProcessDies) {
  const std::string dir =
      (fs::temp_directory_path() / ("xv-fuzz-asan-" + std::to_string(::getpid()))).string();
  FuzzOptions o;
  o.seed = 4;
  o.runs = 10;
  o.out_dir = dir;
  EXPECT_DEATH(RunFuzzer("overflow", PlantedOverflow, {"ok", "Xtra"}, {}, o),
               "heap-buffer-overflow(.|\n)*xv fuzz: sanitizer report in target overflow");
  std::ifstream in(dir + "/overflow-crash.hex");
  std::stringstream hex;
  hex << in.rdbuf();
  EXPECT_EQ(FromHex(hex.str()), "Xtra");
  fs::remove_all(dir);
}
#endif

// --- the parsers -------------------------------------------------------------------------------

TEST(ParserFuzz, RecipeYaml) {
  std::vector<std::string> seeds = Corpus("recipe_yaml");
  Append(&seeds, ReadCorpusDir(SourceDir() + "/recipes"));
  ASSERT_GE(seeds.size(), 3u);
  const std::vector<std::string> dict = {"depth: ",
                                         "matrix_lr: ",
                                         "adam_betas: [0.8, 0.95]",
                                         "window_pattern: ",
                                         "SSSL",
                                         "head_dim: ",
                                         "aspect_ratio: ",
                                         "total_batch_size: ",
                                         "n_kv_head: ",
                                         "activation: ",
                                         "swiglu",
                                         "device_batch_size: ",
                                         "sequence_len: ",
                                         "mlp_ratio: ",
                                         "short_window_fraction: ",
                                         "kv_head_divisor: ",
                                         ": ",
                                         "\n",
                                         "- ",
                                         "{",
                                         "}",
                                         "[",
                                         "]",
                                         "&anchor ",
                                         "*anchor",
                                         "<<: ",
                                         "!!float ",
                                         "!!binary ",
                                         "? ",
                                         "|\n  ",
                                         ">\n  ",
                                         "%YAML 1.2\n---\n",
                                         "=",
                                         "0x10",
                                         "0o17",
                                         ".nan",
                                         "1_000",
                                         "1e400",
                                         "true",
                                         "~"};
  ExpectClean(RunFuzzer("recipe_yaml", FuzzRecipeYaml, seeds, dict, Options()), seeds.size());
}

TEST(ParserFuzz, TrainerOutput) {
  const std::vector<std::string> seeds = Corpus("trainer_output");
  ASSERT_GE(seeds.size(), 2u);
  const std::vector<std::string> dict = {"{\"type\":\"step\",",
                                         "\"step\":",
                                         "\"loss\":",
                                         "\"message\":",
                                         "\"type\":\"error\"",
                                         "\"type\":\"summary\"",
                                         "}",
                                         "\n",
                                         "step 00042 (12.3%) | loss: ",
                                         " | tok/sec: ",
                                         " | mfu: ",
                                         " | epoch: ",
                                         " | dt: ",
                                         "---\n",
                                         "val_bpb: ",
                                         "num_steps: ",
                                         "depth: ",
                                         "FAIL\n",
                                         "\r",
                                         "nan",
                                         "inf",
                                         "1e999"};
  ExpectClean(RunFuzzer("trainer_output", FuzzTrainerOutput, seeds, dict, Options()), seeds.size());
}

TEST(ParserFuzz, UpstreamOutput) {
  const std::vector<std::string> seeds = Corpus("upstream_output");
  ASSERT_GE(seeds.size(), 1u);
  const std::vector<std::string> dict = {"step ",
                                         "(100.0%)",
                                         " | loss: ",
                                         " | lrm: ",
                                         " | dt: ",
                                         "ms",
                                         "s",
                                         " | tok/sec: ",
                                         "1,234,567",
                                         " | mfu: ",
                                         "%",
                                         " | epoch: ",
                                         " | remaining: ",
                                         "---\n",
                                         "val_bpb: ",
                                         "training_seconds: ",
                                         "total_tokens_M: ",
                                         "num_steps: ",
                                         "depth: ",
                                         "peak_vram_mb: ",
                                         "FAIL",
                                         "\r",
                                         "\n",
                                         "nan",
                                         "-inf",
                                         "1e308",
                                         "1e309",
                                         "9223372036854775808"};
  ExpectClean(RunFuzzer("upstream_output", FuzzUpstreamOutput, seeds, dict, Options()),
              seeds.size());
}

// Spool files as the worker writes them: events, a Finished and an acknowledgement, through
// EventSpool itself. Byte 0 of each seed is the target's flags (bit 0: fix the CRCs).
std::vector<std::string> SpoolSeeds() {
  const fs::path dir =
      fs::temp_directory_path() / ("xv-fuzz-spool-seeds-" + std::to_string(::getpid()));
  std::vector<std::string> seeds;
  {
    std::unique_ptr<worker::EventSpool> spool;
    EXPECT_TRUE(worker::EventSpool::Open(dir.string(), &spool).ok());
    for (int seq = 1; seq <= 3; ++seq) {
      v1::WorkerMessage m;
      auto* ev = m.mutable_event();
      ev->set_experiment_id(7);
      ev->set_attempt(1);
      ev->set_seq(seq);
      ev->set_type("step");
      ev->set_json("{\"type\":\"step\",\"step\":" + std::to_string(seq) + ",\"loss\":3.5}");
      EXPECT_TRUE(spool->Append(m).ok());
    }
    EXPECT_TRUE(spool->Acknowledge(7, 1, 2, {}).ok());
    v1::WorkerMessage fin;
    fin.mutable_finished()->set_experiment_id(7);
    fin.mutable_finished()->set_attempt(1);
    fin.mutable_finished()->set_state("succeeded");
    fin.mutable_finished()->set_last_seq(3);
    EXPECT_TRUE(spool->Append(fin).ok());
  }
  std::ifstream in(dir / "exp-7-a1.spool", std::ios::binary);
  std::stringstream buf;
  buf << in.rdbuf();
  const std::string file = buf.str();
  EXPECT_GT(file.size(), 8u);
  seeds.push_back(std::string(1, '\1') + file);
  seeds.push_back(std::string(1, '\0') + file);
  seeds.push_back(std::string(1, '\1') + file.substr(0, file.size() - 5));  // torn tail
  fs::remove_all(dir);
  return seeds;
}

TEST(ParserFuzz, EventSpool) {
  std::vector<std::string> seeds = SpoolSeeds();
  const std::vector<std::string> dict = {"XVSPOOL1",
                                         std::string("\x01", 1),
                                         std::string("\x02", 1),
                                         std::string("\x03", 1),
                                         std::string("\0\0\0\0", 4),
                                         std::string("\xff\xff\xff\xff", 4)};
  ExpectClean(RunFuzzer("event_spool", FuzzEventSpool, seeds, dict, Options()), seeds.size());
}

TEST(ParserFuzz, OverrideLists) {
  const std::vector<std::string> seeds = Corpus("override_lists");
  ASSERT_GE(seeds.size(), 2u);
  const std::vector<std::string> dict = {"=",
                                         ",",
                                         "[",
                                         "]",
                                         "{",
                                         "}",
                                         "'",
                                         "\"",
                                         "''",
                                         "\\\"",
                                         "matrix_lr=",
                                         "adam_betas=[0.8, 0.95]",
                                         "\n",
                                         " ",
                                         "depth=1,2,3,4,5,6,7,8",
                                         "window_pattern=SSSL,L"};
  ExpectClean(RunFuzzer("override_lists", FuzzOverrideLists, seeds, dict, Options()), seeds.size());
}

}  // namespace
}  // namespace xv::fuzz
