// Tests of AttemptLedger::FinishAttempt: the terminal state a Finished leads to, late reports of
// lost attempts, repeated reports and implausible figures.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <fstream>

#include "daemon/store/embedded_migrations.h"
#include "daemon/store/migration_runner.h"
#include "daemon/store/store.h"
#include "store_with_worker.h"

namespace xv::store {
namespace {

using testing::MakeEvent;
using testing::MakeFinished;
using testing::MakeRegister;
using testing::MakeSubmission;
using testing::TempDir;

using testing::QueryInt;
using testing::StoreWithWorker;

TEST_F(StoreWithWorker, SummaryAndFinishedGiveResultAndTerminalState) {
  const int64_t exp = ids_.experiment_ids[0];
  const std::string summary =
      R"({"type":"summary","t":9,"val_bpb":2.345,"training_seconds":20.1,"total_seconds":31.5,)"
      R"("peak_vram_mb":0.0,"mfu_percent":null,"total_tokens_M":0.5,"num_steps":61,)"
      R"("num_params_M":3.4,"depth":2,"tok_per_sec":24000.5,"peak_reserved_mb":0.0,)"
      R"("attention_backend":"math","peak_flops":null,"peak_flops_source":"unknown",)"
      R"("flops_per_token":20000000,"num_params":3400001,"total_tokens":499712,"metric_version":"v1"})";
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(worker_, {MakeEvent(exp, 1, 1, "summary", summary)}, &applied)
                  .ok());
  xv::v1::Finished f = MakeFinished(exp, 1, "succeeded");
  f.set_stderr_tail("val_bpb: 2.345\n");
  f.set_last_seq(1);
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, f, &ack).ok());
  EXPECT_TRUE(ack.finished());
  EXPECT_EQ(ack.seq(), 1);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "succeeded");
  EXPECT_FALSE(e.finished_at().empty());
  ASSERT_TRUE(e.has_result());
  EXPECT_DOUBLE_EQ(e.result().val_bpb(), 2.345);
  EXPECT_DOUBLE_EQ(e.result().tok_per_sec(), 24000.5);
  EXPECT_DOUBLE_EQ(e.result().mfu_percent(), -1.0);
  EXPECT_DOUBLE_EQ(e.result().peak_flops(), 0.0);
  EXPECT_EQ(e.result().num_steps(), 61);
  EXPECT_EQ(e.result().total_tokens(), 499712);
  EXPECT_EQ(e.result().num_params(), 3400001);
  EXPECT_EQ(e.result().flops_per_token(), 20000000);
  EXPECT_EQ(e.result().depth(), 2);
  EXPECT_EQ(e.result().attention_backend(), "math");
  EXPECT_EQ(e.result().metric_version(), "v1");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM results"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM workers WHERE state = 'idle'"), 1);
}

TEST_F(StoreWithWorker, SucceededWithoutSummaryIsFailed) {
  xv::v1::Finished f = MakeFinished(ids_.experiment_ids[0], 1, "succeeded");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, f, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(ids_.experiment_ids[0], &e).ok());
  EXPECT_EQ(e.state(), "failed");
  EXPECT_EQ(e.failure_kind(), "crashed");
}

TEST_F(StoreWithWorker, LateSuccessOfALostAttemptIsAcceptedWhileNoOtherAttemptStarted) {
  const int64_t exp = ids_.experiment_ids[0];
  bool requeued = false;
  ASSERT_TRUE(store_->attempts().MarkAttemptLost(exp, 1, "no heartbeat", 2, &requeued).ok());
  ASSERT_TRUE(requeued);
  // A silent worker told to stop: its "cancelled" does not cancel the requeued experiment.
  const int64_t other = ids_.experiment_ids[1];
  xv::v1::ExperimentSpec other_spec;
  ASSERT_TRUE(store_->attempts().AssignExperiment(other, worker_, &other_spec).ok());
  ASSERT_TRUE(store_->attempts().MarkAttemptLost(other, 1, "no heartbeat", 2, &requeued).ok());
  xv::v1::Finished cancelled = MakeFinished(other, 1, "cancelled");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, cancelled, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(other, &e).ok());
  EXPECT_EQ(e.state(), "queued");
  // A late success (summary stored, then Finished) is taken instead of running it again.
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_,
                      {MakeEvent(exp, 1, 1, "summary", R"({"type":"summary","val_bpb":1.5})")},
                      &applied)
                  .ok());
  xv::v1::Finished ok = MakeFinished(exp, 1, "succeeded");
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, ok, &ack).ok());
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "succeeded");
  EXPECT_EQ(e.worker(), "host:cpu");
  EXPECT_DOUBLE_EQ(e.result().val_bpb(), 1.5);
  std::vector<QueuedExperiment> queued;
  ASSERT_TRUE(store_->experiments().ListQueued(&queued).ok());
  for (const auto& q : queued) EXPECT_NE(q.id, exp);
}

