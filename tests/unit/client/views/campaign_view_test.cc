#include "client/views/campaign_view.h"

#include <gtest/gtest.h>

#include "client/views/failure_summary_view.h"
#include "client/views/number_format.h"
#include "client/views/watch_event_view.h"
#include "daemon/sched/round_decider.h"
#include "daemon/sched/round_drift.h"

namespace xv::client {
namespace {

// A campaign with one round decided by the daemon's real decider, so the view reads the stored
// decision format as the daemon writes it.
v1::Campaign DecidedCampaign() {
  sched::AcceptancePolicy policy = sched::DefaultAcceptancePolicy(sched::AcceptanceMode::kWelch);
  std::vector<sched::RunOutcome> head;
  for (double v : {1.40, 1.41, 1.39, 1.40}) head.push_back({0, v, false, ""});
  sched::CandidateRuns better{"matrix_lr=0.03", {}};
  for (double v : {1.30, 1.31, 1.29, 1.30}) better.runs.push_back({0, v, false, ""});
  sched::CandidateRuns same{"matrix_lr=0.05", {}};
  for (double v : {1.40, 1.42, 1.38, 1.40}) same.runs.push_back({0, v, false, ""});
  sched::RoundDecision decision;
  EXPECT_TRUE(sched::RoundDecider().Decide(policy, head, {better, same}, &decision).ok());

  v1::Campaign c;
  c.set_id(3);
  c.set_name("lr");
  c.set_state("active");
  c.set_policy_json(R"({"mode":"welch","replicates":4})");
  c.set_base_recipe_hash("aaaabbbbccccddddeeee");
  c.set_head_recipe_hash("1111222233334444");
  c.set_head_recipe_json(R"({"matrix_lr":0.03})");
  v1::RoundInfo* r = c.add_rounds();
  r->set_id(7);
  r->set_kind("sweep");
  r->set_state("decided");
  r->set_decision_summary(decision.summary);
  r->set_decision_json(decision.ToJson().dump());
  r->set_kept_experiment_id(21);
  r->set_kept_candidate("matrix_lr=0.03");
  r->set_experiments(12);
  v1::RoundInfo* open = c.add_rounds();
  open->set_id(8);
  open->set_kind("candidates");
  open->set_state("open");
  open->set_experiments(4);
  open->set_unfinished(4);
  v1::HeadChange* h = c.add_head_history();
  h->set_recipe_hash("1111222233334444");
  h->set_round_id(7);
  h->set_experiment_id(21);
  h->set_candidate("matrix_lr=0.03");
  h->set_reason("kept");
  return c;
}

TEST(CampaignJson, ParsesPolicyHeadAndDecisionStatistics) {
  nlohmann::json j = CampaignJson(DecidedCampaign());
  EXPECT_EQ(j["name"], "lr");
  EXPECT_EQ(j["policy"]["replicates"], 4);
  EXPECT_DOUBLE_EQ(j["head_recipe"]["matrix_lr"].get<double>(), 0.03);
  ASSERT_EQ(j["rounds"].size(), 2u);
  const auto& d = j["rounds"][0]["decision"];
  ASSERT_TRUE(d.is_object());
  EXPECT_EQ(d["kept"], "matrix_lr=0.03");
  EXPECT_EQ(d["candidates"][0]["decision"], "keep");
  EXPECT_EQ(d["candidates"][0]["stats"]["n"], 4);
  EXPECT_NEAR(d["candidates"][0]["stats"]["mean"].get<double>(), 1.30, 1e-12);
  EXPECT_EQ(d["candidates"][1]["decision"], "discard");
  EXPECT_TRUE(j["rounds"][1]["decision"].is_null());
  EXPECT_EQ(j["head_history"][0]["experiment_id"], 21);
}

TEST(CampaignJson, UnparsableDecisionIsKeptAsText) {
  v1::Campaign c;
  c.add_rounds()->set_decision_json("manual: not json");
  nlohmann::json j = CampaignJson(c);
  EXPECT_TRUE(j["rounds"][0]["decision"].is_null());
  EXPECT_EQ(j["rounds"][0]["decision_text"], "manual: not json");
  EXPECT_TRUE(j["policy"].is_null());
}

TEST(RenderCampaign, ShowsRoundsAndEachCandidatesStatistics) {
  v1::Campaign c = DecidedCampaign();
  std::string text = RenderCampaign(c);
  nlohmann::json d = nlohmann::json::parse(c.rounds(0).decision_json());
  EXPECT_NE(text.find("campaign lr #3 (active)"), std::string::npos) << text;
  EXPECT_NE(text.find("head:      1111222233334444"), std::string::npos) << text;
  EXPECT_NE(text.find("matrix_lr=0.03 (#21)"), std::string::npos) << text;
  EXPECT_NE(text.find("round 7 decision (welch):"), std::string::npos) << text;
  // mean, sd and p of the kept candidate, as the decider stored them.
  const auto& kept = d["candidates"][0];
  EXPECT_NE(text.find("1.300000"), std::string::npos) << text;
  EXPECT_NE(text.find(FormatFixed(kept["stats"]["sd"].get<double>(), 6)), std::string::npos);
  EXPECT_NE(text.find(FormatFixed(kept["p"].get<double>(), 4)), std::string::npos) << text;
  EXPECT_NE(text.find("1.400000"), std::string::npos) << text;  // head mean
  EXPECT_NE(text.find("keep"), std::string::npos);
  EXPECT_NE(text.find("discard"), std::string::npos);
  // The open round has no statistics block.
  EXPECT_EQ(text.find("round 8 decision"), std::string::npos) << text;
}

TEST(RenderBudgetContract, ShowsEveryFieldAndTheHardDeadline) {
  // The stored, normalised form (daemon/engine/budget_contract.h BudgetContractToJson).
  EXPECT_EQ(
      RenderBudgetContract(
          R"({"eval_allowance_s":60,"max_concurrent":2,"startup_allowance_s":120,"time_budget_s":300})"),
      "time_budget_s=300, startup_allowance_s=120, eval_allowance_s=60 (hard deadline 480 s), "
      "max_concurrent=2");
  EXPECT_EQ(RenderBudgetContract(R"({"startup_allowance_s":300,"time_budget_s":2.5})"),
            "time_budget_s=2.5, startup_allowance_s=300, eval_allowance_s=the run's time budget "
            "(hard deadline 305 s), max_concurrent=no limit");
  EXPECT_EQ(RenderBudgetContract(R"({"eval_allowance_s":30,"startup_allowance_s":300})"),
            "time_budget_s=each recipe's own, startup_allowance_s=300, eval_allowance_s=30 "
            "(hard deadline time budget + 330 s), max_concurrent=no limit");
}

TEST(RenderBudgetContract, TheDefaultContractSaysWhatApplies) {
  const std::string defaults =
      "time_budget_s=each recipe's own, startup_allowance_s=300, eval_allowance_s=the run's time "
      "budget (hard deadline 2 x time budget + 300 s), max_concurrent=no limit";
  EXPECT_EQ(RenderBudgetContract(""), defaults);  // a campaign made implicitly by a Submit
  EXPECT_EQ(RenderBudgetContract("{}"), defaults);
  EXPECT_EQ(RenderBudgetContract(R"({"startup_allowance_s":300})"), defaults);
}

TEST(RenderBudgetContract, HidesNothingItDoesNotKnow) {
  EXPECT_EQ(RenderBudgetContract(R"({"max_concurrent":1,"max_gpu_hours":8})"),
            "time_budget_s=each recipe's own, startup_allowance_s=300, eval_allowance_s=the run's "
            "time budget (hard deadline 2 x time budget + 300 s), max_concurrent=1, "
            "max_gpu_hours=8");
  EXPECT_EQ(RenderBudgetContract("[1, 2]"), "[1, 2] (not a JSON object)");
}

TEST(RenderCampaign, ShowsTheBudgetContractWithoutJson) {
  v1::Campaign c = DecidedCampaign();
  c.set_budget_json(R"({"max_concurrent":2,"startup_allowance_s":300,"time_budget_s":5})");
  std::string text = RenderCampaign(c);
  EXPECT_NE(text.find("\nbudget:    time_budget_s=5, startup_allowance_s=300, eval_allowance_s=the "
                      "run's time budget (hard deadline 310 s), max_concurrent=2\n"),
            std::string::npos)
      << text;
}

TEST(RenderCampaignList, OneRowPerCampaignWithShortHeadHash) {
  v1::Campaign a = DecidedCampaign();
  v1::Campaign b;
  b.set_id(4);
  b.set_name("wd");
  b.set_state("paused");
  std::string text = RenderCampaignList({a, b});
  EXPECT_NE(text.find("111122223333 "), std::string::npos) << text;
  EXPECT_EQ(text.find("1111222233334444"), std::string::npos) << text;
  EXPECT_NE(text.find("paused"), std::string::npos);
  EXPECT_NE(text.find("any"), std::string::npos);
}

TEST(FailureSummaryView, RendersCountsAndNanRatePercent) {
  v1::KnobFailure k;
  k.set_knob("matrix_lr");
  k.set_value("0.2");
  k.set_runs(4);
  k.set_diverged(3);
  k.set_crashed(1);
  k.set_nan_runs(3);
  k.set_nan_rate(0.75);
  std::string text = RenderFailureSummary({k});
  EXPECT_NE(text.find("NaN rate"), std::string::npos);
  EXPECT_NE(text.find("75.0%"), std::string::npos) << text;
  nlohmann::json j = FailureSummaryJson({k});
  EXPECT_EQ(j["failures"][0]["diverged"], 3);
  EXPECT_DOUBLE_EQ(j["failures"][0]["nan_rate"].get<double>(), 0.75);
}

// Issue 14: a round's run order and its drift figures (as the daemon stores them).
TEST(CampaignView, ShowsTheRunOrderAndTheDrift) {
  v1::Campaign c = DecidedCampaign();
  v1::RoundInfo* r = c.mutable_rounds(0);
  r->set_order_seed(77);
  const char* arms[] = {"head", "a", "a", "head"};
  for (int i = 0; i < 4; ++i) {
    v1::RunSlot* slot = r->add_run_order();
    slot->set_position(i);
    slot->set_block(i / 2);
    slot->set_experiment_id(10 + i);
    slot->set_arm(arms[i]);
  }
  std::vector<sched::DriftRun> runs;
  for (int i = 0; i < 4; ++i) {
    sched::DriftRun d;
    d.experiment_id = 10 + i;
    d.arm = arms[i];
    d.control = d.arm == "head";
    d.val_bpb = 1.4;
    d.tok_per_sec = d.control ? 1000.0 + 10 * i : 990.0;
    d.steps = 100;
    d.started_s = i;
    runs.push_back(d);
  }
  r->set_drift_json(sched::MeasureRoundDrift(runs, {}).ToJson().dump());
  EXPECT_EQ(RenderRunOrder(*r), "seed 77: [0] head #10 a #11 | [1] a #12 head #13");
  const std::string drift = RenderDrift(r->drift_json());
  EXPECT_EQ(drift.rfind("tok/s head 1015 sd 21 (steps 100.0), a 990 sd 0 (steps 100.0) -2.5%", 0),
            0u)
      << drift;
  EXPECT_NE(drift.find("; controls' trend +3.0% over 3.0 s, spread +2.1%"), std::string::npos)
      << drift;
  const std::string text = RenderCampaign(c);
  EXPECT_NE(text.find("round " + std::to_string(r->id()) + " run order (seed 77: [0] head #10"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(" drift: tok/s head 1015"), std::string::npos) << text;
  const nlohmann::json j = RoundJson(*r);
  EXPECT_EQ(j["order_seed"], 77);
  ASSERT_EQ(j["run_order"].size(), 4u);
  EXPECT_EQ(j["run_order"][3]["arm"], "head");
  EXPECT_TRUE(j["drift"]["arms"].is_array());
  EXPECT_EQ(RenderRunOrder(v1::RoundInfo()), "");
  EXPECT_EQ(RenderDrift(""), "");

  // `xvctl watch`: the round's decision event carries the same figures (round_table.cc).
  v1::WatchEvent ev;
  ev.set_time("2026-12-01T10:00:00.000Z");
  ev.set_kind("decision");
  ev.set_round_id(r->id());
  ev.set_detail("welch@0.95: no keep; 1 discarded (1 not_significant)");
  ev.set_json(
      nlohmann::json{{"summary", ev.detail()}, {"drift", nlohmann::json::parse(r->drift_json())}}
          .dump());
  const std::string line = WatchEventLine(ev);
  EXPECT_NE(
      line.find("decided: welch@0.95: no keep; 1 discarded (1 not_significant); drift: " + drift),
      std::string::npos)
      << line;
  ev.set_json(R"({"summary":"no keep"})");
  EXPECT_EQ(WatchEventLine(ev).find("drift"), std::string::npos);
}

}  // namespace
}  // namespace xv::client
