// Tests of xv_store: migrations, reopen, read-only use, the experiment state machine and the
// exactly-once application of trainer events.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <fstream>

#include "daemon/store/embedded_migrations.h"
#include "daemon/store/migration_runner.h"
#include "daemon/store/store.h"
#include "store_fixture.h"

namespace xv::store {
namespace {

using testing::MakeEvent;
using testing::MakeRegister;
using testing::MakeSubmission;
using testing::TempDir;

// One integer from a query on a fresh read-only connection (what another process would see).
int64_t QueryInt(const std::string& db, const std::string& sql) {
  std::unique_ptr<SqliteConnection> conn;
  Status s = SqliteConnection::Open(db, SqliteConnection::Mode::kReadOnly, &conn);
  EXPECT_TRUE(s.ok()) << s.ToString();
  SqliteStatement st;
  s = conn->Prepare(sql, &st);
  EXPECT_TRUE(s.ok()) << s.ToString();
  bool row = false;
  EXPECT_TRUE(st.Step(&row).ok());
  EXPECT_TRUE(row) << sql;
  return row ? st.ColumnInt(0) : -1;
}

TEST(Migrations, FreshDatabaseReachesNewestVersionWithEveryTable) {
  TempDir dir;
  std::unique_ptr<Store> store;
  Status s = Store::Open(dir.file("xv.db"), &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  const int newest = static_cast<int>(EmbeddedMigrations().size());
  ASSERT_GE(newest, 1);
  EXPECT_EQ(store->database().schema_version(), newest);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "PRAGMA user_version"), newest);
  for (const char* table : {"campaigns", "recipes", "rounds", "experiments", "attempts", "results",
                            "metrics", "nan_events", "workers", "events"}) {
    EXPECT_EQ(QueryInt(dir.file("xv.db"),
                       std::string("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND "
                                   "name = '") +
                           table + "'"),
              1)
        << table;
  }
  std::unique_ptr<SqliteConnection> conn;
  ASSERT_TRUE(
      SqliteConnection::Open(dir.file("xv.db"), SqliteConnection::Mode::kReadOnly, &conn).ok());
  SqliteStatement st;
  ASSERT_TRUE(conn->Prepare("PRAGMA journal_mode", &st).ok());
  bool row = false;
  ASSERT_TRUE(st.Step(&row).ok());
  EXPECT_EQ(st.ColumnText(0), "wal");
}

TEST(Migrations, ReopenKeepsDataAndDoesNotReapply) {
  TempDir dir;
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
    SubmissionIds ids;
    ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(2), &ids).ok());
  }
  std::unique_ptr<Store> store;
  Status s = Store::Open(dir.file("xv.db"), &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  std::map<std::string, int64_t> counts;
  ASSERT_TRUE(store->experiments().CountByState(&counts).ok());
  EXPECT_EQ(counts["queued"], 2);
  // Workers of an earlier daemon are offline until they reconnect.
  int64_t worker = 0;
  ASSERT_TRUE(store->workers().UpsertWorker(MakeRegister("w"), &worker).ok());
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM workers WHERE state = 'idle'"), 1);
  ASSERT_TRUE(store->workers().MarkAllWorkersOffline().ok());
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM workers WHERE state = 'offline'"), 1);
}

TEST(Migrations, RefusesDatabaseNewerThanBinary) {
  TempDir dir;
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  }
  {
    std::unique_ptr<SqliteConnection> conn;
    ASSERT_TRUE(
        SqliteConnection::Open(dir.file("xv.db"), SqliteConnection::Mode::kReadWrite, &conn).ok());
    ASSERT_TRUE(conn->Exec("PRAGMA user_version = 999").ok());
  }
  std::unique_ptr<Store> store;
  Status s = Store::Open(dir.file("xv.db"), &store);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("newer"), std::string::npos) << s.message();
  s = Store::OpenReadOnly(dir.file("xv.db"), &store);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
}

