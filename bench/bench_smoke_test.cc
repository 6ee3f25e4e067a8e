// Smoke test of the benchmarks: each runs for about a second with tiny sizes, must exit 0 and print
// its table with figures that are numbers above zero. Not a speed test: no figure is compared with
// a target. A benchmark that is not built (xv-bench-trainer without LibTorch) is skipped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <regex>
#include <string>
#include <vector>

#include "tests/e2e/process_harness.h"

namespace {

using xv::e2e::BinaryPath;
using xv::e2e::CommandResult;
using xv::e2e::RunCommand;

// The number after `label` in `text` (first match), or -1.
double NumberAfter(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern + R"(\s*([0-9]+(\.[0-9]+)?))"))) return -1;
  return std::stod(m[1].str());
}

TEST(BenchSmokeTest, TrainerPrintsItsTableAndRatios) {
  const std::string bin = BinaryPath("xv-bench-trainer");
  if (access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << bin << " not built";
  // A 1-layer model of 64 channels on 128-token steps: a second or two on 2 cores.
  CommandResult r = RunCommand({bin,
                                "--set",
                                "depth=1",
                                "--set",
                                "vocab_size=512",
                                "--set",
                                "sequence_len=64",
                                "--set",
                                "device_batch_size=2",
                                "--set",
                                "total_batch_size=256",
                                "--device",
                                "cpu",
                                "--threads",
                                "2",
                                "--steps",
                                "2",
                                "--warmup",
                                "1",
                                "--backends",
                                "math,sdpa"},
                               120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("BLAS: "), std::string::npos) << r.out;
  EXPECT_GT(NumberAfter(r.out, R"(fp32 matmul 512\^3 on the CPU, 1 thread [^:]*:)"), 0) << r.out;
  // One row per backend and thread count: "math 1 <ms/step> ...", "sdpa 2 ...".
  for (const char* row : {R"(\nmath\s+1 )", R"(\nmath\s+2 )", R"(\nsdpa\s+1 )", R"(\nsdpa\s+2 )"}) {
    EXPECT_GT(NumberAfter(r.out, row), 0) << "row " << row << " missing:\n" << r.out;
  }
  EXPECT_GT(NumberAfter(r.out, R"(sdpa / math \(1 thread\):)"), 0) << r.out;
  EXPECT_GT(NumberAfter(r.out, R"(2 threads / 1 thread, math:)"), 0) << r.out;
  EXPECT_EQ(r.out.find("NON-FINITE"), std::string::npos) << r.out;
}

TEST(BenchSmokeTest, TrainerRejectsAnUnknownBackendNamingIt) {
  const std::string bin = BinaryPath("xv-bench-trainer");
  if (access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << bin << " not built";
  CommandResult r = RunCommand({bin, "--backends", "math,fast"}, 60);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--backends: 'fast'"), std::string::npos) << r.err;
  r = RunCommand({bin, "--set", "depth=0"}, 60);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("depth"), std::string::npos) << r.err;
}

TEST(BenchSmokeTest, DaemonPrintsItsTablesAndEveryRunSucceeds) {
  const std::string bin = BinaryPath("xv-bench-daemon");
  if (access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << bin << " not built";
  CommandResult r = RunCommand({bin, "--workers", "2", "--experiments", "24", "--events", "5",
                                "--batch", "8", "--xvd", BinaryPath("xvd")},
                               120);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // 24 single submits, then 3 batched ones of 8.
  EXPECT_EQ(NumberAfter(r.out, R"(single \(1 candidate per call\))"), 24) << r.out;
  EXPECT_EQ(NumberAfter(r.out, R"(batched \(8 candidates per call\))"), 3) << r.out;
  EXPECT_EQ(NumberAfter(r.out, R"(\nsummary only)"), 24) << r.out;
  EXPECT_EQ(NumberAfter(r.out, R"(5 step events \+ summary)"), 24) << r.out;
  EXPECT_GT(NumberAfter(r.out, R"(per experiment, queued \(batched submit\))"), 0) << r.out;
  EXPECT_GT(NumberAfter(r.out, R"(submit experiments/s, batched / single:)"), 0) << r.out;
  // Ingestion from the daemon's side: every step event of the 24 runs is a metrics row.
  EXPECT_EQ(NumberAfter(r.out, R"(FROM metrics, phase delta\):)"), 120) << r.out;
  EXPECT_GT(NumberAfter(r.out, R"(metric rows stored/s in the stream window:)"), 0) << r.out;
  EXPECT_GT(NumberAfter(r.out, R"(whole phase \(runs x events / phase seconds[^:]*:)"), 0) << r.out;
  EXPECT_GT(NumberAfter(r.out, R"(xvd VmHWM \(resident peak\))"), 0) << r.out;
}

TEST(BenchSmokeTest, DaemonQuickRunsItsScalePhaseAndWritesItsFigures) {
  const std::string bin = BinaryPath("xv-bench-daemon");
  if (access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << bin << " not built";
  const std::string json = ::testing::TempDir() + "/xv-bench-daemon-quick.json";
  CommandResult r = RunCommand({bin, "--quick", "--xvd", BinaryPath("xvd"), "--json", json}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  // The fill grew the batched campaign (24 runs) to 2000 experiments with 50 metrics rows each.
  EXPECT_EQ(NumberAfter(r.out, R"(filled: \+)"), 1976) << r.out;
  for (const char* row :
       {R"(newest 20 of the campaign\s+30 )", R"(best 10 by val_bpb\s+30 )",
        R"(page of 500 at a random id\s+30 )", R"(dispatch: Submit start \.\. Assign read\s+30 )",
        R"(Status, during the big submit\s+)", R"(ack of 64 step events, idle\s+)"}) {
    EXPECT_GT(NumberAfter(r.out, row), 0) << "row " << row << " missing:\n" << r.out;
  }
  EXPECT_EQ(NumberAfter(r.out, R"(big submit:)"), 1008) << r.out;  // 63 x 16 replicates
  const std::string figures = xv::e2e::ReadFileText(json);
  for (const char* key :
       {"\"runs_per_s_with_events\"", "\"metric_rows_per_s\"", "\"dispatch\"",
        "\"xvd_rss_peak_kib\"", "\"db_bytes_per_step_event\"", "\"metric_rows_per_s_whole_phase\"",
        "\"metric_rows_stored\"", "\"xvd_cpu_us_per_step_event\""}) {
    EXPECT_NE(figures.find(key), std::string::npos) << key << " missing from " << figures;
  }
}

TEST(BenchSmokeTest, DaemonRejectsABatchAboveTheSubmitLimit) {
  const std::string bin = BinaryPath("xv-bench-daemon");
  if (access(bin.c_str(), X_OK) != 0) GTEST_SKIP() << bin << " not built";
  CommandResult r = RunCommand({bin, "--batch", "300"}, 30);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--batch"), std::string::npos) << r.err;
}

}  // namespace
