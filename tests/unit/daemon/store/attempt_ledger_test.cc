// Tests of AttemptLedger: assignment, the exactly-once application of trainer events, lost
// attempts and cancellation.
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

TEST_F(StoreWithWorker, AssignBuildsSpecAndRefusesTwice) {
  EXPECT_EQ(spec_.experiment_id(), ids_.experiment_ids[0]);
  EXPECT_EQ(spec_.attempt(), 1);
  EXPECT_EQ(spec_.recipe_hash(), "default-hash-0");
  EXPECT_EQ(spec_.recipe_json(), R"({"depth":2,"seed":42})");
  EXPECT_EQ(spec_.trainer(), "libtorch");
  EXPECT_DOUBLE_EQ(spec_.time_budget_s(), 20);
  EXPECT_DOUBLE_EQ(spec_.hard_deadline_s(), 340);
  xv::v1::ExperimentSpec again;
  EXPECT_EQ(store_->attempts().AssignExperiment(ids_.experiment_ids[0], worker_, &again).code(),
            Status::Code::kFailedPrecondition);
  std::vector<QueuedExperiment> queued;
  ASSERT_TRUE(store_->experiments().ListQueued(&queued).ok());
  ASSERT_EQ(queued.size(), 1u);
  EXPECT_EQ(queued[0].id, ids_.experiment_ids[1]);
}

// A pass's assignments share one transaction; one that can no longer be made (here: its
// experiment is already assigned) is refused alone, and the others are made as one by one.
TEST_F(StoreWithWorker, AssignmentsOfAPassAreMadeTogetherAndARefusalStaysAlone) {
  int64_t second = 0;
  ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("host:gpu1"), &second).ok());
  std::vector<xv::v1::ExperimentSpec> specs;
  std::vector<Status> results;
  ASSERT_TRUE(store_->attempts()
                  .AssignExperiments({{ids_.experiment_ids[0], second},
                                      {ids_.experiment_ids[1], second},
                                      {987654, second}},
                                     &specs, &results)
                  .ok());
  ASSERT_EQ(results.size(), 3u);
  EXPECT_EQ(results[0].code(), Status::Code::kFailedPrecondition);  // assigned in SetUp
  EXPECT_TRUE(results[1].ok()) << results[1].ToString();
  EXPECT_EQ(results[2].code(), Status::Code::kNotFound);
  EXPECT_EQ(specs[1].experiment_id(), ids_.experiment_ids[1]);
  EXPECT_EQ(specs[1].attempt(), 1);
  EXPECT_EQ(specs[1].recipe_hash(), "default-hash-1");
  const std::string e1 = std::to_string(ids_.experiment_ids[1]);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM experiments WHERE id = " + e1 +
                  " AND state = 'assigned' AND worker_id = " + std::to_string(second)),
            1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM attempts WHERE experiment_id = " + e1), 1);
  // The refused one kept its first worker and its one attempt.
  const std::string e0 = std::to_string(ids_.experiment_ids[0]);
  EXPECT_EQ(Count("SELECT worker_id FROM experiments WHERE id = " + e0), worker_);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM attempts WHERE experiment_id = " + e0), 1);
  EXPECT_EQ(Count("SELECT state = 'busy' FROM workers WHERE id = " + std::to_string(second)), 1);
}