TEST(Migrations, VersionTwoGivesExistingCampaignsTheirBaseAsFirstHead) {
  TempDir dir;
  {
    std::unique_ptr<SqliteConnection> conn;
    ASSERT_TRUE(
        SqliteConnection::Open(dir.file("xv.db"), SqliteConnection::Mode::kReadWrite, &conn).ok());
    std::vector<Migration> v1 = {EmbeddedMigrations().at(0)};
    ASSERT_EQ(v1[0].version, 1);
    ASSERT_TRUE(ApplyMigrations(conn.get(), v1, nullptr, nullptr).ok());
    ASSERT_TRUE(conn->Exec("INSERT INTO recipes(id, hash, recipe_json, resolved_json) "
                           "VALUES (5, 'h5', '{}', '{}')")
                    .ok());
    ASSERT_TRUE(conn->Exec("INSERT INTO campaigns(name, base_recipe_id, head_recipe_id) "
                           "VALUES ('old', 5, 5)")
                    .ok());
  }
  std::unique_ptr<Store> store;
  Status s = Store::Open(dir.file("xv.db"), &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GE(store->database().schema_version(), 2);
  xv::v1::Campaign c;
  ASSERT_TRUE(store->campaigns().GetCampaign(0, "old", true, &c).ok());
  EXPECT_EQ(c.head_recipe_hash(), "h5");
  EXPECT_EQ(c.policy_json(), "{}");
  EXPECT_EQ(c.trainer(), "libtorch");
  ASSERT_EQ(c.head_history_size(), 1);
  EXPECT_EQ(c.head_history(0).reason(), "base");
  EXPECT_EQ(c.head_history(0).recipe_hash(), "h5");
  s = store->campaigns().GetCampaign(0, "missing", false, &c);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_NE(s.message().find("missing"), std::string::npos);
}

TEST(Migrations, EachMigrationIsAtomicAndBacksUpBeforeUpgrading) {
  TempDir dir;
  std::unique_ptr<SqliteConnection> conn;
  ASSERT_TRUE(
      SqliteConnection::Open(dir.file("m.db"), SqliteConnection::Mode::kReadWrite, &conn).ok());
  std::vector<Migration> v1 = {{1, "0001_a", "CREATE TABLE a (x INTEGER);"}};
  int from = -1, to = -1;
  ASSERT_TRUE(ApplyMigrations(conn.get(), v1, &from, &to).ok());
  EXPECT_EQ(from, 0);
  EXPECT_EQ(to, 1);
  ASSERT_TRUE(conn->Exec("INSERT INTO a VALUES (7)").ok());
  // Version 2 fails half-way: neither its first statement nor the version bump may remain.
  std::vector<Migration> broken = {v1[0],
                                   {2, "0002_b", "CREATE TABLE b (y); SELECT nope FROM nowhere;"}};
  Status s = ApplyMigrations(conn.get(), broken, &from, &to);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("0002_b"), std::string::npos) << s.message();
  int version = 0;
  ASSERT_TRUE(ReadSchemaVersion(conn.get(), &version).ok());
  EXPECT_EQ(version, 1);
  SqliteStatement st;
  EXPECT_FALSE(conn->Prepare("SELECT * FROM b", &st).ok()) << "table b survived a failed migration";
  // A good version 2 upgrades, after writing a backup copy of version 1.
  std::vector<Migration> good = {v1[0], {2, "0002_b", "CREATE TABLE b (y);"}};
  s = ApplyMigrations(conn.get(), good, &from, &to);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(to, 2);
  EXPECT_TRUE(std::filesystem::exists(dir.file("m.db.before-v2")));
  EXPECT_EQ(QueryInt(dir.file("m.db.before-v2"), "SELECT x FROM a"), 7);
  EXPECT_EQ(QueryInt(dir.file("m.db.before-v2"), "PRAGMA user_version"), 1);
  // Gaps in numbering are a build error, reported as such.
  std::vector<Migration> gap = {v1[0], {3, "0003_c", "SELECT 1;"}};
  EXPECT_EQ(ApplyMigrations(conn.get(), gap, nullptr, nullptr).code(),
            Status::Code::kInvalidArgument);
}

TEST(ReadOnly, ListsButCannotWrite) {
  TempDir dir;
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
    SubmissionIds ids;
    ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(3), &ids).ok());
  }
  std::unique_ptr<Store> ro;
  Status s = Store::OpenReadOnly(dir.file("xv.db"), &ro);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_TRUE(ro->database().read_only());
  std::vector<xv::v1::Experiment> list;
  ASSERT_TRUE(ro->experiments().ListExperiments(xv::v1::ListExperimentsRequest(), &list).ok());
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(list[1].name(), "c1");
  EXPECT_EQ(list[1].state(), "queued");
  EXPECT_EQ(list[1].recipe_hash(), "default-hash-1");
  SubmissionIds ids;
  s = ro->submissions().InsertSubmission(MakeSubmission(1, "other"), &ids);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  int64_t worker = 0;
  EXPECT_FALSE(ro->workers().UpsertWorker(MakeRegister("w"), &worker).ok());
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM experiments"), 3);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM workers"), 0);
}