TEST_F(StoreWithWorker, LateResultOfALostAttemptIsIgnoredOnceAnotherAttemptRuns) {
  const int64_t exp = ids_.experiment_ids[0];
  bool requeued = false;
  ASSERT_TRUE(store_->attempts().MarkAttemptLost(exp, 1, "no heartbeat", 2, &requeued).ok());
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store_->attempts().AssignExperiment(exp, worker_, &spec).ok());
  ASSERT_EQ(spec.attempt(), 2);
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_,
                      {MakeEvent(exp, 1, 1, "summary", R"({"type":"summary","val_bpb":1.5})")},
                      &applied)
                  .ok());
  xv::v1::Finished ok = MakeFinished(exp, 1, "succeeded");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, ok, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "assigned");
  EXPECT_EQ(e.attempt(), 2);
  EXPECT_FALSE(e.has_result());  // the result shown is the active attempt's
}

// A second Finished for an attempt that already ended (a worker resending, or a late report of
// another outcome) is recorded as a finished_ignored event and changes nothing.
TEST_F(StoreWithWorker, ASecondFinishedIsRecordedNotApplied) {
  const int64_t exp = ids_.experiment_ids[0];
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_,
                      {MakeEvent(exp, 1, 1, "summary", R"({"type":"summary","val_bpb":1.25})")},
                      &applied)
                  .ok());
  xv::v1::Finished ok = MakeFinished(exp, 1, "succeeded");
  ok.set_stderr_tail("done\n");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, ok, &ack).ok());
  const std::string where = " WHERE experiment_id = " + std::to_string(exp) + " AND attempt = 1";
  ASSERT_EQ(Count("SELECT COUNT(*) FROM attempts" + where + " AND state = 'succeeded'"), 1);
  const int64_t state_events = Count("SELECT COUNT(*) FROM events WHERE type = 'state'");

  xv::v1::Finished late = MakeFinished(exp, 1, "failed");
  late.set_failure_kind("crashed");
  late.set_failure_detail("segfault");
  late.set_exit_code(139);
  late.set_stderr_tail("a new tail\n");
  xv::v1::EventAck late_ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, late, &late_ack).ok());
  EXPECT_TRUE(late_ack.finished());  // acknowledged, so the worker stops resending
  EXPECT_EQ(late_ack.experiment_id(), exp);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "succeeded");
  EXPECT_EQ(e.stderr_tail(), "done\n");
  EXPECT_DOUBLE_EQ(e.result().val_bpb(), 1.25);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM attempts" + where +
                  " AND state = 'succeeded' AND stderr_tail = 'done\n' AND failure_kind = ''"),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE type = 'state'"), state_events);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'daemon' AND type = "
                  "'finished_ignored' AND experiment_id = " +
                  std::to_string(exp) +
                  " AND attempt = 1 AND json_extract(json, '$.state') = 'failed' AND "
                  "json_extract(json, '$.attempt_state') = 'succeeded' AND "
                  "json_extract(json, '$.failure_detail') = 'segfault'"),
            1);
  // The same Finished again (a resend) is recorded again and still changes nothing.
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, ok, &ack).ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE type = 'finished_ignored'"), 2);
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "succeeded");
}

// A lost attempt takes the worker's first late report (the daemon's verdict "lost" is replaced
// by what happened); a further report for it is recorded, not applied.
TEST_F(StoreWithWorker, ALostAttemptTakesOneLateReport) {
  const int64_t exp = ids_.experiment_ids[0];
  bool requeued = false;
  ASSERT_TRUE(store_->attempts().MarkAttemptLost(exp, 1, "no heartbeat", 2, &requeued).ok());
  ASSERT_TRUE(requeued);
  xv::v1::Finished cancelled = MakeFinished(exp, 1, "cancelled");
  cancelled.set_stderr_tail("stopped\n");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, cancelled, &ack).ok());
  const std::string where = " WHERE experiment_id = " + std::to_string(exp) + " AND attempt = 1";
  EXPECT_EQ(Count("SELECT COUNT(*) FROM attempts" + where + " AND state = 'cancelled'"), 1);
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_,
                      {MakeEvent(exp, 1, 1, "summary", R"({"type":"summary","val_bpb":1.5})")},
                      &applied)
                  .ok());
  xv::v1::Finished ok = MakeFinished(exp, 1, "succeeded");
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, ok, &ack).ok());
  EXPECT_TRUE(ack.finished());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM attempts" + where +
                  " AND state = 'cancelled' AND stderr_tail = 'stopped\n'"),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events" + where +
                  " AND type = 'finished_ignored' AND json_extract(json, '$.state') = "
                  "'succeeded' AND json_extract(json, '$.attempt_state') = 'cancelled'"),
            1);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "queued");
}

