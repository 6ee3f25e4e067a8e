// The compact answers of `xvctl mcp` (client/mcp/mcp_answers.h): empties dropped, one-line
// experiment summaries, rounds with the figures of their decision, and byte bounds on `results`
// and `campaign_show` for a 50-experiment campaign of 10 decided rounds.
#include "client/mcp/mcp_answers.h"

#include <gtest/gtest.h>

#include <string>

namespace xv::client {
namespace {

using nlohmann::json;

// A finished experiment with realistic figures and text lengths (as the daemon fills them).
v1::Experiment Finished(int64_t id, int64_t round, const std::string& name, double bpb) {
  v1::Experiment e;
  e.set_id(id);
  e.set_campaign_id(1);
  e.set_round_id(round);
  e.set_name(name);
  e.set_overrides_json("{\"matrix_lr\": 0.0" + std::to_string(id % 9 + 1) + "}");
  e.set_recipe_hash(std::string(64, 'a'));
  e.set_config_hash(std::string(64, 'b'));
  e.set_seed(42 + id);
  e.set_trainer("libtorch");
  e.set_state("succeeded");
  e.set_attempt(1);
  e.set_worker("gpu-box-0");
  e.set_device_name("NVIDIA H100 80GB HBM3");
  e.set_decision(id % 5 == 0 ? "keep" : "discard");
  e.set_decision_reason("improvement 0.0123 over the head is inside the noise band 0.0200 (k=2)");
  e.set_round_decision("kept matrix_lr=0.04: improvement 0.031 > band 0.02 (p=0.003)");
  e.set_role(name == "head" ? "control" : "candidate");
  e.set_created_at("2026-12-01T20:00:00Z");
  e.set_finished_at("2026-12-01T20:05:00Z");
  e.set_stderr_tail(std::string(2048, 'x'));
  v1::Result* r = e.mutable_result();
  r->set_val_bpb(bpb);
  r->set_training_seconds(300.0123);
  r->set_total_seconds(331.456);
  r->set_num_steps(1234);
  r->set_total_tokens(645922816);
  r->set_tok_per_sec(2152742.123456);
  r->set_mfu_percent(39.87654);
  r->set_peak_vram_mb(44123.456789);
  r->set_num_params(50331648);
  r->set_metric_version("bpb-v1");
  r->set_attention_backend("flash");
  r->set_summary_json(std::string(600, 's'));
  return e;
}

// A decided round of 5 runs (4 candidates, 1 head control) with the decider's statistics.
v1::RoundInfo DecidedRound(int64_t id) {
  v1::RoundInfo r;
  r.set_id(id);
  r.set_kind("candidates");
  r.set_state("decided");
  r.set_decision_summary("kept matrix_lr=0.04: improvement 0.031 > band 0.02 (p=0.003)");
  r.set_kept_candidate("matrix_lr=0.04");
  r.set_kept_experiment_id(id * 5);
  r.set_head_recipe_hash(std::string(64, 'c'));
  r.set_experiments(5);
  r.set_unfinished(0);
  json candidates = json::array();
  for (int i = 0; i < 4; ++i) {
    candidates.push_back(
        {{"name", "matrix_lr=0.0" + std::to_string(i + 1)},
         {"decision", i == 3 ? "keep" : "discard"},
         {"reason", "inside_band"},
         {"reason_text", "improvement 0.0123 is inside the noise band 0.0200"},
         {"passed", i == 3},
         {"stats",
          {{"n_runs", 1}, {"n", 1}, {"nan_rate", 0}, {"mean", 0.99712345678}, {"sd", nullptr}}},
         {"head",
          {{"n_runs", 3}, {"n", 3}, {"nan_rate", 0}, {"mean", 1.0012345678}, {"sd", 0.00412345}}},
         {"improvement", 0.0041111111},
         {"t", 1.2345678},
         {"df", 2.345678},
         {"p", 0.123456789},
         {"alpha", 0.1},
         {"band", 0.02},
         {"band_k", 2}});
  }
  r.set_decision_json(
      json({{"mode", "auto"}, {"head_runs", 3}, {"candidates", candidates}}).dump());
  return r;
}

std::vector<v1::Experiment> FiftyExperiments() {
  std::vector<v1::Experiment> rows;
  for (int64_t id = 1; id <= 50; ++id) {
    const int64_t round = (id - 1) / 5 + 1;
    rows.push_back(Finished(id, round,
                            id % 5 == 1 ? "head" : "matrix_lr=0.0" + std::to_string(id % 5),
                            1.0 - 0.001 * static_cast<double>(id)));
  }
  return rows;
}

size_t Bytes(const json& j) { return j.dump().size(); }

TEST(McpAnswersTest, DropEmptyRemovesNullsAndEmptiesButKeepsZerosAndFalse) {
  json in = {{"a", nullptr}, {"b", ""},    {"c", json::array()},    {"d", json::object()},
             {"e", 0},       {"f", false}, {"g", {{"h", nullptr}}}, {"i", {1, nullptr}},
             {"j", "x"}};
  EXPECT_EQ(DropEmpty(in), json({{"e", 0}, {"f", false}, {"i", {1, nullptr}}, {"j", "x"}}));
}

TEST(McpAnswersTest, ExperimentSummaryHasTheFiguresOfADecisionInOneShortLine) {
  const v1::Experiment e = Finished(7, 2, "matrix_lr=0.02", 0.9871234567);
  const json s = ExperimentSummary(e);
  EXPECT_EQ(s["id"], 7);
  EXPECT_EQ(s["round"], 2);
  EXPECT_EQ(s["name"], "matrix_lr=0.02");
  EXPECT_EQ(s["state"], "succeeded");
  EXPECT_DOUBLE_EQ(s["val_bpb"].get<double>(), 0.987123);
  EXPECT_EQ(s["steps"], 1234);
  EXPECT_DOUBLE_EQ(s["tok_per_sec"].get<double>(), 2152742);
  EXPECT_DOUBLE_EQ(s["peak_mem_mb"].get<double>(), 44123.5);
  EXPECT_EQ(s["decision"], "discard");
  EXPECT_EQ(s["reason"], e.decision_reason());
  EXPECT_FALSE(s.contains("stderr_tail"));
  EXPECT_FALSE(s.contains("failure_kind"));
  EXPECT_LT(Bytes(s), 260u) << s.dump();
  // A failure says why in 160 bytes at most; a running one its progress and last loss.
  v1::Experiment failed = Finished(8, 2, "matrix_lr=0.5", 0);
  failed.clear_result();
  failed.set_state("diverged");
  failed.set_failure_kind("diverged");
  failed.set_failure_detail(std::string(5000, 'n'));
  const json f = ExperimentSummary(failed);
  EXPECT_EQ(f["failure_kind"], "diverged");
  EXPECT_EQ(f["failure_detail"].get<std::string>().size(), 160u);
  EXPECT_FALSE(f.contains("val_bpb"));
  v1::Experiment running = Finished(9, 2, "matrix_lr=0.3", 0);
  running.clear_result();
  running.set_state("running");
  running.set_progress(0.4321);
  running.set_last_loss(3.14159);
  const json r = ExperimentSummary(running);
  EXPECT_DOUBLE_EQ(r["progress"].get<double>(), 0.432);
  EXPECT_DOUBLE_EQ(r["last_loss"].get<double>(), 3.1416);
}

TEST(McpAnswersTest, ResultsOfAFiftyExperimentCampaignAreBounded) {
  const std::vector<v1::Experiment> rows = FiftyExperiments();
  // Default: the 20 most recent.
  const json page = ResultsAnswer(rows, ResultsPage{});
  EXPECT_EQ(page["count"], 20);
  EXPECT_EQ(page["total"], 50);
  EXPECT_EQ(page["left_out"], 30);
  EXPECT_EQ(page["experiments"][0]["id"], 31);
  EXPECT_LE(Bytes(page), 5000u) << Bytes(page);
  // All 50 at once stay under 12 KB (whole rows were ~3 KB each).
  ResultsPage all;
  all.limit = 0;
  const json everything = ResultsAnswer(rows, all);
  EXPECT_EQ(everything["count"], 50);
  EXPECT_LE(Bytes(everything), 12000u) << Bytes(everything);
  // A round, ids, and a cursor.
  ResultsPage round;
  round.round_id = 3;
  const json r3 = ResultsAnswer(rows, round);
  EXPECT_EQ(r3["count"], 5);
  for (const auto& e : r3["experiments"]) EXPECT_EQ(e["round"], 3);
  ResultsPage ids;
  ids.ids = {4, 40};
  const json two = ResultsAnswer(rows, ids);
  ASSERT_EQ(two["count"], 2);
  EXPECT_EQ(two["experiments"][1]["id"], 40);
  ResultsPage cursor;
  cursor.after_id = 10;
  cursor.limit = 15;
  const json next = ResultsAnswer(rows, cursor);
  EXPECT_EQ(next["experiments"][0]["id"], 11);
  EXPECT_EQ(next["count"], 15);
  EXPECT_EQ(next["next_after_id"], 25);
  cursor.after_id = 45;
  EXPECT_FALSE(ResultsAnswer(rows, cursor).contains("next_after_id"));
}

TEST(McpAnswersTest, CampaignShowOfTenDecidedRoundsIsBoundedAndKeepsTheLatest) {
  v1::Campaign c;
  c.set_id(1);
  c.set_name("night");
  c.set_state("active");
  c.set_policy_json(R"({"mode":"welch","confidence":0.9,"replicates":1,"head_controls":1})");
  c.set_budget_json(R"({"time_budget_s":300})");
  c.set_head_recipe_hash(std::string(64, 'd'));
  json recipe = json::object();
  for (int i = 0; i < 40; ++i) recipe["knob_number_" + std::to_string(i)] = 0.001 * i;
  c.set_head_recipe_json(recipe.dump());
  for (int64_t round = 1; round <= 10; ++round) {
    *c.add_rounds() = DecidedRound(round);
    v1::HeadChange* h = c.add_head_history();
    h->set_recipe_hash(std::string(64, 'e'));
    h->set_round_id(round);
    h->set_experiment_id(round * 5);
    h->set_candidate("matrix_lr=0.04");
    h->set_reason("kept");
  }
  const json latest = CampaignSummary(c, 5, true);
  ASSERT_EQ(latest["rounds"].size(), 5u);
  EXPECT_EQ(latest["rounds"][0]["id"], 6);
  EXPECT_EQ(latest["rounds_total"], 10);
  EXPECT_EQ(latest["rounds_left_out"], 5);
  EXPECT_EQ(latest["head_history"].size(), 5u);
  EXPECT_EQ(latest["head_recipe"].size(), 40u);
  const json& cand = latest["rounds"][4]["candidates"][3];
  EXPECT_EQ(cand["decision"], "keep");
  EXPECT_DOUBLE_EQ(cand["mean"].get<double>(), 0.997123);
  EXPECT_FALSE(cand.contains("sd"));  // null: one run
  EXPECT_DOUBLE_EQ(latest["rounds"][4]["head_mean"].get<double>(), 1.001235);
  EXPECT_EQ(latest["rounds"][4]["head_n"], 3);
  EXPECT_LE(Bytes(latest), 7000u) << Bytes(latest);
  // Every round of the 50-experiment campaign: about 1 KB a round of 4 candidates (was 3-5 KB).
  const json all = CampaignSummary(c, 0, true);
  EXPECT_EQ(all["rounds"].size(), 10u);
  EXPECT_FALSE(all.contains("rounds_left_out"));
  EXPECT_LE(Bytes(all), 13000u) << Bytes(all);
  EXPECT_LE((Bytes(all) - Bytes(latest)) / 5, 1200u);
  EXPECT_FALSE(CampaignSummary(c, 1, false).contains("head_recipe"));
}

TEST(McpAnswersTest, StatusSummaryCarriesTheLastLossOfRunningExperiments) {
  v1::StatusResponse resp;
  resp.set_queued(3);
  resp.set_running(1);
  v1::WorkerInfo* w = resp.add_workers();
  w->set_name("w1");
  w->set_state("busy");
  w->set_current_experiment_id(5);
  v1::Experiment* e = resp.add_active();
  e->set_id(5);
  e->set_name("matrix_lr=0.02");
  e->set_state("running");
  e->set_progress(0.25);
  e->set_last_loss(4.5678);
  const json s = StatusSummary(resp, "unix:/x");
  EXPECT_EQ(s["queued"], 3);
  EXPECT_EQ(s["workers"][0]["running"], 5);
  EXPECT_DOUBLE_EQ(s["active"][0]["last_loss"].get<double>(), 4.5678);
  EXPECT_DOUBLE_EQ(s["active"][0]["progress"].get<double>(), 0.25);
  EXPECT_EQ(s["write_mode"], "read-write");
}

TEST(McpAnswersTest, EtaIsTheMedianRunTimesTheWavesOverTheWorkers) {
  const json eta = EtaEstimate({10, 30, 20, -1}, 5, 2);
  EXPECT_EQ(eta["eta_s"], 60);  // median 20 s x ceil(5 / 2) = 3 waves
  EXPECT_NE(eta["basis"].get<std::string>().find("3 most recent"), std::string::npos) << eta.dump();
  EXPECT_EQ(EtaEstimate({10, 20}, 2, 4)["eta_s"], 15);  // even count: the mean of the middle two
  EXPECT_FALSE(EtaEstimate({}, 2, 1).contains("eta_s"));
  EXPECT_FALSE(EtaEstimate({10}, 2, 0).contains("eta_s"));
  EXPECT_NE(EtaEstimate({10}, 2, 0)["basis"].get<std::string>().find("no worker"),
            std::string::npos);
}

}  // namespace
}  // namespace xv::client
