// The researcher's views through real processes (xvd, xv-worker with the fake trainer: val_bpb =
// 1 + 10 * matrix_lr, deterministic; matrix_lr=0.06 diverges): results.tsv line by line, the
// results table within 80 columns, show, best, compare (and its refusal to mix budgets), the
// progress plot's SVG, wait --json, and exit code 2 for every usage error.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

using nlohmann::json;

class ResearcherViewsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_TRUE(sb_.StartDaemon(&xvd_));
    worker_ = sb_.StartFakeWorker("rv-cpu",
                                  {{"XV_FAKE_STEPS", "3"},
                                   {"XV_FAKE_STEP_SECONDS", "0.02"},
                                   {"XV_FAKE_MODE", "diverge"},
                                   {"XV_FAKE_MODE_IF_MATRIX_LR", "0.06"}},
                                  {}, "worker.log");
  }
  void TearDown() override {
    worker_.Stop();
    xvd_.Stop();
  }

  CommandResult Xvctl(std::vector<std::string> args) { return sb_.Xvctl(std::move(args), 120); }

  json XvctlJson(const std::vector<std::string>& args) {
    CommandResult r = Xvctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
    return j.is_discarded() ? json::object() : j;
  }

  // Waits until round `round_id` of `campaign` is decided.
  void WaitDecided(const std::string& campaign, int64_t round_id) {
    for (int i = 0; i < 100; ++i) {
      json c = XvctlJson({"campaign", "show", campaign, "--json"});
      for (const auto& r : c.value("rounds", json::array())) {
        if (r["id"] == round_id && r["state"] == "decided") return;
      }
      ::usleep(100 * 1000);
    }
    ADD_FAILURE() << "round " << round_id << " never decided" << Logs();
  }

  std::string Logs() {
    return "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log")) + "\n--- worker.log ---\n" +
           FileTail(sb_.Path("worker.log"));
  }

  Sandbox sb_{"rv"};
  ChildGuard xvd_, worker_;
};

