// DaemonLoop::Tick over a real SQLite store file, without gRPC: a silent worker's attempt is lost
// and requeued (leases), a campaign round whose runs all finished is decided (ready rounds), and
// a database that takes writes reports no write fault (store upkeep).
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "daemon/engine/campaign_policy.h"
#include "daemon/engine/daemon_loop.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/plan_runner.h"
#include "daemon/engine/round_closer.h"
#include "daemon/engine/submission_builder.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"

namespace xv::daemon {
namespace {

using nlohmann::json;

std::string CpuTinyYaml() {
  const char* src = std::getenv("XV_SOURCE_DIR");
  std::ifstream f(std::string(src ? src : ".") + "/recipes/cpu-tiny.yaml");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class DaemonLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(store::Store::Open(dir_.file("xv.db"), &store_).ok());
    xv::v1::Register reg;
    reg.set_worker_name("silent");
    reg.mutable_capabilities()->add_trainers("libtorch");
    ASSERT_TRUE(store_->workers().UpsertWorker(reg, &worker_id_).ok());
  }

  // The engine as DaemonServer builds it, with a lease of `lease_ms`.
  void BuildEngine(int lease_ms) {
    DispatcherOptions dispatcher_options;
    dispatcher_options.lease_ms = lease_ms;
    dispatcher_options.max_attempts = 3;
    dispatcher_ = std::make_unique<Dispatcher>(store_.get(), dispatcher_options);
    closer_ = std::make_unique<RoundCloser>(store_.get());
    plans_ = std::make_unique<PlanRunner>(store_.get(), dispatcher_.get(), closer_.get(),
                                          SubmissionLimits());
    loop_ = std::make_unique<DaemonLoop>(store_.get(), dispatcher_.get(), closer_.get(),
                                         plans_.get(), DaemonLoopOptions());
  }

  // Finishes `id` (already assigned to the worker) as succeeded with `val_bpb`.
  void Succeed(int64_t id, int attempt, double val_bpb) {
    xv::v1::TrainerEvent ev;
    ev.set_experiment_id(id);
    ev.set_attempt(attempt);
    ev.set_seq(1);
    ev.set_type("summary");
    ev.set_json(json{{"type", "summary"}, {"val_bpb", val_bpb}}.dump());
    store::AppliedEvents applied;
    ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_id_, {ev}, &applied).ok());
    xv::v1::Finished fin;
    fin.set_experiment_id(id);
    fin.set_attempt(attempt);
    fin.set_state("succeeded");
    fin.set_last_seq(1);
    xv::v1::EventAck ack;
    ASSERT_TRUE(store_->attempts().FinishAttempt(worker_id_, fin, &ack).ok());
  }

  store::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
  int64_t worker_id_ = 0;
  std::unique_ptr<Dispatcher> dispatcher_;
  std::unique_ptr<RoundCloser> closer_;
  std::unique_ptr<PlanRunner> plans_;
  std::unique_ptr<DaemonLoop> loop_;
};

TEST_F(DaemonLoopTest, TickLosesAndRequeuesTheAttemptOfAWorkerPastItsLease) {
  store::SubmissionIds ids;
  ASSERT_TRUE(store_->submissions().InsertSubmission(store::testing::MakeSubmission(1), &ids).ok());
  ASSERT_EQ(ids.experiment_ids.size(), 1u);
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store_->attempts().AssignExperiment(ids.experiment_ids[0], worker_id_, &spec).ok());
  BuildEngine(/*lease_ms=*/20);

  // Within the lease nothing happens.
  loop_->Tick();
  std::vector<store::ActiveAttempt> active;
  ASSERT_TRUE(store_->experiments().ListActive(&active).ok());
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].worker_id, worker_id_);

  std::this_thread::sleep_for(std::chrono::milliseconds(60));
  loop_->Tick();
  active.clear();  // ListActive appends
  ASSERT_TRUE(store_->experiments().ListActive(&active).ok());
  EXPECT_TRUE(active.empty());
  std::vector<store::QueuedExperiment> queued;
  ASSERT_TRUE(store_->experiments().ListQueued(&queued).ok());
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].id, ids.experiment_ids[0]);
  EXPECT_EQ(loop_->reported_write_fault(), "");
}