TEST_F(StoreWithWorker, EventsAreAppliedExactlyOnce) {
  const int64_t exp = ids_.experiment_ids[0];
  std::vector<xv::v1::TrainerEvent> batch = {
      MakeEvent(exp, 1, 1, "start", R"({"type":"start","t":1,"device":{"name":"cpu: test"}})"),
      MakeEvent(
          exp, 1, 2, "step",
          R"({"type":"step","t":2,"step":0,"loss":9.0,"lrm":1,"dt_ms":10,"tok_per_sec":100,"mfu_percent":null,"progress":0.25})"),
      MakeEvent(
          exp, 1, 3, "step",
          R"({"type":"step","t":3,"step":1,"loss":8.5,"lrm":1,"dt_ms":10,"tok_per_sec":110,"mfu_percent":null,"progress":0.5})"),
  };
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, batch, &applied).ok());
  EXPECT_EQ(applied.duplicates, 0);
  ASSERT_EQ(applied.acks.size(), 1u);
  EXPECT_EQ(applied.acks[0].seq(), 3);
  // A replay (worker reconnect) of the same events changes nothing.
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, batch, &applied).ok());
  EXPECT_EQ(applied.duplicates, 3);
  EXPECT_EQ(applied.acks[0].seq(), 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM metrics"), 2);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 3);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "running");
  EXPECT_DOUBLE_EQ(e.progress(), 0.5);
  EXPECT_DOUBLE_EQ(e.last_loss(), 8.5);
  EXPECT_EQ(e.device_name(), "cpu: test");
  EXPECT_FALSE(e.started_at().empty());  // the start event's time
  EXPECT_EQ(e.worker(), "host:cpu");
}

TEST_F(StoreWithWorker, AckIsHighestContiguousSeq) {
  const int64_t exp = ids_.experiment_ids[0];
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(worker_,
                                      {MakeEvent(exp, 1, 1, "log", R"({"type":"log"})"),
                                       MakeEvent(exp, 1, 2, "log", R"({"type":"log"})"),
                                       MakeEvent(exp, 1, 4, "log", R"({"type":"log"})")},
                                      &applied)
                  .ok());
  ASSERT_EQ(applied.acks.size(), 1u);
  EXPECT_EQ(applied.acks[0].seq(), 2);  // 3 is missing
  ASSERT_TRUE(
      store_->attempts()
          .ApplyTrainerEvents(worker_, {MakeEvent(exp, 1, 3, "log", R"({"type":"log"})")}, &applied)
          .ok());
  EXPECT_EQ(applied.acks[0].seq(), 4);
}

// The ack's search starts past the seqs the batch itself stored: here out of order, with a gap,
// and next to seqs stored before that gap was filled.
TEST_F(StoreWithWorker, AckCountsTheBatchsOwnSeqsAndThoseStoredBeforeAGapWasFilled) {
  const int64_t exp = ids_.experiment_ids[0];
  auto logs = [exp](std::initializer_list<int64_t> seqs) {
    std::vector<xv::v1::TrainerEvent> out;
    for (int64_t seq : seqs) out.push_back(MakeEvent(exp, 1, seq, "log", R"({"type":"log"})"));
    return out;
  };
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, logs({6, 7, 8, 9}), &applied).ok());
  ASSERT_EQ(applied.acks.size(), 1u);
  EXPECT_EQ(applied.acks[0].seq(), 0);  // seq 1 missing
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, logs({3, 1, 2, 5}), &applied).ok());
  EXPECT_EQ(applied.acks[0].seq(), 3);  // 4 missing; 5..9 wait for it
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, logs({2, 4}), &applied).ok());
  EXPECT_EQ(applied.duplicates, 1);
  EXPECT_EQ(applied.acks[0].seq(), 9);  // 4 filled the gap before 5..9
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, logs({11, 10}), &applied).ok());
  EXPECT_EQ(applied.acks[0].seq(), 11);
}

