// Store::ReclaimLostAttempt on a real SQLite file: when a worker that lost an attempt
// (its lease lapsed) reports the trainer still running, one transaction decides whether the
// attempt is reclaimed or the worker must cancel it (docs/reliability.md § Reclaiming a lost
// attempt).
//  - ReclaimsWhileTheRequeueIsQueued: lost -> reclaimed: same attempt, running on the same worker,
//    progress restored, nothing left to assign, lost then reclaimed in the event log (and Watch's
//    view of it), one result when it finishes.
//  - AReclaimedLossCostsNoAttempt: with max_attempts 2, attempt 1 lost, reclaimed, lost again is
//    still requeued (the reclaimed loss did not count); lost again after its requeue ran as
//    attempt 2 ends lost.
//  - RefusesWhenTheRequeueWasAssigned / WhenCancelled / WhenTheRoundIsDecided /
//    WhenTheExperimentEndedLost / WhenTheAttemptFinishedOrIsNotItsOwn: today's behaviour (cancel),
//    each with a reason naming the cause, and nothing changed.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "daemon/api/watch_hub.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"

namespace xv::store {
namespace {

using Outcome = ReclaimDecision::Outcome;
using testing::MakeEvent;
using testing::MakeRegister;
using testing::MakeSubmission;
using testing::TempDir;

class AttemptReclaimTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Store::Open(dir_.file("xv.db"), &store_).ok());
    ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("w1"), &w1_).ok());
    ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("w2"), &w2_).ok());
  }

  // A campaign with `max_attempts` and one experiment; returns the experiment id.
  int64_t SubmitOne(int max_attempts = 2) {
    NewCampaign nc;
    nc.name = "reclaim";
    nc.base_hash = "base-hash-reclaim";
    nc.base_recipe_json = R"({"depth":2})";
    nc.base_resolved_json = R"({"depth":2,"model_dim":128})";
    nc.max_attempts = max_attempts;
    int64_t cid = 0;
    EXPECT_TRUE(store_->campaigns().CreateCampaign(nc, &cid).ok());
    SubmissionIds ids;
    EXPECT_TRUE(store_->submissions().InsertSubmission(MakeSubmission(1, "reclaim"), &ids).ok());
    round_id_ = ids.round_id;
    return ids.experiment_ids.at(0);
  }

  // Assigns `exp` to `worker` (checking the attempt number) and stores start + `steps` step
  // events with progress steps/10.
  void AssignAndRun(int64_t exp, int64_t worker, int attempt, int steps) {
    xv::v1::ExperimentSpec spec;
    ASSERT_TRUE(store_->attempts().AssignExperiment(exp, worker, &spec).ok());
    ASSERT_EQ(spec.attempt(), attempt);
    std::vector<xv::v1::TrainerEvent> events = {
        MakeEvent(exp, attempt, 1, "start", R"({"type":"start","device":{"name":"cpu"}})")};
    for (int s = 1; s <= steps; ++s) {
      events.push_back(MakeEvent(exp, attempt, s + 1, "step",
                                 R"({"type":"step","step":)" + std::to_string(s) +
                                     R"(,"loss":3.0,"progress":)" + std::to_string(s / 10.0) +
                                     "}"));
    }
    AppliedEvents applied;
    ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker, events, &applied).ok());
    ASSERT_EQ(applied.rejected, 0);
  }

  bool Lose(int64_t exp, int attempt) {
    bool requeued = false;
    EXPECT_TRUE(store_->attempts()
                    .MarkAttemptLost(exp, attempt, "no contact within 1500 ms", 0, &requeued)
                    .ok());
    return requeued;
  }

  ReclaimDecision Reclaim(int64_t worker, int64_t exp, int attempt) {
    ReclaimDecision d;
    Status s = store_->attempts().ReclaimLostAttempt(worker, exp, attempt, &d);
    EXPECT_TRUE(s.ok()) << s.ToString();
    return d;
  }

  xv::v1::Experiment Get(int64_t exp) {
    xv::v1::Experiment e;
    EXPECT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
    return e;
  }

  // The daemon's events of `exp`, oldest first, as "type:attempt".
  std::vector<std::string> DaemonEvents(int64_t exp) {
    std::vector<StoredEvent> rows;
    EXPECT_TRUE(store_->events().ListEventsAfter(0, 0, 10000, &rows).ok());
    std::vector<std::string> out;
    for (const StoredEvent& r : rows) {
      if (r.experiment_id == exp && r.source == "daemon" && r.type != "state") {
        out.push_back(r.type + ":" + std::to_string(r.attempt));
      }
    }
    return out;
  }

  // The attempts table, read through a second (read-only) connection as any reader would.
  std::string AttemptState(int64_t exp, int attempt) {
    std::unique_ptr<SqliteConnection> c;
    EXPECT_TRUE(
        SqliteConnection::Open(dir_.file("xv.db"), SqliteConnection::Mode::kReadOnly, &c).ok());
    SqliteStatement st;
    EXPECT_TRUE(c->Prepare("SELECT state || CASE WHEN finished_at IS NULL THEN '' ELSE "
                           "'/finished' END FROM attempts WHERE experiment_id = ? AND attempt = ?",
                           &st)
                    .ok());
    st.Bind(1, exp).Bind(2, attempt);
    bool row = false;
    EXPECT_TRUE(st.Step(&row).ok());
    return row ? st.ColumnText(0) : "none";
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  int64_t w1_ = 0, w2_ = 0;
  int64_t round_id_ = 0;
};

