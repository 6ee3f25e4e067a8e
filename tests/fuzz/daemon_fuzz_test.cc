// Hostile input for the daemon's own code and the edges that feed it: a campaign's budget_json,
// trainer events applied by the store to a real SQLite database, the worker's stderr tail and
// stdout lines, and `xvctl mcp` tool arguments. Each test runs one target (fuzz_targets.h) on its
// seed corpus (tests/fuzz/corpus/<target>/) and on mutants for XV_FUZZ_SECONDS (default 10 s) or
// XV_FUZZ_RUNS inputs, and fails on any exception or broken contract; a crash, a sanitizer report
// or a hang ends the process with the input written as hex (fuzz_driver.h).
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fuzz_driver.h"
#include "fuzz_targets.h"

namespace xv::fuzz {
namespace {

std::string SourceDir() {
  const char* d = std::getenv("XV_SOURCE_DIR");
  return d != nullptr ? d : XV_FUZZ_SOURCE_DIR;
}

std::vector<std::string> Corpus(const std::string& target) {
  return ReadCorpusDir(SourceDir() + "/tests/fuzz/corpus/" + target);
}

void ExpectClean(const FuzzReport& report, size_t seeds) {
  EXPECT_EQ(report.failures, 0) << report.first_failure;
  EXPECT_GT(report.inputs, static_cast<int64_t>(seeds));
}

FuzzOptions Options() { return FuzzOptions::FromEnv(/*default_seconds=*/10.0); }

// Nesting and size tokens every JSON target shares.
const std::vector<std::string>& JsonDictionary() {
  static const std::vector<std::string> dict = {"{",
                                                "}",
                                                "[",
                                                "]",
                                                ":",
                                                ",",
                                                "\"",
                                                "\\u0000",
                                                "\\ud800",
                                                "\xff",
                                                "\xc3\xa9",
                                                "null",
                                                "true",
                                                "1e308",
                                                "-1e400",
                                                "9223372036854775808",
                                                "-0",
                                                "0.5",
                                                "[[[[[[[[[[[[[[[[",
                                                "]]]]]]]]]]]]]]]]",
                                                "{\"a\":{\"a\":{\"a\":{\"a\":"};
  return dict;
}

std::vector<std::string> With(std::vector<std::string> more) {
  std::vector<std::string> dict = JsonDictionary();
  dict.insert(dict.end(), more.begin(), more.end());
  return dict;
}

TEST(DaemonFuzz, BudgetContract) {
  const std::vector<std::string> seeds = Corpus("budget_contract");
  ASSERT_GE(seeds.size(), 3u);
  const auto dict = With({"\"time_budget_s\":", "\"startup_allowance_s\":", "\"eval_allowance_s\":",
                          "\"max_concurrent\":", "86400", "4096", "4097", "2.0"});
  ExpectClean(RunFuzzer("budget_contract", FuzzBudgetContract, seeds, dict, Options()),
              seeds.size());
}

TEST(DaemonFuzz, StoreEvents) {
  const std::vector<std::string> seeds = Corpus("store_events");
  ASSERT_GE(seeds.size(), 3u);
  const auto dict =
      With({"\"type\":\"start\"", "\"type\":\"step\"", "\"type\":\"nan\"", "\"type\":\"summary\"",
            "\"type\":\"error\"", "\"device\":{\"name\":", "\"step\":", "\"loss\":",
            "\"progress\":", "\"message\":", "\"kind\":", "\"what\":", "\"value\":", "\"val_bpb\":",
            "\"total_tokens_M\":", "\"num_params_M\":", "\"num_steps\":", "\"depth\":", "\n"});
  ExpectClean(RunFuzzer("store_events", FuzzStoreEvents, seeds, dict, Options()), seeds.size());
}

TEST(DaemonFuzz, WorkerLines) {
  const std::vector<std::string> seeds = Corpus("worker_lines");
  ASSERT_GE(seeds.size(), 2u);
  const auto dict = With({"\n", "\r", "\r\n",
                          "{\"type\":\"error\",\"message\":", "{\"type\":\"log\",\"text\":", "\xc3",
                          "\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80"});
  ExpectClean(RunFuzzer("worker_lines", FuzzWorkerLines, seeds, dict, Options()), seeds.size());
}

TEST(DaemonFuzz, McpArguments) {
  const std::vector<std::string> seeds = Corpus("mcp_arguments");
  ASSERT_GE(seeds.size(), 3u);
  const auto dict =
      With({"\"recipe_path\":", "\"campaign\":", "\"candidates\":", "\"set\":", "\"sweep\":",
            "\"replicates\":", "\"name\":", "\"policy\":", "\"budget\":", "\"id\":",
            "\"experiment_id\":", "\"round_id\":", "\"keep\":", "\"matrix_lr\":", "\"/dev/zero\"",
            "\"/etc/passwd\"", "\"/tmp\"", "\"123456789012345678901234567890\"", "\"k=v,k2=v2\""});
  ExpectClean(RunFuzzer("mcp_arguments", FuzzMcpArguments, seeds, dict, Options()), seeds.size());
}

}  // namespace
}  // namespace xv::fuzz