// The figures the daemon's session threads read ahead (ReadStepEventAhead) are what the
// transaction stores: the flat plausible step events' figures, and nothing for the others, which
// the transaction reads in full as before. A read-ahead of another length than the events is
// refused, nothing stored.
TEST_F(StoreWithWorker, StepFiguresReadAheadAreTheOnesStored) {
  const int64_t exp = ids_.experiment_ids[0];
  const std::vector<xv::v1::TrainerEvent> events = {
      MakeEvent(exp, 1, 1, "step", R"({"type":"step","step":4,"loss":2.5,"progress":0.5})"),
      MakeEvent(exp, 1, 2, "step", R"({"type":"step","step":5,"loss":2.0,"progress":1.5})"),
      MakeEvent(exp, 1, 3, "step", R"({"type":"step","step":6,"loss":1.5,"extra":{"a":1}})"),
      MakeEvent(exp, 1, 4, "log", R"({"type":"log","message":"hello"})"),
      MakeEvent(exp, 1, 5, "step", R"({"type":"step","step":7,"loss":1.0,"dt_ms":12})"),
  };
  FlatJsonObject scratch;
  std::vector<StepEventFigures> read_ahead;
  for (const xv::v1::TrainerEvent& ev : events) {
    read_ahead.push_back(ReadStepEventAhead(ev, &scratch));
  }
  ASSERT_TRUE(read_ahead[0].has_value());
  EXPECT_EQ(read_ahead[0]->step, 4);
  EXPECT_EQ(read_ahead[0]->loss, 2.5);
  EXPECT_EQ(read_ahead[0]->progress, 0.5);
  EXPECT_FALSE(read_ahead[0]->dt_ms.has_value());
  EXPECT_FALSE(read_ahead[1].has_value());  // progress 1.5: implausible
  EXPECT_FALSE(read_ahead[2].has_value());  // nested: not flat
  EXPECT_FALSE(read_ahead[3].has_value());  // not a step
  ASSERT_TRUE(read_ahead[4].has_value());
  EXPECT_EQ(read_ahead[4]->dt_ms, 12);

  std::vector<AppliedEvents> applied;
  const std::vector<StepEventFigures> short_by_one(read_ahead.begin(), read_ahead.end() - 1);
  const Status refused = store_->attempts().ApplyTrainerEventBatches(
      {WorkerEvents{worker_, {{&events, &short_by_one}}}}, &applied);
  EXPECT_EQ(refused.code(), Status::Code::kInvalidArgument) << refused.ToString();
  EXPECT_NE(refused.message().find("4 read-ahead figures for 5 events"), std::string::npos)
      << refused.message();
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 0);

  // The transaction takes the read-ahead as given: a changed figure is the one stored. The
  // events come in two chunks (two messages of the worker): seqs 1..3 and 4..5.
  read_ahead[4]->loss = 0.25;
  const std::vector<xv::v1::TrainerEvent> first(events.begin(), events.begin() + 3);
  const std::vector<StepEventFigures> first_read(read_ahead.begin(), read_ahead.begin() + 3);
  const std::vector<xv::v1::TrainerEvent> second(events.begin() + 3, events.end());
  const std::vector<StepEventFigures> second_read(read_ahead.begin() + 3, read_ahead.end());
  ASSERT_TRUE(
      store_->attempts()
          .ApplyTrainerEventBatches(
              {WorkerEvents{worker_, {{&first, &first_read}, {&second, &second_read}}}}, &applied)
          .ok());
  ASSERT_EQ(applied.size(), 1u);
  ASSERT_EQ(applied[0].acks.size(), 1u);
  EXPECT_EQ(applied[0].acks[0].seq(), 5);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 5);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM metrics"), 3);  // seqs 1, 3 (read in full) and 5
  EXPECT_EQ(Count("SELECT CAST(loss * 100 AS INTEGER) FROM events WHERE seq = 5"), 25);
  EXPECT_EQ(Count("SELECT CAST(loss * 100 AS INTEGER) FROM events WHERE seq = 3"), 150);
  EXPECT_EQ(Count("SELECT step IS NULL FROM events WHERE seq = 2"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM attempts WHERE failure_kind = 'implausible_result' AND "
                  "failure_detail LIKE '%progress%' AND experiment_id = " +
                  std::to_string(exp)),
            1);  // seq 2's progress
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_DOUBLE_EQ(e.last_loss(), 0.25);
}