// Trainer figures that cannot be true are not stored, and the run ends invalid naming the field
// whatever the worker reports (daemon/sched/result_plausibility.h).
TEST(Plausibility, ImplausibleFiguresEndTheRunInvalidNamingTheField) {
  struct Case {
    std::string type;
    std::string json;
    std::string finished_state;
    std::string detail_prefix;
  };
  const std::vector<Case> cases = {
      {"summary", R"({"type":"summary","val_bpb":-3.5,"num_steps":10})", "succeeded",
       "summary event 1: val_bpb: a number (-3.5"},
      {"summary", R"({"type":"summary","val_bpb":0.0})", "succeeded",
       "summary event 1: val_bpb: a number (0"},
      {"summary", R"({"type":"summary","val_bpb":1.1,"num_steps":-1})", "succeeded",
       "summary event 1: num_steps: a number (-1)"},
      {"summary", R"({"type":"summary","val_bpb":1.1,"total_tokens_M":1e300})", "succeeded",
       "summary event 1: total_tokens_M: a number (1"},
      {"step", R"({"type":"step","step":3,"loss":2.0,"progress":1e9})", "succeeded",
       "step event 1: progress: a number (1"},
      {"summary", R"({"type":"summary","val_bpb":-1})", "diverged",
       "summary event 1: val_bpb: a number (-1"},
  };
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  SubmissionIds ids;
  ASSERT_TRUE(store->submissions()
                  .InsertSubmission(MakeSubmission(static_cast<int>(cases.size())), &ids)
                  .ok());
  int64_t worker = 0;
  ASSERT_TRUE(store->workers().UpsertWorker(MakeRegister("w"), &worker).ok());
  for (size_t i = 0; i < cases.size(); ++i) {
    const Case& c = cases[i];
    const int64_t exp = ids.experiment_ids[i];
    xv::v1::ExperimentSpec spec;
    ASSERT_TRUE(store->attempts().AssignExperiment(exp, worker, &spec).ok());
    std::vector<xv::v1::TrainerEvent> events = {MakeEvent(exp, 1, 1, c.type, c.json)};
    if (c.type == "step") {
      events.push_back(MakeEvent(exp, 1, 2, "summary", R"({"type":"summary","val_bpb":1.5})"));
    }
    AppliedEvents applied;
    ASSERT_TRUE(store->attempts().ApplyTrainerEvents(worker, events, &applied).ok());
    ASSERT_EQ(applied.acks.size(), 1u);
    EXPECT_EQ(applied.acks[0].seq(), static_cast<int64_t>(events.size()));  // stored, acked
    xv::v1::Finished f;
    f.set_experiment_id(exp);
    f.set_attempt(1);
    f.set_state(c.finished_state);
    xv::v1::EventAck ack;
    ASSERT_TRUE(store->attempts().FinishAttempt(worker, f, &ack).ok());
    xv::v1::Experiment e;
    ASSERT_TRUE(store->experiments().GetExperiment(exp, &e).ok());
    EXPECT_EQ(e.state(), "invalid") << c.json;
    EXPECT_EQ(e.failure_kind(), "implausible_result") << c.json;
    EXPECT_EQ(e.failure_detail().rfind(c.detail_prefix, 0), 0u) << e.failure_detail();
    EXPECT_LE(e.progress(), 1.0);
    const std::string of = " WHERE experiment_id = " + std::to_string(exp);
    EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM results" + of +
                                              " AND (val_bpb <= 0 OR num_steps < 0 "
                                              "OR total_tokens < 0)"),
              0);
    if (c.type == "summary") {
      EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM results" + of), 0);
    } else {
      EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM metrics" + of), 0);
    }
    EXPECT_EQ(QueryInt(dir.file("xv.db"),
                       "SELECT COUNT(*) FROM attempts" + of +
                           " AND state = 'invalid' AND failure_kind = 'implausible_result'"),
              1);
  }
  // A succeeded run whose summary has no val_bpb is invalid too.
  TempDir dir2;
  ASSERT_TRUE(Store::Open(dir2.file("xv.db"), &store).ok());
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(1), &ids).ok());
  ASSERT_TRUE(store->workers().UpsertWorker(MakeRegister("w"), &worker).ok());
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store->attempts().AssignExperiment(ids.experiment_ids[0], worker, &spec).ok());
  AppliedEvents applied;
  ASSERT_TRUE(store->attempts()
                  .ApplyTrainerEvents(worker,
                                      {MakeEvent(ids.experiment_ids[0], 1, 1, "summary",
                                                 R"({"type":"summary","num_steps":5})")},
                                      &applied)
                  .ok());
  xv::v1::Finished f = MakeFinished(ids.experiment_ids[0], 1, "succeeded");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store->attempts().FinishAttempt(worker, f, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store->experiments().GetExperiment(ids.experiment_ids[0], &e).ok());
  EXPECT_EQ(e.state(), "invalid");
  EXPECT_EQ(e.failure_detail().rfind("val_bpb: the summary has none", 0), 0u) << e.failure_detail();
}

}  // namespace
}  // namespace xv::store