TEST_F(AttemptReclaimTest, ReclaimsWhileTheRequeueIsQueued) {
  const int64_t exp = SubmitOne();
  AssignAndRun(exp, w1_, 1, 4);
  EXPECT_EQ(Reclaim(w1_, exp, 1).outcome, Outcome::kActive) << "not lost: nothing to do";
  ASSERT_TRUE(Lose(exp, 1));
  EXPECT_EQ(Get(exp).state(), "queued");
  EXPECT_EQ(AttemptState(exp, 1), "lost/finished");

  ReclaimDecision d = Reclaim(w1_, exp, 1);
  ASSERT_EQ(d.outcome, Outcome::kReclaimed) << d.reason;
  EXPECT_EQ(d.state, ExperimentState::kRunning);
  EXPECT_NE(d.reason.find("w1"), std::string::npos) << d.reason;
  xv::v1::Experiment e = Get(exp);
  EXPECT_EQ(e.state(), "running");
  EXPECT_EQ(e.attempt(), 1);
  EXPECT_EQ(e.worker(), "w1");
  EXPECT_DOUBLE_EQ(e.progress(), 0.4);  // from its last stored step, not 0
  EXPECT_EQ(e.failure_detail(), "");
  EXPECT_EQ(AttemptState(exp, 1), "running");
  // The requeue is withdrawn: nothing to schedule, and it cannot be assigned any more.
  std::vector<QueuedExperiment> queued;
  ASSERT_TRUE(store_->experiments().ListQueued(&queued).ok());
  EXPECT_TRUE(queued.empty());
  xv::v1::ExperimentSpec spec;
  EXPECT_EQ(store_->attempts().AssignExperiment(exp, w2_, &spec).code(),
            Status::Code::kFailedPrecondition);
  std::vector<ActiveAttempt> active;
  ASSERT_TRUE(store_->experiments().ListActive(&active).ok());
  ASSERT_EQ(active.size(), 1u);
  EXPECT_EQ(active[0].worker_id, w1_);
  EXPECT_EQ(active[0].attempt, 1);
  // Asking again changes nothing.
  EXPECT_EQ(Reclaim(w1_, exp, 1).outcome, Outcome::kActive);
  EXPECT_EQ(DaemonEvents(exp), (std::vector<std::string>{"lost:1", "reclaimed:1"}));

  // Watch shows the reclaim as the experiment's state, naming the attempt.
  std::vector<StoredEvent> rows;
  ASSERT_TRUE(store_->events().ListEventsAfter(0, 0, 10000, &rows).ok());
  int shown = 0;
  for (const StoredEvent& r : rows) {
    if (r.type != "reclaimed") continue;
    xv::v1::WatchEvent ev;
    ASSERT_TRUE(daemon::ToWatchEvent(r, &ev));
    EXPECT_EQ(ev.kind(), "state");
    EXPECT_EQ(ev.state(), "running");
    EXPECT_EQ(ev.attempt(), 1);
    EXPECT_EQ(ev.detail().rfind("attempt 1 reclaimed: worker w1 came back", 0), 0u) << ev.detail();
    EXPECT_EQ(nlohmann::json::parse(ev.json())["lost_detail"], "no contact within 1500 ms");
    ++shown;
  }
  EXPECT_EQ(shown, 1);

  // The trainer finishes: one result, on attempt 1.
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      w1_,
                      {MakeEvent(exp, 1, 6, "summary", R"({"type":"summary","val_bpb":1.25})")},
                      &applied)
                  .ok());
  xv::v1::Finished fin;
  fin.set_experiment_id(exp);
  fin.set_attempt(1);
  fin.set_state("succeeded");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(w1_, fin, &ack).ok());
  e = Get(exp);
  EXPECT_EQ(e.state(), "succeeded");
  EXPECT_EQ(e.attempt(), 1);
  EXPECT_DOUBLE_EQ(e.result().val_bpb(), 1.25);
  EXPECT_EQ(AttemptState(exp, 1), "succeeded/finished");
  EXPECT_EQ(AttemptState(exp, 2), "none");
}

