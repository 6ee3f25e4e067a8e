// Campaigns, rounds and automatic keep/discard decisions end to end in one process: a real
// DaemonServer (SQLite file, gRPC over a unix socket), real Campaigns/Experiments clients, and a
// scripted fake worker on a real Session stream whose val_bpb is a known function of the recipe
// plus seeded noise (sd 0.0005): matrix_lr 0.05 is 0.01 bpb better (20 sigma), every other knob
// value has no effect, and chosen seeds of a chosen config diverge.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>
#include <nlohmann/json.hpp>

#include "daemon/api/daemon_server.h"
#include "tests/integration/daemon_fake_worker.h"
#include "tests/integration/in_process_daemon.h"
#include "xv/v1/experiments.grpc.pb.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::daemon {
namespace {

using namespace std::chrono_literals;
using fake::FakeWorker;
using nlohmann::json;

std::string CpuTinyYaml() {
  const char* src = std::getenv("XV_SOURCE_DIR");
  std::ifstream f(std::string(src ? src : ".") + "/recipes/cpu-tiny.yaml");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

using fake::ScriptedValBpb;
using fake::SummaryJson;

class DaemonCampaign : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fake::FreshStateDir("xvd-campaign");
    Status s = fake::StartInProcessDaemon(fake::FastDaemonOptions(dir_, 3000), &server_, &channel_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    experiments_ = xv::v1::Experiments::NewStub(channel_);
    campaigns_ = xv::v1::Campaigns::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  grpc::Status Create(const std::string& name, const std::string& policy, xv::v1::Campaign* out,
                      const std::string& budget_json = "") {
    xv::v1::CreateCampaignRequest req;
    req.set_name(name);
    req.set_base_recipe_yaml(CpuTinyYaml());
    req.set_recipe_name("cpu-tiny");
    req.set_policy(policy);
    req.set_budget_json(budget_json);
    grpc::ClientContext ctx;
    return campaigns_->CreateCampaign(&ctx, req, out);
  }

  // Submits a round built from the campaign head: one candidate per "k=v[,k2=v2]" string.
  grpc::Status SubmitRound(const std::string& campaign, const std::vector<std::string>& candidates,
                           xv::v1::SubmitResponse* resp, const std::string& kind = "sweep") {
    xv::v1::SubmitRequest req;
    req.set_campaign(campaign);
    req.set_kind(kind);
    for (const auto& c : candidates) {
      auto* cand = req.add_candidates();
      std::stringstream ss(c);
      std::string pair;
      while (std::getline(ss, pair, ',')) {
        auto eq = pair.find('=');
        auto* o = cand->add_overrides();
        o->set_key(pair.substr(0, eq));
        o->set_value(pair.substr(eq + 1));
      }
    }
    grpc::ClientContext ctx;
    return experiments_->Submit(&ctx, req, resp);
  }

  xv::v1::Campaign GetCampaign(const std::string& name) {
    xv::v1::GetCampaignRequest req;
    req.set_name(name);
    xv::v1::Campaign c;
    grpc::ClientContext ctx;
    grpc::Status s = campaigns_->GetCampaign(&ctx, req, &c);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return c;
  }

  std::vector<xv::v1::Experiment> List(const xv::v1::ListExperimentsRequest& req) {
    xv::v1::ListExperimentsResponse resp;
    grpc::ClientContext ctx;
    EXPECT_TRUE(experiments_->ListExperiments(&ctx, req, &resp).ok());
    return {resp.experiments().begin(), resp.experiments().end()};
  }

  std::vector<xv::v1::Experiment> RoundExperiments(int64_t round_id) {
    xv::v1::ListExperimentsRequest req;
    req.set_round_id(round_id);
    return List(req);
  }

  // Polls until the round is decided (or 20 s pass); returns it.
  xv::v1::RoundInfo WaitDecided(const std::string& campaign, int64_t round_id) {
    for (int i = 0; i < 400; ++i) {
      const xv::v1::Campaign c = GetCampaign(campaign);
      for (const auto& r : c.rounds()) {
        if (r.id() == round_id && r.state() == "decided") return r;
      }
      std::this_thread::sleep_for(50ms);
    }
    ADD_FAILURE() << "round " << round_id << " was not decided";
    return {};
  }

  // Runs `n` assignments on a fresh scripted worker: each reports ScriptedValBpb, except the
  // runs `diverge` says diverge. Returns the experiment ids it ran.
  std::vector<int64_t> RunScripted(const std::string& worker_name, int n,
                                   const std::function<bool(const json&)>& diverge = nullptr) {
    return fake::RunScriptedWorker(channel_, worker_name, n, diverge, "loss is nan at step 12\n");
  }

  std::filesystem::path dir_;
  std::unique_ptr<DaemonServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xv::v1::Experiments::Stub> experiments_;
  std::unique_ptr<xv::v1::Campaigns::Stub> campaigns_;
};

const char* kPolicy = "mode: welch\nreplicates: 3\nhead_controls: 3\nconfidence: 0.95\n";

TEST_F(DaemonCampaign, ClearlyBetterCandidateIsKeptAndHeadAdvancesThenZeroEffectIsDiscarded) {
  xv::v1::Campaign created;
  grpc::Status gs = Create("lr", kPolicy, &created);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  const std::string base_hash = created.head_recipe_hash();
  EXPECT_EQ(created.base_recipe_hash(), base_hash);
  ASSERT_EQ(created.head_history_size(), 1);
  EXPECT_EQ(created.head_history(0).reason(), "base");
  EXPECT_EQ(json::parse(created.policy_json()).at("replicates"), 3);

  // Round 1: a 20-sigma better candidate and a zero-effect one, 3 replicates each + 3 controls.
  xv::v1::SubmitResponse r1;
  gs = SubmitRound("lr", {"matrix_lr=0.05", "weight_decay=0.1"}, &r1);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  ASSERT_EQ(r1.experiment_ids_size(), 9);
  std::vector<xv::v1::Experiment> exps = RoundExperiments(r1.round_id());
  int controls = 0;
  std::set<int64_t> control_seeds;
  for (const auto& e : exps) {
    if (e.role() == "control") {
      ++controls;
      control_seeds.insert(e.seed());
      EXPECT_EQ(e.name(), "head");
      EXPECT_EQ(e.decision(), "control");
    }
    EXPECT_EQ(e.state(), "queued");
  }
  EXPECT_EQ(controls, 3);
  EXPECT_EQ(control_seeds.size(), 3u);

  EXPECT_EQ(RunScripted("host:cpu0", 9).size(), 9u);
  xv::v1::RoundInfo round = WaitDecided("lr", r1.round_id());
  EXPECT_EQ(round.kind(), "sweep");
  EXPECT_EQ(round.kept_candidate(), "matrix_lr=0.05");
  EXPECT_FALSE(round.decision_summary().empty());
  const json decision = json::parse(round.decision_json());
  EXPECT_EQ(decision.at("kept"), "matrix_lr=0.05");
  EXPECT_EQ(decision.at("head").at("n"), 3);
  ASSERT_EQ(decision.at("candidates").size(), 2u);
  const json& better = decision.at("candidates")[0];
  EXPECT_EQ(better.at("decision"), "keep");
  EXPECT_EQ(better.at("stats").at("n"), 3);
  EXPECT_LT(better.at("p").get<double>(), 0.001);
  EXPECT_NEAR(better.at("improvement").get<double>(), 0.01, 0.003);
  EXPECT_EQ(decision.at("candidates")[1].at("decision"), "discard");

  for (const auto& e : RoundExperiments(r1.round_id())) {
    EXPECT_EQ(e.state(), "succeeded");
    EXPECT_EQ(e.round_decision(), round.decision_summary());
    if (e.role() == "control") {
      EXPECT_EQ(e.decision(), "control");
    } else if (e.name() == "matrix_lr=0.05") {
      EXPECT_EQ(e.decision(), "keep");
      EXPECT_EQ(e.decision_reason().rfind("kept", 0), 0u) << e.decision_reason();
    } else {
      EXPECT_EQ(e.decision(), "discard");
      EXPECT_NE(e.decision_reason().find("not_significant"), std::string::npos)
          << e.decision_reason();
    }
  }
  xv::v1::Campaign after = GetCampaign("lr");
  EXPECT_NE(after.head_recipe_hash(), base_hash);
  EXPECT_DOUBLE_EQ(json::parse(after.head_recipe_json()).at("matrix_lr").get<double>(), 0.05);
  ASSERT_EQ(after.head_history_size(), 2);
  EXPECT_EQ(after.head_history(1).candidate(), "matrix_lr=0.05");
  EXPECT_EQ(after.head_history(1).round_id(), r1.round_id());

  // Filters: decision keep finds the three kept runs; newest-first pages downwards.
  xv::v1::ListExperimentsRequest kept;
  kept.set_decision("keep");
  EXPECT_EQ(List(kept).size(), 3u);
  xv::v1::ListExperimentsRequest page;
  page.set_descending(true);
  page.set_limit(4);
  auto first_page = List(page);
  ASSERT_EQ(first_page.size(), 4u);
  EXPECT_EQ(first_page[0].id(), r1.experiment_ids(8));
  page.set_after_id(first_page[3].id());
  auto second_page = List(page);
  ASSERT_EQ(second_page.size(), 4u);
  EXPECT_EQ(second_page[0].id(), first_page[3].id() - 1);

  // Best first: the three kept runs lead; offset pages on.
  xv::v1::ListExperimentsRequest best;
  best.set_round_id(r1.round_id());
  best.set_order_by("val_bpb");
  best.set_limit(3);
  for (const auto& e : List(best)) EXPECT_EQ(e.name(), "matrix_lr=0.05");
  best.set_offset(3);
  best.set_limit(10);
  auto rest = List(best);
  ASSERT_EQ(rest.size(), 6u);
  for (size_t i = 1; i < rest.size(); ++i) {
    EXPECT_LE(rest[i - 1].result().val_bpb(), rest[i].result().val_bpb());
  }

  // Round 2 from the new head: a zero-effect candidate. The head controls are the identical
  // config and seeds as the kept runs, yet they run again (issue 14): a round's controls are
  // measured beside its candidates, never taken from another round. All 6 runs happen.
  xv::v1::SubmitResponse r2;
  gs = SubmitRound("lr", {"weight_decay=0.1"}, &r2, "candidates");
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  ASSERT_EQ(r2.experiment_ids_size(), 6);
  int controls2 = 0;
  for (const auto& e : RoundExperiments(r2.round_id())) {
    EXPECT_EQ(e.reused_from_id(), 0) << e.name();
    EXPECT_EQ(e.state(), "queued") << e.name();
    controls2 += e.role() == "control";
  }
  EXPECT_EQ(controls2, 3);
  // The round's run order: randomised blocks, each holding one run of both arms, recorded with
  // its seed; one worker receives the runs in exactly that order.
  const std::vector<int64_t> ran2 = RunScripted("host:cpu1", 6);
  const xv::v1::RoundInfo ordered = GetCampaign("lr").rounds(1);
  EXPECT_NE(ordered.order_seed(), 0);
  ASSERT_EQ(ordered.run_order_size(), 6);
  std::vector<int64_t> recorded;
  std::map<int, std::multiset<std::string>> blocks;
  for (const auto& slot : ordered.run_order()) {
    EXPECT_EQ(slot.position(), static_cast<int>(recorded.size()));
    recorded.push_back(slot.experiment_id());
    blocks[slot.block()].insert(slot.arm());
  }
  EXPECT_EQ(ran2, recorded);
  ASSERT_EQ(blocks.size(), 3u);
  for (const auto& [block, arms] : blocks) {
    EXPECT_EQ(arms, (std::multiset<std::string>{"head", "weight_decay=0.1"})) << "block " << block;
  }
  xv::v1::RoundInfo round2 = WaitDecided("lr", r2.round_id());
  EXPECT_EQ(round2.kept_experiment_id(), 0);
  const json d2 = json::parse(round2.decision_json());
  EXPECT_TRUE(d2.at("kept").is_null());
  EXPECT_EQ(d2.at("head").at("n"), 3);  // this round's own controls only (no pooling by default)
  EXPECT_EQ(d2.at("candidates")[0].at("decision"), "discard");
  xv::v1::Campaign final_campaign = GetCampaign("lr");
  EXPECT_EQ(final_campaign.head_recipe_hash(), after.head_recipe_hash());
  EXPECT_EQ(final_campaign.head_history_size(), 2);
  ASSERT_EQ(final_campaign.rounds_size(), 2);
  EXPECT_EQ(final_campaign.rounds(1).state(), "decided");

  // Round 3 confirms the same candidate with 5 fresh seeds: 45-49, after every seed the campaign
  // has run (42-44), for the head controls and the candidate alike; nothing is reused.
  xv::v1::SubmitResponse r3;
  {
    xv::v1::SubmitRequest req;
    req.set_campaign("lr");
    req.set_kind("confirm");
    req.set_replicates(5);
    auto* o = req.add_candidates()->add_overrides();
    o->set_key("weight_decay");
    o->set_value("0.1");
    grpc::ClientContext ctx;
    gs = experiments_->Submit(&ctx, req, &r3);
    ASSERT_TRUE(gs.ok()) << gs.error_message();
  }
  ASSERT_EQ(r3.experiment_ids_size(), 10);
  std::vector<int64_t> ran = RunScripted("host:cpu2", 10);
  ASSERT_EQ(ran.size(), 10u);
  for (int64_t id : ran) {
    xv::v1::GetExperimentRequest greq;
    greq.set_id(id);
    xv::v1::Experiment e;
    grpc::ClientContext ctx;
    ASSERT_TRUE(experiments_->GetExperiment(&ctx, greq, &e).ok());
    EXPECT_GE(e.seed(), 45);
    EXPECT_EQ(e.reused_from_id(), 0);
  }
  xv::v1::RoundInfo round3 = WaitDecided("lr", r3.round_id());
  EXPECT_EQ(round3.kind(), "confirm");
  const json d3 = json::parse(round3.decision_json());
  EXPECT_EQ(d3.at("candidates")[0].at("stats").at("n"), 5);
  EXPECT_EQ(d3.at("candidates")[0].at("decision"), "discard");
  EXPECT_EQ(d3.at("confirm").at("head").at("n"), 5);  // the fresh controls alone
  EXPECT_EQ(round3.decision_summary().rfind("confirm: head ", 0), 0u) << round3.decision_summary();
}

TEST_F(DaemonCampaign, CandidateWithANanReplicateIsNeverKept) {
  xv::v1::Campaign created;
  ASSERT_TRUE(Create("nan", kPolicy, &created).ok());
  xv::v1::SubmitResponse r;
  ASSERT_TRUE(SubmitRound("nan", {"matrix_lr=0.05"}, &r).ok());
  // Seed 43 of matrix_lr 0.05 diverges; its other two replicates are 20 sigma better.
  auto diverge = [](const json& recipe) {
    return recipe.at("matrix_lr").get<double>() == 0.05 && recipe.at("seed") == 43;
  };
  EXPECT_EQ(RunScripted("host:cpu0", 6, diverge).size(), 6u);
  xv::v1::RoundInfo round = WaitDecided("nan", r.round_id());
  EXPECT_EQ(round.kept_experiment_id(), 0);
  const json d = json::parse(round.decision_json());
  EXPECT_EQ(d.at("candidates")[0].at("reason"), "non_finite_replicate");
  EXPECT_NEAR(d.at("candidates")[0].at("stats").at("nan_rate").get<double>(), 1.0 / 3, 1e-9);
  EXPECT_EQ(GetCampaign("nan").head_recipe_hash(), created.head_recipe_hash());
  for (const auto& e : RoundExperiments(r.round_id())) {
    if (e.role() != "candidate") continue;
    EXPECT_EQ(e.decision(), "discard");
    if (e.state() == "diverged") EXPECT_EQ(e.stderr_tail(), "loss is nan at step 12\n");
  }

  // The failure map names the knob value that diverged.
  xv::v1::FailureSummaryRequest freq;
  freq.set_campaign("nan");
  xv::v1::FailureSummaryResponse failures;
  grpc::ClientContext ctx;
  ASSERT_TRUE(campaigns_->FailureSummary(&ctx, freq, &failures).ok());
  ASSERT_EQ(failures.knobs_size(), 1);
  EXPECT_EQ(failures.knobs(0).knob(), "matrix_lr");
  EXPECT_EQ(failures.knobs(0).value(), "0.05");
  EXPECT_EQ(failures.knobs(0).runs(), 3);
  EXPECT_EQ(failures.knobs(0).diverged(), 1);
  EXPECT_NEAR(failures.knobs(0).nan_rate(), 1.0 / 3, 1e-9);
}

TEST_F(DaemonCampaign, InvalidRoundsAreRefusedNamingTheFieldAndNothingIsQueued) {
  xv::v1::Campaign created;
  ASSERT_TRUE(Create("refuse", kPolicy, &created).ok());
  const double head_lr = json::parse(created.head_recipe_json()).at("matrix_lr").get<double>();
  struct Case {
    std::string candidate, field;
  } cases[] = {
      {"matrx_lr=0.05", "matrx_lr"},
      {"matrix_lr=" + std::to_string(head_lr), "no-op"},
      {"total_batch_size=3000", "total_batch_size"},
  };
  for (const auto& c : cases) {
    xv::v1::SubmitResponse r;
    grpc::Status gs = SubmitRound("refuse", {"weight_decay=0.1", c.candidate}, &r);
    EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << c.candidate;
    EXPECT_NE(gs.error_message().find(c.field), std::string::npos) << gs.error_message();
    EXPECT_NE(gs.error_message().find("candidate 2"), std::string::npos) << gs.error_message();
  }
  EXPECT_TRUE(List(xv::v1::ListExperimentsRequest()).empty());
  EXPECT_EQ(GetCampaign("refuse").rounds_size(), 0);

  // A bad policy and an unknown campaign are refused too.
  xv::v1::Campaign bad;
  grpc::Status gs = Create("bad", "confidence: 1.5\n", &bad);
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(gs.error_message().find("confidence"), std::string::npos) << gs.error_message();
  xv::v1::SubmitResponse r;
  gs = SubmitRound("nope", {"matrix_lr=0.05"}, &r);
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(gs.error_message().find("nope"), std::string::npos) << gs.error_message();
}

// The budget contract: its time budget replaces the recipe's (cpu-tiny says 25 s) for the base,
// the head and every run; each run's hard deadline is budget + startup + eval allowance
// (3 + 300 + 3); a candidate or recipe with another time budget is refused; a bad contract is
// refused naming the field.
TEST_F(DaemonCampaign, BudgetContractFixesTheTimeBudgetAndTheHardDeadlineOfEveryRun) {
  xv::v1::Campaign created;
  grpc::Status gs = Create("budget", kPolicy, &created, R"({"time_budget_s": 3})");
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  // The metric contract pins cpu-tiny's sequence_len and eval_tokens (issue 16).
  EXPECT_EQ(json::parse(created.budget_json()),
            json::parse(R"({"time_budget_s": 3, "startup_allowance_s": 300, "sequence_len": 256,
                            "eval_tokens": 16384})"));
  EXPECT_EQ(json::parse(created.head_recipe_json()).at("time_budget_s").get<double>(), 3.0);

  xv::v1::SubmitResponse round;
  gs = SubmitRound("budget", {"matrix_lr=0.05"}, &round);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  ASSERT_EQ(round.experiment_ids_size(), 6);  // 3 replicates + 3 head controls

  FakeWorker worker(channel_, "budget-worker");
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  worker.StartHeartbeats(100ms);
  for (int i = 0; i < round.experiment_ids_size(); ++i) {
    ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
    const auto& spec = msg.assign().spec();
    EXPECT_DOUBLE_EQ(spec.time_budget_s(), 3.0) << spec.experiment_id();
    EXPECT_DOUBLE_EQ(spec.hard_deadline_s(), 3.0 + 300.0 + 3.0) << spec.experiment_id();
    const json recipe = json::parse(spec.recipe_json());
    EXPECT_EQ(recipe.at("time_budget_s").get<double>(), 3.0);
    worker.SendEvent(spec.experiment_id(), spec.attempt(), 1, SummaryJson(ScriptedValBpb(recipe)));
    xv::v1::WorkerMessage fin;
    fin.mutable_finished()->set_experiment_id(spec.experiment_id());
    fin.mutable_finished()->set_attempt(spec.attempt());
    fin.mutable_finished()->set_state("succeeded");
    fin.mutable_finished()->set_last_seq(1);
    worker.Send(fin);
    const int64_t id = spec.experiment_id();
    ASSERT_TRUE(worker.ReadUntil(
        [&](auto& m) { return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == id; },
        &msg));
  }
  worker.Close();
  WaitDecided("budget", round.round_id());
  const size_t runs = List(xv::v1::ListExperimentsRequest()).size();

  // Another time budget is refused: as a candidate override, and as a round's own recipe.
  xv::v1::SubmitResponse r;
  gs = SubmitRound("budget", {"weight_decay=0.1", "time_budget_s=5"}, &r);
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(gs.error_message().find(
                "candidate 2 (time_budget_s=5): time_budget_s: fixed at 3 s by the campaign's "
                "budget contract"),
            std::string::npos)
      << gs.error_message();
  xv::v1::SubmitRequest with_recipe;
  with_recipe.set_campaign("budget");
  with_recipe.set_recipe_yaml(CpuTinyYaml());  // time_budget_s: 25
  {
    grpc::ClientContext ctx;
    gs = experiments_->Submit(&ctx, with_recipe, &r);
  }
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(gs.error_message().find("recipe: time_budget_s: fixed at 3 s"), std::string::npos)
      << gs.error_message();
  EXPECT_EQ(List(xv::v1::ListExperimentsRequest()).size(), runs);  // nothing queued

  // What val_bpb means is pinned too: another eval_tokens or sequence_len is refused by name.
  gs = SubmitRound("budget", {"eval_tokens=8192"}, &r);
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(gs.error_message().find("candidate 1 (eval_tokens=8192): eval_tokens: fixed at 16384 "
                                    "by the campaign's metric contract"),
            std::string::npos)
      << gs.error_message();
  gs = SubmitRound("budget", {"sequence_len=128"}, &r);
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(gs.error_message().find("sequence_len: fixed at 256 by the campaign's metric contract"),
            std::string::npos)
      << gs.error_message();
  EXPECT_EQ(List(xv::v1::ListExperimentsRequest()).size(), runs);
  // Training at another context is not a metric change: a train_sequence_len candidate is queued,
  // evaluated at the pinned sequence_len (only train_sequence_len is overridden).
  gs = SubmitRound("budget", {"train_sequence_len=128"}, &r);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  ASSERT_EQ(r.experiment_ids_size(), 6);  // 3 replicates + 3 head controls
  int trained_shorter = 0;
  for (const auto& e : RoundExperiments(r.round_id())) {
    if (e.name() != "train_sequence_len=128") continue;
    ++trained_shorter;
    EXPECT_EQ(json::parse(e.overrides_json()), json::parse(R"({"train_sequence_len": 128})"));
  }
  EXPECT_EQ(trained_shorter, 3);

  // Bad contracts are refused naming the field, and no campaign is made.
  const std::pair<std::string, std::string> bad[] = {
      {R"({"time_budjet_s": 2})", "budget.time_budjet_s: unknown field"},
      {R"({"time_budget_s": "2"})", "budget.time_budget_s: must be a number"},
      {R"({"time_budget_s": 0})", "budget.time_budget_s: must be a number of seconds in 1..86400"},
      {R"({"startup_allowance_s": -1})", "budget.startup_allowance_s"},
      {"[2]", "budget: expected a JSON object"},
      // 100,000 levels (200 KB): refused naming budget_json (its error once dumped the value,
      // recursing once per level on a gRPC thread: SIGSEGV); the size limit refuses it first.
      {std::string(100000, '[') + std::string(100000, ']'),
       "budget_json: 200000 bytes, over the limit of 16384"},
      // 1,000 levels (2 KB), under the size limit: the nesting limit refuses it.
      {std::string(1000, '[') + std::string(1000, ']'),
       "budget_json: nested deeper than 64 levels"},
      {R"({"time_budget_s": [1, 2, 3]})", "got an array of 3"},
  };
  for (const auto& [budget, field] : bad) {
    xv::v1::Campaign c;
    gs = Create("bad-budget", kPolicy, &c, budget);
    EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << budget;
    EXPECT_NE(gs.error_message().find(field), std::string::npos) << gs.error_message();
  }
  xv::v1::GetCampaignRequest get;
  get.set_name("bad-budget");
  xv::v1::Campaign none;
  grpc::ClientContext ctx;
  EXPECT_FALSE(campaigns_->GetCampaign(&ctx, get, &none).ok());
}

TEST_F(DaemonCampaign, ManualPolicyWaitsForDecideAndPausedCampaignsAreNotScheduled) {
  xv::v1::Campaign created;
  ASSERT_TRUE(Create("manual", std::string(kPolicy) + "decide: manual\n", &created).ok());
  {
    xv::v1::GetCampaignRequest req;
    req.set_name("manual");
    xv::v1::Campaign paused;
    grpc::ClientContext ctx;
    ASSERT_TRUE(campaigns_->PauseCampaign(&ctx, req, &paused).ok());
    EXPECT_EQ(paused.state(), "paused");
  }
  xv::v1::SubmitResponse r;
  ASSERT_TRUE(SubmitRound("manual", {"weight_decay=0.1"}, &r).ok());
  {
    FakeWorker idle(channel_, "host:idle");
    xv::v1::DaemonMessage msg;
    ASSERT_TRUE(idle.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
    std::this_thread::sleep_for(400ms);  // several scheduling passes
    idle.Close();
    for (const auto& m : idle.seen) EXPECT_FALSE(m.has_assign());
  }
  {
    xv::v1::GetCampaignRequest req;
    req.set_name("manual");
    xv::v1::Campaign resumed;
    grpc::ClientContext ctx;
    ASSERT_TRUE(campaigns_->ResumeCampaign(&ctx, req, &resumed).ok());
  }
  EXPECT_EQ(RunScripted("host:cpu0", 6).size(), 6u);
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(GetCampaign("manual").rounds(0).state(), "open");  // no automatic decision

  // Keeping a head control is refused; keeping the candidate moves the head.
  int64_t control = 0, candidate = 0;
  for (const auto& e : RoundExperiments(r.round_id())) {
    (e.role() == "control" ? control : candidate) = e.id();
  }
  xv::v1::DecideRequest dreq;
  dreq.set_round_id(r.round_id());
  dreq.set_keep_experiment_id(control);
  xv::v1::RoundInfo info;
  {
    grpc::ClientContext ctx;
    grpc::Status gs = campaigns_->Decide(&ctx, dreq, &info);
    EXPECT_EQ(gs.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(gs.error_message().find("keep_experiment_id"), std::string::npos);
  }
  dreq.set_keep_experiment_id(candidate);
  dreq.set_reason("simpler");
  {
    grpc::ClientContext ctx;
    grpc::Status gs = campaigns_->Decide(&ctx, dreq, &info);
    ASSERT_TRUE(gs.ok()) << gs.error_message();
  }
  EXPECT_EQ(info.state(), "decided");
  EXPECT_EQ(info.kept_candidate(), "weight_decay=0.1");
  xv::v1::Campaign c = GetCampaign("manual");
  ASSERT_EQ(c.head_history_size(), 2);
  EXPECT_EQ(c.head_history(1).reason(), "manual: simpler");
  EXPECT_NE(c.head_recipe_hash(), created.head_recipe_hash());
  {
    grpc::ClientContext ctx;
    grpc::Status gs = campaigns_->Decide(&ctx, dreq, &info);
    EXPECT_EQ(gs.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  }
}

// Issue 5: a campaign whose budget contract sets max_concurrent 1 never has more than one
// experiment assigned or running, while another campaign's work behind it in the queue takes the
// other idle workers (a limited campaign never leaves a worker idle while other work waits).
TEST_F(DaemonCampaign, MaxConcurrentCapsItsCampaignWhileOtherCampaignsUseTheIdleWorkers) {
  const std::string policy =
      "mode: welch\nreplicates: 2\nhead_controls: 2\nconfidence: 0.95\ndecide: manual\n";
  xv::v1::Campaign limited;
  grpc::Status gs = Create("limited", policy, &limited, R"({"max_concurrent": 1})");
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  EXPECT_EQ(json::parse(limited.budget_json()).at("max_concurrent"), 1);
  xv::v1::Campaign unlimited;
  gs = Create("unlimited", policy, &unlimited);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  // The limited campaign's experiments come first in the queue (lower ids, same priority).
  xv::v1::SubmitResponse lr, ur;
  ASSERT_TRUE(SubmitRound("limited", {"weight_decay=0.1"}, &lr).ok());
  ASSERT_TRUE(SubmitRound("unlimited", {"weight_decay=0.1"}, &ur).ok());
  ASSERT_EQ(lr.experiment_ids_size(), 4);  // 2 replicates + 2 head controls
  ASSERT_EQ(ur.experiment_ids_size(), 4);
  const std::set<int64_t> limited_ids(lr.experiment_ids().begin(), lr.experiment_ids().end());
  auto count = [&](const std::string& campaign, std::initializer_list<const char*> states) {
    xv::v1::ListExperimentsRequest req;
    req.set_campaign(campaign);
    int n = 0;
    for (const auto& e : List(req)) {
      for (const char* s : states) n += e.state() == s;
    }
    return n;
  };
  auto finish = [&](FakeWorker& w, const xv::v1::ExperimentSpec& spec) {
    w.SendEvent(spec.experiment_id(), spec.attempt(), 1,
                SummaryJson(ScriptedValBpb(json::parse(spec.recipe_json()))));
    xv::v1::WorkerMessage fin;
    fin.mutable_finished()->set_experiment_id(spec.experiment_id());
    fin.mutable_finished()->set_attempt(spec.attempt());
    fin.mutable_finished()->set_state("succeeded");
    fin.mutable_finished()->set_last_seq(1);
    w.Send(fin);
    xv::v1::DaemonMessage msg;
    const int64_t id = spec.experiment_id();
    ASSERT_TRUE(w.ReadUntil(
        [&](auto& m) { return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == id; },
        &msg));
  };
  auto next_assign = [](FakeWorker& w, xv::v1::ExperimentSpec* spec) {
    xv::v1::DaemonMessage msg;
    ASSERT_TRUE(w.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
    *spec = msg.assign().spec();
  };

  std::vector<std::unique_ptr<FakeWorker>> workers;
  std::vector<xv::v1::ExperimentSpec> held(3);
  int limited_holder = -1;
  for (int i = 0; i < 3; ++i) {
    workers.push_back(std::make_unique<FakeWorker>(channel_, "host:w" + std::to_string(i)));
    xv::v1::DaemonMessage msg;
    ASSERT_TRUE(workers[i]->ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
    workers[i]->StartHeartbeats(100ms);
  }
  // Three idle workers, four limited experiments first in the queue: one limited, two others.
  for (int i = 0; i < 3; ++i) {
    next_assign(*workers[i], &held[i]);
    if (limited_ids.count(held[i].experiment_id())) {
      EXPECT_EQ(limited_holder, -1) << "a second limited experiment was assigned";
      limited_holder = i;
    }
  }
  ASSERT_NE(limited_holder, -1);
  std::this_thread::sleep_for(300ms);  // several scheduling passes
  EXPECT_EQ(count("limited", {"assigned", "running"}), 1);
  EXPECT_EQ(count("limited", {"queued"}), 3);
  EXPECT_EQ(count("unlimited", {"assigned", "running"}), 2);

  // The two other workers finish and take the rest of the unlimited campaign, not the limited
  // experiments ahead of it in the queue.
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < 3; ++i) {
      if (i == limited_holder) continue;
      finish(*workers[i], held[i]);
      if (round == 0) {
        next_assign(*workers[i], &held[i]);
        EXPECT_EQ(limited_ids.count(held[i].experiment_id()), 0u) << held[i].experiment_id();
      }
    }
  }
  // Now two workers are idle and the limited campaign still has queued work: it stays queued.
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(count("unlimited", {"succeeded"}), 4);
  EXPECT_EQ(count("limited", {"assigned", "running"}), 1);
  EXPECT_EQ(count("limited", {"queued"}), 3);
  for (int i = 0; i < 3; ++i) {
    if (i == limited_holder) continue;
    workers[i]->Close();
    int assigns = 0;
    for (const auto& m : workers[i]->seen) assigns += m.has_assign();
    EXPECT_EQ(assigns, 2) << "worker " << i << " got work beyond the unlimited campaign's";
  }

  // Each finished limited experiment lets exactly the next one go.
  std::set<int64_t> ran = {held[limited_holder].experiment_id()};
  for (int k = 0; k < 3; ++k) {
    finish(*workers[limited_holder], held[limited_holder]);
    next_assign(*workers[limited_holder], &held[limited_holder]);
    ran.insert(held[limited_holder].experiment_id());
    EXPECT_EQ(count("limited", {"assigned", "running"}), 1);
  }
  finish(*workers[limited_holder], held[limited_holder]);
  EXPECT_EQ(ran, limited_ids);
  EXPECT_EQ(count("limited", {"succeeded"}), 4);
  workers[limited_holder]->Close();
}

}  // namespace
}  // namespace xv::daemon
