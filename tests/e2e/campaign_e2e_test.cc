// Campaigns end to end with real processes: a real `xvd`, a real `xv-worker` running the scripted
// fake trainer (tests/fixtures/fake_trainer.sh: val_bpb = 1 + 10 * matrix_lr, deterministic; the
// base recipe's matrix_lr is 0.04, so the head scores 1.4), and `xvctl campaign / submit --sweep /
// wait / results / decide`.
//  - NoiseBandPolicyKeepsTheBetterCandidate: a sweep round built from the campaign head (0.02
//    better, 0.06 diverging) keeps 0.02 with its statistics stored and the head advanced; a second
//    sweep from the new head (0.03, worse) keeps nothing and the head stays; results show the
//    decisions and reasons; --failures shows the diverged value; bad sweeps and unknown knobs are
//    refused with the flag/field named and nothing queued; pause/resume and list; with the daemon
//    stopped, show, list and --failures read the database.
//  - ManualPolicyDecideKeeps: `decide ROUND --keep EXP --reason` advances the head.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class CampaignE2eTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_TRUE(sb_.StartDaemon(&xvd_));
    worker_ = sb_.StartFakeWorker("cc-cpu",
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

  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    return sb_.Xvctl(std::move(args), timeout_s);
  }

  // Runs xvctl expecting exit 0 and JSON on stdout.
  json XvctlJson(const std::vector<std::string>& args) {
    CommandResult r = Xvctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    EXPECT_FALSE(j.is_discarded()) << "not JSON: " << r.out;
    return j.is_discarded() ? json::object() : j;
  }

  void WaitAll() {
    CommandResult r = Xvctl({"wait", "--timeout", "90"}, 120);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
  }

  // campaign show --json, polled until round `round_id` is decided (the daemon decides on its
  // monitor tick after the last experiment ends).
  json ShowDecided(const std::string& name, int64_t round_id) {
    json c;
    for (int i = 0; i < 100; ++i) {
      c = XvctlJson({"campaign", "show", name, "--json"});
      for (const auto& r : c.value("rounds", json::array())) {
        if (r["id"] == round_id && r["state"] == "decided") return c;
      }
      ::usleep(100 * 1000);
    }
    ADD_FAILURE() << "round " << round_id << " never decided: " << c.dump(2) << Logs();
    return c;
  }

  std::map<std::string, std::vector<json>> ResultsByName(const std::string& campaign) {
    json j = XvctlJson({"results", "--json", "--campaign", campaign});
    std::map<std::string, std::vector<json>> by_name;
    for (const auto& e : j.value("experiments", json::array())) {
      by_name[e["name"].get<std::string>()].push_back(e);
    }
    return by_name;
  }

  std::string WriteFile(const std::string& name, const std::string& text) {
    std::string path = (sb_.dir() / name).string();
    std::ofstream(path) << text;
    return path;
  }

  std::string Logs() {
    return "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log")) + "\n--- worker.log ---\n" +
           FileTail(sb_.Path("worker.log"));
  }

  Sandbox sb_{"cc"};
  ChildGuard xvd_, worker_;
};

// The decision entry of candidate `name`; nullptr when absent.
const json* FindCandidate(const json& decision, const std::string& name) {
  if (!decision.is_object() || !decision.contains("candidates")) return nullptr;
  for (const auto& c : decision.at("candidates")) {
    if (c.at("name") == name) return &c;
  }
  return nullptr;
}