TEST(ReadOnly, ReadsBesideALiveWriter) {
  TempDir dir;
  std::unique_ptr<Store> writer;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &writer).ok());
  SubmissionIds ids;
  ASSERT_TRUE(writer->submissions().InsertSubmission(MakeSubmission(2), &ids).ok());
  std::unique_ptr<Store> reader;
  Status s = Store::OpenReadOnly(dir.file("xv.db"), &reader);
  ASSERT_TRUE(s.ok()) << s.ToString();
  // Writes committed after the reader opened are visible to its next query (WAL).
  ASSERT_TRUE(writer->submissions().InsertSubmission(MakeSubmission(1, "second"), &ids).ok());
  std::vector<xv::v1::Experiment> list;
  ASSERT_TRUE(reader->experiments().ListExperiments(xv::v1::ListExperimentsRequest(), &list).ok());
  EXPECT_EQ(list.size(), 3u);
  xv::v1::ListExperimentsRequest by_name;
  by_name.set_campaign("second");
  list.clear();
  ASSERT_TRUE(reader->experiments().ListExperiments(by_name, &list).ok());
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].id(), ids.experiment_ids[0]);
}

TEST(ReadOnly, MissingFileIsAnErrorNamingIt) {
  TempDir dir;
  std::unique_ptr<Store> ro;
  Status s = Store::OpenReadOnly(dir.file("absent.db"), &ro);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("absent.db"), std::string::npos) << s.message();
  EXPECT_FALSE(std::filesystem::exists(dir.file("absent.db")));
}

class StoreWithWorker : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Store::Open(dir_.file("xv.db"), &store_).ok());
    ASSERT_TRUE(store_->submissions().InsertSubmission(MakeSubmission(2), &ids_).ok());
    ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("host:cpu"), &worker_).ok());
    ASSERT_TRUE(store_->attempts().AssignExperiment(ids_.experiment_ids[0], worker_, &spec_).ok());
  }
  int64_t Count(const std::string& sql) { return QueryInt(dir_.file("xv.db"), sql); }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  SubmissionIds ids_;
  int64_t worker_ = 0;
  xv::v1::ExperimentSpec spec_;
};

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
  xv::v1::Finished f;
  f.set_experiment_id(exp);
  f.set_attempt(1);
  f.set_state("succeeded");
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
  xv::v1::Finished f;
  f.set_experiment_id(ids_.experiment_ids[0]);
  f.set_attempt(1);
  f.set_state("succeeded");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, f, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(ids_.experiment_ids[0], &e).ok());
  EXPECT_EQ(e.state(), "failed");
  EXPECT_EQ(e.failure_kind(), "crashed");
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
  xv::v1::Finished cancelled;
  cancelled.set_experiment_id(other);
  cancelled.set_attempt(1);
  cancelled.set_state("cancelled");
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
  xv::v1::Finished ok;
  ok.set_experiment_id(exp);
  ok.set_attempt(1);
  ok.set_state("succeeded");
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
  xv::v1::Finished ok;
  ok.set_experiment_id(exp);
  ok.set_attempt(1);
  ok.set_state("succeeded");
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
  xv::v1::Finished ok;
  ok.set_experiment_id(exp);
  ok.set_attempt(1);
  ok.set_state("succeeded");
  ok.set_stderr_tail("done\n");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, ok, &ack).ok());
  const std::string where = " WHERE experiment_id = " + std::to_string(exp) + " AND attempt = 1";
  ASSERT_EQ(Count("SELECT COUNT(*) FROM attempts" + where + " AND state = 'succeeded'"), 1);
  const int64_t state_events = Count("SELECT COUNT(*) FROM events WHERE type = 'state'");

  xv::v1::Finished late;
  late.set_experiment_id(exp);
  late.set_attempt(1);
  late.set_state("failed");
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
  xv::v1::Finished cancelled;
  cancelled.set_experiment_id(exp);
  cancelled.set_attempt(1);
  cancelled.set_state("cancelled");
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
  xv::v1::Finished ok;
  ok.set_experiment_id(exp);
  ok.set_attempt(1);
  ok.set_state("succeeded");
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
  xv::v1::Finished f;
  f.set_experiment_id(ids.experiment_ids[0]);
  f.set_attempt(1);
  f.set_state("succeeded");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store->attempts().FinishAttempt(worker, f, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store->experiments().GetExperiment(ids.experiment_ids[0], &e).ok());
  EXPECT_EQ(e.state(), "invalid");
  EXPECT_EQ(e.failure_detail().rfind("val_bpb: the summary has none", 0), 0u) << e.failure_detail();
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
  xv::v1::Finished f;
  f.set_experiment_id(ids_.experiment_ids[0]);
  f.set_attempt(1);
  f.set_state("cancelled");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, f, &ack).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(ids_.experiment_ids[0], &e).ok());
  EXPECT_EQ(e.state(), "cancelled");
  EXPECT_EQ(store_->attempts().CancelExperiment(9999, &state, &worker, &attempt).code(),
            Status::Code::kNotFound);
}