// Group commit (the daemon's EventWriter): two workers' events in one transaction, each batch
// answered on its own, and the experiment rows as event-by-event application leaves them.
TEST_F(StoreWithWorker, BatchesOfSeveralWorkersAreAppliedTogether) {
  int64_t other = 0;
  ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("other"), &other).ok());
  xv::v1::ExperimentSpec spec2;
  ASSERT_TRUE(store_->attempts().AssignExperiment(ids_.experiment_ids[1], other, &spec2).ok());
  const int64_t a = ids_.experiment_ids[0], b = ids_.experiment_ids[1];
  auto step = [](int64_t exp, int64_t seq, int step, const char* loss, const char* progress) {
    return MakeEvent(exp, 1, seq, "step",
                     std::string(R"({"type":"step","step":)") + std::to_string(step) +
                         R"(,"loss":)" + loss + R"(,"progress":)" + progress + "}");
  };
  // Worker 1: steps, then an error (it must see the steps' row), then a step without a loss.
  const std::vector<xv::v1::TrainerEvent> first = {
      step(a, 1, 0, "9.0", "0.1"), step(a, 2, 1, "8.0", "0.2"),
      MakeEvent(a, 1, 3, "error", R"({"type":"error","kind":"oom","message":"out of memory"})"),
      step(a, 4, 2, "null", "0.3")};
  // Worker 2: a step, and one event of an attempt it does not hold (refused, not an error).
  const std::vector<xv::v1::TrainerEvent> second = {step(b, 1, 0, "7.5", "0.5"),
                                                    MakeEvent(a, 1, 5, "log", R"({"type":"log"})")};
  std::vector<AppliedEvents> applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEventBatches(
                      {WorkerEvents{worker_, &first}, WorkerEvents{other, &second}}, &applied)
                  .ok());
  ASSERT_EQ(applied.size(), 2u);
  ASSERT_EQ(applied[0].acks.size(), 1u);
  EXPECT_EQ(applied[0].acks[0].experiment_id(), a);
  EXPECT_EQ(applied[0].acks[0].seq(), 4);
  EXPECT_EQ(applied[0].rejected, 0);
  ASSERT_EQ(applied[1].acks.size(), 1u);
  EXPECT_EQ(applied[1].acks[0].experiment_id(), b);
  EXPECT_EQ(applied[1].acks[0].seq(), 1);
  EXPECT_EQ(applied[1].rejected, 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM metrics"), 4);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(a, &e).ok());
  EXPECT_EQ(e.state(), "running");
  EXPECT_DOUBLE_EQ(e.progress(), 0.3);
  EXPECT_DOUBLE_EQ(e.last_loss(), 8.0);  // the last step without a loss keeps the one before
  EXPECT_EQ(e.failure_kind(), "oom");
  ASSERT_TRUE(store_->experiments().GetExperiment(b, &e).ok());
  EXPECT_EQ(e.state(), "running");
  EXPECT_DOUBLE_EQ(e.progress(), 0.5);
  EXPECT_DOUBLE_EQ(e.last_loss(), 7.5);
  // Replayed together, everything is a duplicate.
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEventBatches(
                      {WorkerEvents{worker_, &first}, WorkerEvents{other, &second}}, &applied)
                  .ok());
  EXPECT_EQ(applied[0].duplicates, 4);
  EXPECT_EQ(applied[1].duplicates, 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM metrics"), 4);
}