TEST_F(DaemonLoopTest, TickDecidesARoundWhoseRunsAllFinished) {
  Recipe base;
  ASSERT_TRUE(ParseRecipeYaml(CpuTinyYaml(), &base).ok());
  CampaignPolicy policy;
  ASSERT_TRUE(
      ParseCampaignPolicyText("mode: welch\nconfidence: 0.95\nmin_effect: 0\n", &policy).ok());
  store::NewCampaign nc;
  nc.name = "loop";
  nc.policy_json = CampaignPolicyToJson(policy);
  ResolvedSizes sizes;
  ASSERT_TRUE(ResolveSizes(base, &sizes).ok());
  nc.base_hash = CanonicalHash(base);
  nc.base_recipe_json = RecipeToJson(base).dump();
  nc.base_resolved_json = ResolvedConfigJson(base, sizes).dump();
  int64_t campaign_id = 0;
  ASSERT_TRUE(store_->campaigns().CreateCampaign(nc, &campaign_id).ok());
  xv::v1::SubmitRequest req;
  req.set_campaign("loop");
  auto* o = req.add_candidates()->add_overrides();
  o->set_key("matrix_lr");
  o->set_value("0.05");
  RoundPlan plan{policy.acceptance.replicates, policy.acceptance.head_controls};
  store::NewSubmission sub;
  ASSERT_TRUE(BuildSubmissionFromBase(req, base, plan, SubmissionLimits(), &sub).ok());
  sub.campaign = "loop";
  store::SubmissionIds ids;
  ASSERT_TRUE(store_->submissions().InsertSubmission(sub, &ids).ok());
  ASSERT_EQ(ids.experiment_ids.size(), 8u);  // 4 controls + 4 replicates (welch defaults)
  // The candidate is clearly better: 1.90 against the head's 2.00 (small spread each).
  int k = 0;
  for (int64_t id : ids.experiment_ids) {
    xv::v1::ExperimentSpec spec;
    ASSERT_TRUE(store_->attempts().AssignExperiment(id, worker_id_, &spec).ok());
    const bool candidate =
        std::abs(json::parse(spec.recipe_json()).at("matrix_lr").get<double>() - 0.05) < 1e-12;
    Succeed(id, spec.attempt(), (candidate ? 1.90 : 2.00) + 0.001 * (k++ % 3));
  }
  BuildEngine(/*lease_ms=*/60000);

  loop_->Tick();
  xv::v1::Campaign c;
  ASSERT_TRUE(store_->campaigns().GetCampaign(campaign_id, "", true, &c).ok());
  ASSERT_EQ(c.rounds_size(), 1);
  EXPECT_EQ(c.rounds(0).state(), "decided");
  EXPECT_NE(c.rounds(0).kept_experiment_id(), 0);
  EXPECT_EQ(c.head_history_size(), 2);
  // A second tick finds nothing more to decide.
  loop_->Tick();
  xv::v1::Campaign again;  // GetCampaign appends to what it is given
  ASSERT_TRUE(store_->campaigns().GetCampaign(campaign_id, "", true, &again).ok());
  EXPECT_EQ(again.head_history_size(), 2);
}

TEST_F(DaemonLoopTest, StartRunsTicksUntilStop) {
  store::SubmissionIds ids;
  ASSERT_TRUE(store_->submissions().InsertSubmission(store::testing::MakeSubmission(1), &ids).ok());
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store_->attempts().AssignExperiment(ids.experiment_ids[0], worker_id_, &spec).ok());
  DispatcherOptions dispatcher_options;
  dispatcher_options.lease_ms = 20;
  dispatcher_ = std::make_unique<Dispatcher>(store_.get(), dispatcher_options);
  closer_ = std::make_unique<RoundCloser>(store_.get());
  plans_ = std::make_unique<PlanRunner>(store_.get(), dispatcher_.get(), closer_.get(),
                                        SubmissionLimits());
  DaemonLoopOptions loop_options;
  loop_options.tick_ms = 10;
  loop_ = std::make_unique<DaemonLoop>(store_.get(), dispatcher_.get(), closer_.get(), plans_.get(),
                                       loop_options);
  loop_->Start();
  // The loop's own thread loses the silent worker's attempt within a few ticks.
  std::vector<store::ActiveAttempt> active = {store::ActiveAttempt()};
  for (int i = 0; i < 500 && !active.empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    active.clear();  // ListActive appends
    ASSERT_TRUE(store_->experiments().ListActive(&active).ok());
  }
  EXPECT_TRUE(active.empty());
  loop_->Stop();
  loop_->Stop();  // idempotent
}

// Issue 18: a pass reads the head of the queue first (a few experiments per free slot) and looks
// further only when free slots are left. Here the 40 experiments at the head need a GPU, the one
// idle worker has none, and the experiment it can run is behind them.
TEST_F(DaemonLoopTest, RequestedPassLooksPastAQueueHeadNoFreeWorkerCanTake) {
  store::NewSubmission gpu_only = store::testing::MakeSubmission(40, "gpu-only");
  for (auto& e : gpu_only.experiments) e.device_requirement = "gpu";
  store::SubmissionIds head, behind;
  ASSERT_TRUE(store_->submissions().InsertSubmission(gpu_only, &head).ok());
  ASSERT_TRUE(store_->submissions()
                  .InsertSubmission(store::testing::MakeSubmission(1, "any"), &behind)
                  .ok());
  BuildEngine(/*lease_ms=*/15000);
  auto session = std::make_shared<ConnectedWorker>(
      worker_id_, store::testing::MakeRegister("silent", "cpu"), nullptr);
  dispatcher_->Attach(session);

  dispatcher_->RequestSchedule();  // no pass thread started: the pass runs here
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(session->Pop(&msg, std::chrono::milliseconds(0)));
  ASSERT_TRUE(msg.has_assign());
  EXPECT_EQ(msg.assign().spec().experiment_id(), behind.experiment_ids[0]);
  EXPECT_FALSE(session->Pop(&msg, std::chrono::milliseconds(0)));  // one slot, one Assign
}

}  // namespace
}  // namespace xv::daemon