TEST_F(AttemptReclaimTest, AReclaimedLossCostsNoAttempt) {
  const int64_t exp = SubmitOne(/*max_attempts=*/2);
  AssignAndRun(exp, w1_, 1, 1);
  ASSERT_TRUE(Lose(exp, 1));
  ASSERT_EQ(Reclaim(w1_, exp, 1).outcome, Outcome::kReclaimed);
  // Lost again: attempt 1 < 2, so it is requeued again, not ended lost.
  ASSERT_TRUE(Lose(exp, 1)) << "the reclaimed loss was counted";
  EXPECT_EQ(Get(exp).state(), "queued");
  // This time the requeue runs (attempt 2) and is lost: out of attempts.
  AssignAndRun(exp, w2_, 2, 1);
  EXPECT_FALSE(Lose(exp, 2));
  EXPECT_EQ(Get(exp).state(), "lost");
  EXPECT_EQ(DaemonEvents(exp),
            (std::vector<std::string>{"lost:1", "reclaimed:1", "lost:1", "lost:2"}));
}

TEST_F(AttemptReclaimTest, RefusesWhenTheRequeueWasAssigned) {
  const int64_t exp = SubmitOne();
  AssignAndRun(exp, w1_, 1, 2);
  ASSERT_TRUE(Lose(exp, 1));
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store_->attempts().AssignExperiment(exp, w2_, &spec).ok());
  ASSERT_EQ(spec.attempt(), 2);
  ReclaimDecision d = Reclaim(w1_, exp, 1);
  EXPECT_EQ(d.outcome, Outcome::kRefused);
  EXPECT_NE(d.reason.find("attempt 2 on worker w2"), std::string::npos) << d.reason;
  xv::v1::Experiment e = Get(exp);
  EXPECT_EQ(e.state(), "assigned");
  EXPECT_EQ(e.attempt(), 2);
  EXPECT_EQ(e.worker(), "w2");
  EXPECT_EQ(AttemptState(exp, 1), "lost/finished");
  EXPECT_EQ(DaemonEvents(exp), (std::vector<std::string>{"lost:1"}));
}

TEST_F(AttemptReclaimTest, RefusesWhenCancelled) {
  const int64_t exp = SubmitOne();
  AssignAndRun(exp, w1_, 1, 2);
  ASSERT_TRUE(Lose(exp, 1));
  ExperimentState state = ExperimentState::kQueued;
  int64_t worker = 0;
  int attempt = 0;
  ASSERT_TRUE(store_->attempts().CancelExperiment(exp, &state, &worker, &attempt).ok());
  ReclaimDecision d = Reclaim(w1_, exp, 1);
  EXPECT_EQ(d.outcome, Outcome::kRefused);
  EXPECT_NE(d.reason.find("cancelled"), std::string::npos) << d.reason;
  EXPECT_EQ(Get(exp).state(), "cancelled");
  EXPECT_EQ(AttemptState(exp, 1), "lost/finished");
}

TEST_F(AttemptReclaimTest, RefusesWhenTheRoundIsDecided) {
  const int64_t exp = SubmitOne();
  AssignAndRun(exp, w1_, 1, 2);
  ASSERT_TRUE(Lose(exp, 1));
  RoundDecisionRecord rec;
  rec.round_id = round_id_;
  rec.summary = "decided by hand";
  ASSERT_TRUE(store_->rounds().StoreRoundDecision(rec).ok());
  ReclaimDecision d = Reclaim(w1_, exp, 1);
  EXPECT_EQ(d.outcome, Outcome::kRefused);
  EXPECT_NE(d.reason.find("round " + std::to_string(round_id_) + " is decided"), std::string::npos)
      << d.reason;
  EXPECT_EQ(Get(exp).state(), "queued");
}

TEST_F(AttemptReclaimTest, RefusesWhenTheExperimentEndedLost) {
  const int64_t exp = SubmitOne(/*max_attempts=*/1);
  AssignAndRun(exp, w1_, 1, 2);
  ASSERT_FALSE(Lose(exp, 1));
  ReclaimDecision d = Reclaim(w1_, exp, 1);
  EXPECT_EQ(d.outcome, Outcome::kRefused);
  EXPECT_NE(d.reason.find("experiment is lost"), std::string::npos) << d.reason;
  EXPECT_EQ(Get(exp).state(), "lost");
}

TEST_F(AttemptReclaimTest, RefusesWhenTheAttemptFinishedOrIsNotItsOwn) {
  const int64_t exp = SubmitOne();
  AssignAndRun(exp, w1_, 1, 2);
  ReclaimDecision d = Reclaim(w2_, exp, 1);
  EXPECT_EQ(d.outcome, Outcome::kRefused);
  EXPECT_NE(d.reason.find("never assigned to this worker"), std::string::npos) << d.reason;
  xv::v1::Finished fin;
  fin.set_experiment_id(exp);
  fin.set_attempt(1);
  fin.set_state("failed");
  fin.set_failure_kind("crashed");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(w1_, fin, &ack).ok());
  d = Reclaim(w1_, exp, 1);
  EXPECT_EQ(d.outcome, Outcome::kRefused);
  EXPECT_NE(d.reason.find("already ended failed"), std::string::npos) << d.reason;
  EXPECT_EQ(Get(exp).state(), "failed");
}

}  // namespace
}  // namespace xv::store