// Step events are stored in runs (multi-row inserts of 64, 16, 4 rows) where none of a run's
// seqs is stored yet, and one by one elsewhere: either way each seq once, the first sent winning,
// every repeat counted, and the figures, latest_metrics and the ack as one-by-one storing leaves
// them.
TEST_F(StoreWithWorker, RunsOfStepEventsAreStoredOnceEachWhateverWasStoredBefore) {
  const int64_t exp = ids_.experiment_ids[0];
  // The event of seq s: step 10 s, loss 10 - s / 100, progress s / 1000.
  auto step = [exp](int64_t seq) {
    return MakeEvent(exp, 1, seq, "step",
                     R"({"type":"step","step":)" + std::to_string(seq * 10) + R"(,"loss":)" +
                         std::to_string(10.0 - seq / 100.0) + R"(,"progress":)" +
                         std::to_string(seq / 1000.0) + "}");
  };
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(worker_, {step(3), step(150), step(151)}, &applied)
                  .ok());
  // Seqs 1..200: a log event at 10 (it stores the steps before it), and seq 140 sent twice, the
  // second time with other figures. Runs: 1..9 (holds 3: one by one), 11..74 and 75..138 (64
  // rows each), 139..140 (too short), 140..200 (holds 140, 150, 151: one by one).
  std::vector<xv::v1::TrainerEvent> batch;
  for (int64_t seq = 1; seq <= 200; ++seq) {
    batch.push_back(seq == 10 ? MakeEvent(exp, 1, seq, "log", R"({"type":"log"})") : step(seq));
    if (seq == 140) {
      batch.push_back(MakeEvent(exp, 1, 140, "step",
                                R"({"type":"step","step":99999,"loss":1,"progress":0.9})"));
    }
  }
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, batch, &applied).ok());
  EXPECT_EQ(applied.duplicates, 4);  // 3, 140 again, 150, 151
  ASSERT_EQ(applied.acks.size(), 1u);
  EXPECT_EQ(applied.acks[0].seq(), 200);
  // 201..221: 16 + 4 + 1 rows.
  std::vector<xv::v1::TrainerEvent> tail;
  for (int64_t seq = 201; seq <= 221; ++seq) tail.push_back(step(seq));
  ASSERT_TRUE(store_->attempts().ApplyTrainerEvents(worker_, tail, &applied).ok());
  EXPECT_EQ(applied.duplicates, 0);
  EXPECT_EQ(applied.acks[0].seq(), 221);

  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 221);
  EXPECT_EQ(Count("SELECT COUNT(DISTINCT seq) FROM events WHERE source = 'trainer'"), 221);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM metrics"), 220);
  // Every stored row carries the figures of its own seq's first event.
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE type = 'step' AND step = seq * 10 AND "
                  "abs(loss - (10.0 - seq / 100.0)) < 1e-9 AND abs(progress - seq / 1000.0) < "
                  "1e-9"),
            220);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE step = 99999"), 0);
  EXPECT_EQ(Count("SELECT rows FROM latest_metrics WHERE experiment_id = " + std::to_string(exp)),
            220);
  EXPECT_EQ(Count("SELECT step FROM latest_metrics WHERE experiment_id = " + std::to_string(exp)),
            2210);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_DOUBLE_EQ(e.progress(), 0.221);
  EXPECT_DOUBLE_EQ(e.last_loss(), 7.79);
}

TEST_F(StoreWithWorker, EventsOfAnotherWorkersAttemptAreRefused) {
  int64_t other = 0;
  ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("other"), &other).ok());
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      other, {MakeEvent(ids_.experiment_ids[0], 1, 1, "log", R"({"type":"log"})")},
                      &applied)
                  .ok());
  EXPECT_EQ(applied.rejected, 1);
  EXPECT_TRUE(applied.acks.empty());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 0);
}

TEST_F(StoreWithWorker, NanAndErrorEventsAreRecordedWithTheFailure) {
  const int64_t exp = ids_.experiment_ids[0];
  AppliedEvents applied;
  ASSERT_TRUE(
      store_->attempts()
          .ApplyTrainerEvents(
              worker_,
              {MakeEvent(exp, 1, 1, "nan",
                         R"({"type":"nan","step":17,"micro_step":0,"what":"loss","value":"nan"})"),
               MakeEvent(
                   exp, 1, 2, "error",
                   R"({"type":"error","kind":"diverged","message":"loss is nan at step 17"})")},
              &applied)
          .ok());
  xv::v1::Finished f;
  f.set_experiment_id(exp);
  f.set_attempt(1);
  f.set_exit_code(3);
  f.set_state("diverged");
  f.set_stderr_tail("loss nan\n");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, f, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "diverged");
  EXPECT_EQ(e.failure_kind(), "diverged");
  EXPECT_EQ(e.failure_detail(), "loss is nan at step 17");
  EXPECT_EQ(Count("SELECT step FROM nan_events"), 17);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM nan_events WHERE knobs_json LIKE '%matrix_lr%'"), 1);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM experiments WHERE stderr_tail = 'loss nan\n'"), 1);
}