TEST_F(ResearcherViewsE2eTest, TsvTableShowBestComparePlotOfADecidedRound) {
  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  const std::string policy = sb_.Path("policy.yaml");
  std::ofstream(policy) << "mode: noise_band\nreplicates: 2\nhead_controls: 2\nmin_effect: 0.01\n"
                           "band_k: 2\n";
  json created = XvctlJson({"campaign", "create", "lr", "--recipe", recipe, "--policy", policy,
                            "--budget", R"({"time_budget_s": 2})", "--json"});
  json sub = XvctlJson({"submit", "--campaign", "lr", "--sweep", "matrix_lr=0.02,0.06", "--json"});
  const int64_t round = sub.value("round_id", int64_t{0});
  ASSERT_GT(round, 0) << sub.dump();
  json waited = XvctlJson({"wait", "--timeout", "90", "--json"});
  EXPECT_EQ(waited["timed_out"], false) << waited.dump();
  EXPECT_EQ(waited["experiments"].size(), 6u) << waited.dump();
  WaitDecided("lr", round);

  // results.tsv: each run's line after the commit column (written "@ID" here), in id order.
  json rows = XvctlJson({"results", "--json", "--campaign", "lr"});
  std::map<int64_t, json> by_id;
  for (const auto& e : rows["experiments"]) by_id[e["id"].get<int64_t>()] = e;
  ASSERT_EQ(by_id.size(), 6u) << rows.dump(2);
  std::string expected = "commit\tval_bpb\tmemory_gb\tstatus\tdescription\n";
  int64_t kept_id = 0, diverged_id = 0;
  for (const auto& [id, e] : by_id) {
    const std::string name = e["name"];
    const std::string seed = " seed=" + std::to_string(e["seed"].get<int64_t>());
    std::string line;
    if (name == "matrix_lr=0.02") {
      line = "1.200000\t0.0\tkeep\tmatrix_lr=0.02" + seed;
      kept_id = id;
    } else if (name == "matrix_lr=0.06") {
      line = "0.000000\t0.0\tcrash\tmatrix_lr=0.06" + seed + " (diverged)";
      diverged_id = id;
    } else {
      ASSERT_EQ(name, "head") << e.dump();
      line = "1.400000\t0.0\tkeep\thead" + seed + " (control)";
    }
    expected += "@" + std::to_string(id) + "\t" + line + "\n";
  }
  CommandResult tsv = Xvctl({"results", "--campaign", "lr", "--format", "tsv"});
  ASSERT_EQ(tsv.exit_code, 0) << tsv.err;
  // The commit column: the same 7 characters for the runs of one config, another for another.
  std::istringstream lines(tsv.out);
  std::string line, rebuilt;
  std::map<std::string, std::string> commit_of_name;
  std::getline(lines, line);
  rebuilt = line + "\n";
  auto it = by_id.begin();
  while (std::getline(lines, line) && it != by_id.end()) {
    const std::string commit = line.substr(0, line.find('\t'));
    EXPECT_EQ(commit.size(), 7u) << line;
    const std::string name = it->second["name"];
    if (commit_of_name.count(name)) EXPECT_EQ(commit_of_name[name], commit) << tsv.out;
    commit_of_name[name] = commit;
    rebuilt += "@" + std::to_string(it->first) + line.substr(commit.size()) + "\n";
    ++it;
  }
  EXPECT_EQ(rebuilt, expected) << tsv.out;
  EXPECT_EQ(commit_of_name.size(), 3u) << tsv.out;

  // The table fits 80 columns off a terminal, --wide does not cut.
  CommandResult table = Xvctl({"results", "--campaign", "lr"});
  std::istringstream table_lines(table.out);
  while (std::getline(table_lines, line)) {
    size_t code_points = 0;  // a cut cell ends in "…", 3 bytes, one column
    for (unsigned char c : line) code_points += (c & 0xC0) != 0x80;
    EXPECT_LE(code_points, 80u) << table.out;
  }
  EXPECT_NE(table.out.find("mem GB"), std::string::npos) << table.out;

  CommandResult show = Xvctl({"show", std::to_string(diverged_id)});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("matrix_lr: 0.02 -> 0.06"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("diverged"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("states:    queued -> assigned (attempt 1)"), std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find(" -> diverged: "), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("#" + std::to_string(diverged_id) + " matrix_lr=0.06  diverged  ("),
            std::string::npos)
      << show.out;
  json show_json = XvctlJson({"show", std::to_string(kept_id), "--json"});
  EXPECT_EQ(show_json["events"]["complete"], true) << show_json.dump(2);
  EXPECT_GE(show_json["events"]["counts"].value("step", 0), 3) << show_json.dump(2);

  json best = XvctlJson({"best", "--campaign", "lr", "--json"});
  EXPECT_DOUBLE_EQ(best["best"]["val_bpb"].get<double>(), 1.2) << best.dump(2);
  EXPECT_EQ(best["head"]["reason"], "kept") << best.dump(2);
  EXPECT_EQ(best["head"]["candidate"], "matrix_lr=0.02") << best.dump(2);

  json cmp = XvctlJson({"compare", "--round", std::to_string(round), "--json"});
  std::map<std::string, json> groups;
  for (const auto& g : cmp["groups"]) groups[g["candidate"].get<std::string>()] = g;
  ASSERT_EQ(groups.size(), 3u) << cmp.dump(2);
  EXPECT_EQ(groups["matrix_lr=0.02"]["n"], 2);
  EXPECT_DOUBLE_EQ(groups["matrix_lr=0.02"]["val_bpb_mean"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(groups["matrix_lr=0.02"]["val_bpb_sd"].get<double>(), 0.0);
  EXPECT_EQ(groups["matrix_lr=0.06"]["n"], 0);
  EXPECT_EQ(groups["matrix_lr=0.06"]["failed"], 2);
  EXPECT_DOUBLE_EQ(groups["head"]["val_bpb_mean"].get<double>(), 1.4);
  EXPECT_EQ(groups["head"]["mfu_denominator"], "unknown");

  const std::string svg_path = sb_.Path("progress.svg");
  CommandResult plot = Xvctl({"plot", "--campaign", "lr", "-o", svg_path});
  ASSERT_EQ(plot.exit_code, 0) << plot.err;
  std::stringstream svg;
  svg << std::ifstream(svg_path).rdbuf();
  EXPECT_NE(svg.str().find("<path class=\"running-best\" data-over=\"kept\""), std::string::npos)
      << svg.str();
  EXPECT_NE(svg.str().find("<text class=\"annotation\""), std::string::npos);
  EXPECT_NE(svg.str().find("lr: 6 experiments, 2 kept, 0 discarded, 2 crashed, 2 controls"),
            std::string::npos)
      << svg.str();

  // Runs of different time budgets are not compared: the refusal names both budgets and runs.
  json a = XvctlJson({"submit", recipe, "--set", "time_budget_s=2", "--campaign", "mix", "--json"});
  json b = XvctlJson({"submit", recipe, "--set", "time_budget_s=3", "--set", "matrix_lr=0.03",
                      "--campaign", "mix", "--json"});
  XvctlJson({"wait", "--timeout", "90", "--json"});
  const std::string ida = std::to_string(a["experiment_ids"][0].get<int64_t>());
  const std::string idb = std::to_string(b["experiment_ids"][0].get<int64_t>());
  CommandResult mixed = Xvctl({"compare", ida, idb});
  EXPECT_EQ(mixed.exit_code, 2) << mixed.out << mixed.err;
  EXPECT_NE(mixed.err.find("mix time budgets: 2 s (#" + ida + "); 3 s (#" + idb + ")"),
            std::string::npos)
      << mixed.err;
}

TEST_F(ResearcherViewsE2eTest, EveryUsageErrorExitsTwo) {
  const std::vector<std::vector<std::string>> usage_errors = {
      {},
      {"no-such-command"},
      {"results", "--no-such-flag"},
      {"results", "--format", "xml"},
      {"results", "--limit", "many"},
      {"wait", "abc"},
      {"wait", "--timeout"},
      {"watch", "--experiment", "-3"},
      {"show"},
      {"show", "x"},
      {"compare"},
      {"compare", "--round", "1", "7"},
      {"plot", "--campaign", "lr"},
      {"plot", "--campaign", "lr", "-o", "progress.pdf"},
      {"decide", "1"},
      {"cancel"},
      {"campaign", "create"},
      {"status", "extra"},
  };
  for (const auto& args : usage_errors) {
    CommandResult r = Xvctl(args);
    std::string joined;
    for (const auto& a : args) joined += a + " ";
    EXPECT_EQ(r.exit_code, 2) << "xvctl " << joined << "\n" << r.out << r.err;
  }
  CommandResult help = Xvctl({"results", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.err;
  CommandResult unknown = Xvctl({"show", "999999"});
  EXPECT_EQ(unknown.exit_code, 1) << unknown.err;
}

}  // namespace
}  // namespace xv::e2e