TEST_F(CampaignE2eTest, NoiseBandPolicyKeepsTheBetterCandidate) {
  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  const std::string policy =
      WriteFile("policy.yaml",
                "mode: noise_band\nreplicates: 2\nhead_controls: 2\nmin_effect: 0.01\n"
                "band_k: 2\n");
  json created = XvctlJson({"campaign", "create", "lr", "--recipe", recipe, "--policy", policy,
                            "--budget", R"({"time_budget_s": 2})", "--json"});
  ASSERT_EQ(created.value("name", ""), "lr") << created.dump(2);
  const std::string base_hash = created["base_recipe_hash"];
  EXPECT_EQ(created["head_recipe_hash"], base_hash);
  EXPECT_EQ(created["policy"]["mode"], "noise_band");
  EXPECT_EQ(created["state"], "active");

  // Taken name: refused.
  CommandResult again = Xvctl({"campaign", "create", "lr", "--recipe", recipe});
  EXPECT_NE(again.exit_code, 0) << again.out;

  // Refusals name the flag or the field, and queue nothing.
  CommandResult bad = Xvctl({"submit", "--campaign", "lr", "--sweep", "matrix_lr=0.02,,0.03"});
  EXPECT_EQ(bad.exit_code, 2) << bad.out << bad.err;
  EXPECT_NE(bad.err.find("--sweep 'matrix_lr=0.02,,0.03'"), std::string::npos) << bad.err;
  CommandResult unknown = Xvctl({"submit", "--campaign", "lr", "--sweep", "matrx_lr=0.02,0.03"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("matrx_lr"), std::string::npos) << unknown.err;
  EXPECT_TRUE(XvctlJson({"results", "--json"})["experiments"].empty());

  // Round 1: a sweep built from the head. 0.02 -> 1.2 (better than 1.4), 0.06 diverges.
  json sub = XvctlJson({"submit", "--campaign", "lr", "--sweep", "matrix_lr=0.02,0.06", "--json"});
  const int64_t round1 = sub.value("round_id", int64_t{0});
  ASSERT_GT(round1, 0) << sub.dump();
  EXPECT_EQ(sub["experiment_ids"].size(), 6u) << sub.dump();  // 2 x 2 candidates + 2 controls
  WaitAll();
  json c = ShowDecided("lr", round1);
  ASSERT_EQ(c["rounds"].size(), 1u) << c.dump(2);
  const json& r1 = c["rounds"][0];
  EXPECT_EQ(r1["kind"], "sweep");
  EXPECT_EQ(r1["kept_candidate"], "matrix_lr=0.02") << r1.dump(2);
  EXPECT_EQ(r1["head_recipe_hash"], base_hash);
  ASSERT_TRUE(r1["decision"].is_object()) << r1.dump(2);
  EXPECT_EQ(r1["decision"]["kept"], "matrix_lr=0.02");
  const json* kept = FindCandidate(r1["decision"], "matrix_lr=0.02");
  ASSERT_NE(kept, nullptr) << r1.dump(2);
  EXPECT_EQ((*kept)["decision"], "keep");
  EXPECT_EQ((*kept)["stats"]["n"], 2);
  EXPECT_NEAR((*kept)["stats"]["mean"].get<double>(), 1.2, 1e-9);
  EXPECT_NEAR((*kept)["stats"]["sd"].get<double>(), 0.0, 1e-12);
  EXPECT_NEAR((*kept)["head"]["mean"].get<double>(), 1.4, 1e-9);
  EXPECT_GE((*kept)["head"]["n"].get<int>(), 2);
  EXPECT_NEAR((*kept)["improvement"].get<double>(), 0.2, 1e-9);
  EXPECT_TRUE((*kept)["band"].is_number()) << kept->dump();
  const json* diverged = FindCandidate(r1["decision"], "matrix_lr=0.06");
  ASSERT_NE(diverged, nullptr);
  EXPECT_EQ((*diverged)["decision"], "discard");
  EXPECT_EQ((*diverged)["stats"]["n"], 0) << diverged->dump();
  // The head advanced to the kept candidate.
  const std::string head1 = c["head_recipe_hash"];
  EXPECT_NE(head1, base_hash);
  EXPECT_NEAR(c["head_recipe"]["matrix_lr"].get<double>(), 0.02, 1e-12) << c.dump(2);
  ASSERT_EQ(c["head_history"].size(), 2u) << c.dump(2);
  EXPECT_EQ(c["head_history"][1]["candidate"], "matrix_lr=0.02");
  EXPECT_EQ(c["head_history"][1]["round_id"], round1);

  // Results carry the decisions: keep / discard for candidates, control for the head runs.
  auto rows = ResultsByName("lr");
  ASSERT_EQ(rows["matrix_lr=0.02"].size(), 2u);
  for (const auto& e : rows["matrix_lr=0.02"]) {
    EXPECT_EQ(e["decision"], "keep") << e.dump();
    EXPECT_NEAR(e["val_bpb"].get<double>(), 1.2, 1e-9);
  }
  ASSERT_EQ(rows["matrix_lr=0.06"].size(), 2u);
  for (const auto& e : rows["matrix_lr=0.06"]) {
    EXPECT_EQ(e["decision"], "discard") << e.dump();
    EXPECT_EQ(e["state"], "diverged") << e.dump();
  }
  ASSERT_EQ(rows["head"].size(), 2u);
  for (const auto& e : rows["head"]) EXPECT_EQ(e["decision"], "control") << e.dump();
  json best =
      XvctlJson({"results", "--json", "--campaign", "lr", "--sort", "val_bpb", "--limit", "3"});
  ASSERT_EQ(best["experiments"].size(), 3u) << best.dump(2);
  EXPECT_EQ(best["experiments"][0]["name"], "matrix_lr=0.02");
  EXPECT_EQ(best["experiments"][1]["name"], "matrix_lr=0.02");
  EXPECT_EQ(best["experiments"][2]["name"], "head");
  CommandResult bad_sort = Xvctl({"results", "--sort", "loss"});
  EXPECT_EQ(bad_sort.exit_code, 2);
  EXPECT_NE(bad_sort.err.find("--sort"), std::string::npos) << bad_sort.err;
  json keeps = XvctlJson({"results", "--json", "--decision", "keep"});
  EXPECT_EQ(keeps["experiments"].size(), 2u) << keeps.dump(2);

  // Paging (issue 18): a page of the newest rows, how many more match, and the cursor: the pages
  // of 2 walked with --before hold every row once, in order.
  json every = XvctlJson({"results", "--json", "--campaign", "lr", "--all"});
  const json& all_rows = every["experiments"];
  ASSERT_GE(all_rows.size(), 5u) << every.dump(2);
  EXPECT_FALSE(every["more"].get<bool>());
  const size_t n = all_rows.size();
  json first = XvctlJson({"results", "--json", "--campaign", "lr", "--limit", "2"});
  ASSERT_EQ(first["experiments"].size(), 2u) << first.dump(2);
  EXPECT_TRUE(first["more"].get<bool>());
  EXPECT_EQ(first["matching"], n);
  EXPECT_EQ(first["experiments"][0]["id"], all_rows[n - 2]["id"]);
  EXPECT_EQ(first["experiments"][1]["id"], all_rows[n - 1]["id"]);
  EXPECT_EQ(first["next_before"], all_rows[n - 2]["id"]);
  std::vector<int64_t> walked;
  for (json page = first;;) {
    const json& rows = page["experiments"];
    std::vector<int64_t> ids;
    for (const auto& e : rows) ids.push_back(e["id"].get<int64_t>());
    walked.insert(walked.begin(), ids.begin(), ids.end());
    if (!page["more"].get<bool>()) break;
    ASSERT_LT(walked.size(), n) << page.dump(2);
    page = XvctlJson({"results", "--json", "--campaign", "lr", "--limit", "2", "--before",
                      std::to_string(page["next_before"].get<int64_t>())});
    EXPECT_EQ(page["matching"], n - walked.size()) << page.dump(2);
  }
  ASSERT_EQ(walked.size(), n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(walked[i], all_rows[i]["id"].get<int64_t>()) << i;
  CommandResult paged = Xvctl({"results", "--campaign", "lr", "--limit", "2"});
  ASSERT_EQ(paged.exit_code, 0) << paged.err;
  EXPECT_NE(paged.out.find("2 newest shown; " + std::to_string(n - 2) +
                           " more match: next page: xvctl results --campaign lr --before " +
                           std::to_string(all_rows[n - 2]["id"].get<int64_t>()) + " --limit 2"),
            std::string::npos)
      << paged.out;
  json best2 =
      XvctlJson({"results", "--json", "--campaign", "lr", "--sort", "val_bpb", "--limit", "2"});
  EXPECT_EQ(best2["next_offset"], 2) << best2.dump(2);
  json third = XvctlJson({"results", "--json", "--campaign", "lr", "--sort", "val_bpb", "--limit",
                          "1", "--offset", "2"});
  ASSERT_EQ(third["experiments"].size(), 1u) << third.dump(2);
  EXPECT_EQ(third["experiments"][0]["id"], best["experiments"][2]["id"]);
  EXPECT_EQ(third["matching"], n - 2);
  CommandResult mixed = Xvctl({"results", "--sort", "val_bpb", "--before", "3"});
  EXPECT_EQ(mixed.exit_code, 2) << mixed.out << mixed.err;
  EXPECT_NE(mixed.err.find("--before"), std::string::npos) << mixed.err;

  // The text views: the results table's decision/reason columns, campaign show's statistics.
  CommandResult table = Xvctl({"results", "--campaign", "lr", "--wide"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("decision  reason"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("keep"), std::string::npos) << table.out;
  CommandResult show = Xvctl({"campaign", "show", "lr"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("round " + std::to_string(round1) + " decision (noise_band, auto):"),
            std::string::npos)
      << show.out;
  EXPECT_NE(show.out.find("1.200000"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("head:      " + head1), std::string::npos) << show.out;

  // Failure map: 0.06 diverged twice, NaN rate 100%.
  json failures = XvctlJson({"results", "--failures", "--campaign", "lr", "--json"});
  ASSERT_EQ(failures["failures"].size(), 1u) << failures.dump(2);
  EXPECT_EQ(failures["failures"][0]["knob"], "matrix_lr");
  EXPECT_EQ(failures["failures"][0]["diverged"], 2);
  EXPECT_DOUBLE_EQ(failures["failures"][0]["nan_rate"].get<double>(), 1.0);
  CommandResult ftable = Xvctl({"results", "--failures", "--campaign", "lr"});
  EXPECT_NE(ftable.out.find("100.0%"), std::string::npos) << ftable.out;

  // Round 2 from the new head: 0.03 -> 1.3, worse than 1.2: nothing kept, the head stays.
  json sub2 = XvctlJson({"submit", "--campaign", "lr", "--sweep", "matrix_lr=0.03", "--json"});
  const int64_t round2 = sub2.value("round_id", int64_t{0});
  ASSERT_GT(round2, round1);
  WaitAll();
  c = ShowDecided("lr", round2);
  ASSERT_EQ(c["rounds"].size(), 2u);
  const json& r2 = c["rounds"][1];
  EXPECT_EQ(r2["head_recipe_hash"], head1);
  EXPECT_EQ(r2["kept_experiment_id"], 0) << r2.dump(2);
  EXPECT_TRUE(r2["decision"]["kept"].is_null()) << r2.dump(2);
  const json* worse = FindCandidate(r2["decision"], "matrix_lr=0.03");
  ASSERT_NE(worse, nullptr);
  EXPECT_EQ((*worse)["decision"], "discard");
  EXPECT_NEAR((*worse)["stats"]["mean"].get<double>(), 1.3, 1e-9);
  EXPECT_NEAR((*worse)["head"]["mean"].get<double>(), 1.2, 1e-9);
  EXPECT_EQ(c["head_recipe_hash"], head1);
  EXPECT_EQ(c["head_history"].size(), 2u);

  // list, pause, resume.
  json list = XvctlJson({"campaign", "list", "--json"});
  bool listed = false;
  for (const auto& l : list["campaigns"]) listed |= l["name"] == "lr";
  EXPECT_TRUE(listed) << list.dump(2);
  EXPECT_EQ(XvctlJson({"campaign", "pause", "lr", "--json"})["state"], "paused");
  EXPECT_EQ(XvctlJson({"campaign", "show", "lr", "--json"})["state"], "paused");
  EXPECT_EQ(XvctlJson({"campaign", "resume", "lr", "--json"})["state"], "active");
  CommandResult missing = Xvctl({"campaign", "show", "no-such-campaign"});
  EXPECT_EQ(missing.exit_code, 1);
  EXPECT_NE(missing.err.find("no-such-campaign"), std::string::npos) << missing.err;

  // With the daemon gone, show, list and the failure map read the database read-only.
  worker_.Stop();
  xvd_.Stop();
  json offline = XvctlJson({"campaign", "show", "lr", "--json"});
  EXPECT_EQ(offline["head_recipe_hash"], head1);
  ASSERT_EQ(offline["rounds"].size(), 2u) << offline.dump(2);
  EXPECT_EQ(offline["rounds"][0]["decision"]["kept"], "matrix_lr=0.02");
  EXPECT_EQ(XvctlJson({"campaign", "list", "--json"})["campaigns"].size(), 1u);
  json offline_failures = XvctlJson({"results", "--failures", "--campaign", "lr", "--json"});
  EXPECT_EQ(offline_failures, failures);
}

TEST_F(CampaignE2eTest, ManualPolicyDecideKeeps) {
  const std::string policy = WriteFile(
      "policy.yaml", "mode: noise_band\nreplicates: 1\nhead_controls: 2\ndecide: manual\n");
  json created = XvctlJson({"campaign", "create", "hand", "--recipe",
                            SourcePath("recipes/cpu-tiny.yaml"), "--policy", policy, "--json"});
  const std::string base_hash = created.value("head_recipe_hash", "");
  json sub = XvctlJson({"submit", "--campaign", "hand", "--candidate", "matrix_lr=0.05", "--json"});
  const int64_t round = sub.value("round_id", int64_t{0});
  ASSERT_GT(round, 0) << sub.dump();
  WaitAll();
  json c = XvctlJson({"campaign", "show", "hand", "--json"});
  ASSERT_EQ(c["rounds"].size(), 1u);
  EXPECT_EQ(c["rounds"][0]["state"], "open") << "a manual round waits for decide";

  auto rows = ResultsByName("hand");
  ASSERT_EQ(rows["matrix_lr=0.05"].size(), 1u);
  const int64_t exp_id = rows["matrix_lr=0.05"][0]["id"];

  CommandResult both = Xvctl({"decide", std::to_string(round), "--keep", std::to_string(exp_id),
                              "--none", "--reason", "x"});
  EXPECT_EQ(both.exit_code, 2) << both.err;
  EXPECT_NE(both.err.find("--keep/--none"), std::string::npos) << both.err;

  json decided = XvctlJson({"decide", std::to_string(round), "--keep", std::to_string(exp_id),
                            "--reason", "wider lr wins on quality by eye", "--json"});
  EXPECT_EQ(decided["state"], "decided") << decided.dump(2);
  EXPECT_EQ(decided["kept_experiment_id"], exp_id);
  c = XvctlJson({"campaign", "show", "hand", "--json"});
  EXPECT_NE(c["head_recipe_hash"], base_hash);
  EXPECT_NEAR(c["head_recipe"]["matrix_lr"].get<double>(), 0.05, 1e-12) << c.dump(2);
  ASSERT_EQ(c["head_history"].size(), 2u);
  EXPECT_NE(c["head_history"][1]["reason"].get<std::string>().find("manual"), std::string::npos)
      << c["head_history"].dump(2);

  // Deciding twice is refused.
  CommandResult twice = Xvctl({"decide", std::to_string(round), "--none", "--reason", "again"});
  EXPECT_NE(twice.exit_code, 0);
}

}  // namespace
}  // namespace xv::e2e