TEST_F(StoreWithWorker, DeepEventsAreStoredButNotInterpretedAndNeverDumped) {
  const int64_t exp = ids_.experiment_ids[0];
  AppliedEvents applied;
  // An error event whose message nests 100,000 deep (the issue's crash-looping trainer line):
  // stored as sent (cut to the event size limit), not interpreted, and the daemon lives on.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  ASSERT_TRUE(
      store_->attempts()
          .ApplyTrainerEvents(
              worker_,
              {MakeEvent(exp, 1, 1, "start", R"({"type":"start","device":{"name":"cpu: test"}})"),
               MakeEvent(exp, 1, 2, "error",
                         R"({"type":"error","kind":"crashed","message":)" + deep + "}"),
               MakeEvent(exp, 1, 3, "nan", R"({"type":"nan","step":1,"what":)" + deep + "}")},
              &applied)
          .ok());
  ASSERT_EQ(applied.acks.size(), 1u);
  EXPECT_EQ(applied.acks[0].seq(), 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 3);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM nan_events"), 0);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "running");
  EXPECT_EQ(e.failure_detail(), "");

  // Shallow non-string text fields are described, not dumped; numbers outside int64 are left out.
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_,
                      {MakeEvent(exp, 1, 4, "error",
                                 R"({"type":"error","kind":{"k":[1]},"message":[[1],[2],[3]]})"),
                       MakeEvent(exp, 1, 5, "nan",
                                 R"({"type":"nan","step":1e300,"what":["loss"],"value":1.5})")},
                      &applied)
                  .ok());
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.failure_kind(), "an object of 1 keys");
  EXPECT_EQ(e.failure_detail(), "an array of 3");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM nan_events WHERE step IS NULL AND what = 'an array of 1' "
                  "AND value = '1.5'"),
            1);
  // A step number outside int64 is no step number: the step is kept in the event log only (not a
  // metrics row, no undefined conversion), and the run goes on.
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_,
                      {MakeEvent(exp, 1, 6, "step", R"({"type":"step","step":-1e300,"loss":2.0})")},
                      &applied)
                  .ok());
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(Count("SELECT COUNT(*) FROM metrics"), 0);
  EXPECT_EQ(Count("SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 6);
  EXPECT_EQ(e.state(), "running");
}

TEST_F(StoreWithWorker, LostAttemptIsRequeuedOnceThenLost) {
  const int64_t exp = ids_.experiment_ids[0];
  bool requeued = false;
  ASSERT_TRUE(store_->attempts().MarkAttemptLost(exp, 1, "no heartbeat", 2, &requeued).ok());
  EXPECT_TRUE(requeued);
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "queued");
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store_->attempts().AssignExperiment(exp, worker_, &spec).ok());
  EXPECT_EQ(spec.attempt(), 2);
  // A late event of attempt 1 does not move attempt 2.
  AppliedEvents applied;
  ASSERT_TRUE(
      store_->attempts()
          .ApplyTrainerEvents(worker_,
                              {MakeEvent(exp, 1, 1, "step",
                                         R"({"type":"step","step":5,"loss":3.0,"progress":0.9})")},
                              &applied)
          .ok());
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "assigned");
  EXPECT_DOUBLE_EQ(e.progress(), 0.0);
  ASSERT_TRUE(store_->attempts().MarkAttemptLost(exp, 2, "no heartbeat", 2, &requeued).ok());
  EXPECT_FALSE(requeued);
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "lost");
  EXPECT_EQ(e.failure_kind(), "lost");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM attempts WHERE experiment_id = " + std::to_string(exp) +
                  " AND state = 'lost'"),
            2);
  // Marking an attempt that is no longer active is a no-op.
  ASSERT_TRUE(store_->attempts().MarkAttemptLost(exp, 1, "late", 5, &requeued).ok());
  EXPECT_FALSE(requeued);
  ASSERT_TRUE(store_->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "lost");
}