// `xvctl status` names trainers no connected worker offers from this count (one GROUP BY).
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
TEST(Lookup, CampaignsAndPlansByIdOrNameWithNotFoundNamingTheRequest) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  std::map<std::string, int64_t> campaign_ids;
  for (const char* name : {"lr", "wd"}) {
    NewCampaign nc;
    nc.name = name;
    nc.base_hash = std::string("base-") + name;
    nc.base_recipe_json = R"({"depth":2})";
    nc.base_resolved_json = R"({"depth":2,"model_dim":128})";
    ASSERT_TRUE(store->campaigns().CreateCampaign(nc, &campaign_ids[name]).ok());
  }
  xv::v1::Campaign c;
  ASSERT_TRUE(store->campaigns().GetCampaign(0, "wd", false, &c).ok());
  EXPECT_EQ(c.id(), campaign_ids["wd"]);
  ASSERT_TRUE(store->campaigns().GetCampaign(campaign_ids["lr"], "", true, &c).ok());
  EXPECT_EQ(c.name(), "lr");
  EXPECT_EQ(c.head_history_size(), 1);
  Status s = store->campaigns().GetCampaign(99, "", false, &c);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "campaign id 99: no such campaign");
  s = store->campaigns().SetCampaignState(0, "nope", CampaignState::kPaused);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "campaign 'nope': no such campaign");
  std::vector<xv::v1::Campaign> campaigns;
  ASSERT_TRUE(store->campaigns().ListCampaigns(&campaigns).ok());
  ASSERT_EQ(campaigns.size(), 2u);
  EXPECT_EQ(campaigns[1].name(), "wd");

  // Plan names may repeat: by name is the newest.
  std::vector<int64_t> plan_ids;
  for (const char* name : {"nightly", "nightly", "other"}) {
    StoredPlan plan;
    plan.campaign_id = campaign_ids["lr"];
    plan.name = name;
    plan.yaml = "phases: []\n";
    ASSERT_TRUE(store->plans().InsertPlan(plan, &plan_ids.emplace_back()).ok());
  }
  StoredPlan plan;
  ASSERT_TRUE(store->plans().GetPlan(0, "nightly", &plan).ok());
  EXPECT_EQ(plan.id, plan_ids[1]);
  EXPECT_EQ(plan.campaign, "lr");
  ASSERT_TRUE(store->plans().GetPlan(plan_ids[0], "", &plan).ok());
  EXPECT_EQ(plan.name, "nightly");
  EXPECT_EQ(plan.state, PlanState::kRunning);
  s = store->plans().GetPlan(99, "", &plan);
  EXPECT_EQ(s.code(), Status::Code::kNotFound);
  EXPECT_EQ(s.message(), "plan id 99: no such plan");
  s = store->plans().GetPlan(0, "nope", &plan);
  EXPECT_EQ(s.message(), "plan 'nope': no such plan");
  std::vector<StoredPlan> plans;
  ASSERT_TRUE(store->plans().ListPlans("", &plans).ok());
  ASSERT_EQ(plans.size(), 3u);
  EXPECT_EQ(plans[2].name, "other");
  plans.clear();
  ASSERT_TRUE(store->plans().ListPlans("done", &plans).ok());
  EXPECT_TRUE(plans.empty());
}

TEST(Submission, AllRowsOrNoneAndRecipesDeduplicated) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  NewSubmission sub = MakeSubmission(3);
  sub.experiments[2].device_requirement = "tpu";  // violates the CHECK constraint
  SubmissionIds ids;
  EXPECT_FALSE(store->submissions().InsertSubmission(sub, &ids).ok());
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM experiments"), 0);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM rounds"), 0);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes"), 0);
  // Two submissions of the same configs share recipe rows but get their own rounds.
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(2), &ids).ok());
  SubmissionIds ids2;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(2), &ids2).ok());
  EXPECT_EQ(ids.campaign_id, ids2.campaign_id);
  EXPECT_NE(ids.round_id, ids2.round_id);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes"), 3);  // base + 2
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM experiments"), 4);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM events WHERE type = 'submit'"), 2);
  std::string integrity;
  ASSERT_TRUE(store->database().IntegrityCheck(&integrity).ok());
  EXPECT_EQ(integrity, "ok");
}

TEST(Open, CorruptFileIsRefusedWithDataLoss) {
  TempDir dir;
  {
    std::ofstream f(dir.file("xv.db"), std::ios::binary);
    f << std::string(8192, 'x');
  }
  std::unique_ptr<Store> store;
  Status s = Store::Open(dir.file("xv.db"), &store);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kDataLoss) << s.ToString();
}

}  // namespace
}  // namespace xv::store