TEST_F(StoreWithWorker, CancelQueuedAndRunning) {
  ExperimentState state = ExperimentState::kQueued;
  int64_t worker = -1;
  int attempt = -1;
  ASSERT_TRUE(
      store_->attempts().CancelExperiment(ids_.experiment_ids[1], &state, &worker, &attempt).ok());
  EXPECT_EQ(state, ExperimentState::kCancelled);
  EXPECT_EQ(worker, 0);
  ASSERT_TRUE(
      store_->attempts().CancelExperiment(ids_.experiment_ids[0], &state, &worker, &attempt).ok());
  EXPECT_EQ(state, ExperimentState::kCancelled);
  EXPECT_EQ(worker, worker_);
  EXPECT_EQ(attempt, 1);
  // The worker's Finished(cancelled) keeps the state and is acknowledged.
  xv::v1::Finished f = MakeFinished(ids_.experiment_ids[0], 1, "cancelled");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, f, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(ids_.experiment_ids[0], &e).ok());
  EXPECT_EQ(e.state(), "cancelled");
  EXPECT_EQ(store_->attempts().CancelExperiment(9999, &state, &worker, &attempt).code(),
            Status::Code::kNotFound);
}

// `xvctl status` names trainers no connected worker offers from this count (one GROUP BY).
// Placement's history (migration 15): the attempts of the candidates asked about, per worker,
// and nothing of the other candidates of their round.
TEST_F(StoreWithWorker, CandidateAttemptsAreCountedPerCandidateAndWorker) {
  // Fixture: c0 of the round is assigned to worker_ (attempt 1), c1 is queued.
  std::vector<CandidateWorkerCount> history;
  ASSERT_TRUE(store_->experiments()
                  .CountCandidateAttempts({{ids_.round_id, "c0"}, {ids_.round_id, "c1"}}, &history)
                  .ok());
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].round_id, ids_.round_id);
  EXPECT_EQ(history[0].candidate, "c0");
  EXPECT_EQ(history[0].worker_id, worker_);
  EXPECT_EQ(history[0].count, 1);
  // Only the candidates asked about: c0's attempt is not counted for c1 alone.
  ASSERT_TRUE(store_->experiments().CountCandidateAttempts({{ids_.round_id, "c1"}}, &history).ok());
  EXPECT_TRUE(history.empty());
}

TEST_F(StoreWithWorker, CountQueuedByTrainerCountsOnlyQueuedExperiments) {
  NewSubmission noisy = MakeSubmission(3, "noisy");
  noisy.trainer = "noisy";
  SubmissionIds noisy_ids;
  ASSERT_TRUE(store_->submissions().InsertSubmission(noisy, &noisy_ids).ok());
  NewSubmission unnamed = MakeSubmission(1, "unnamed");
  unnamed.trainer = "";  // an empty trainer is the default one
  SubmissionIds unnamed_ids;
  ASSERT_TRUE(store_->submissions().InsertSubmission(unnamed, &unnamed_ids).ok());
  ExperimentState state = ExperimentState::kQueued;
  int64_t worker = 0;
  int attempt = 0;
  ASSERT_TRUE(store_->attempts()
                  .CancelExperiment(noisy_ids.experiment_ids[0], &state, &worker, &attempt)
                  .ok());
  // Fixture: experiment 0 (libtorch) is assigned, experiment 1 (libtorch) queued.
  std::map<std::string, int64_t> counts;
  ASSERT_TRUE(store_->experiments().CountQueuedByTrainer(&counts).ok());
  EXPECT_EQ(counts, (std::map<std::string, int64_t>{{"libtorch", 2}, {"noisy", 2}}));

  for (int64_t id : {ids_.experiment_ids[1], noisy_ids.experiment_ids[1],
                     noisy_ids.experiment_ids[2], unnamed_ids.experiment_ids[0]}) {
    ASSERT_TRUE(store_->attempts().CancelExperiment(id, &state, &worker, &attempt).ok());
  }
  counts.clear();
  ASSERT_TRUE(store_->experiments().CountQueuedByTrainer(&counts).ok());
  EXPECT_TRUE(counts.empty());
}

// Campaigns and plans are read by id or by name through one lookup (statement_rows.h): the
// newest row of a name, and NotFound naming what was asked for.
}  // namespace
}  // namespace xv::store
