// The store's operational upkeep (issue 6) and the event log Watch reads (issue 5), on a real
// SQLite file:
//  - WalStaysBoundedAndTruncates: 400 commits of ~16 KiB each (about 6 MiB) never grow the -wal
//    file past the checkpoint threshold plus one transaction, every commit reaches the listener,
//    and the idle TRUNCATE checkpoint leaves an empty -wal file.
//  - CampaignMaxAttemptsDecidesRequeue: a campaign created with max_attempts 3 requeues a lost
//    attempt twice and ends lost at attempt 3 (the daemon passes max_attempts 0: the campaign's).
//  - EventLogHasEveryStateInOrder: submission, assignment, trainer events and the end appear in
//    the events table as Watch reads them, oldest first, each once; ScopeIdle follows.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <thread>

#include "daemon/store/sqlite_connection.h"
#include "daemon/store/wal_checkpointer.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"

namespace xv::store {
namespace {

using testing::MakeEvent;
using testing::MakeRegister;
using testing::MakeSubmission;
using testing::TempDir;

int64_t FileSize(const std::string& path) {
  std::error_code ec;
  auto n = std::filesystem::file_size(path, ec);
  return ec ? 0 : static_cast<int64_t>(n);
}

TEST(StoreUpkeep, WalStaysBoundedAndTruncates) {
  TempDir dir;
  const std::string db = dir.file("xv.db");
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(db, &store).ok());
  std::atomic<int> commits{0};
  constexpr int kCheckpointPages = 100;
  store->database().SetCommitListener([&] { ++commits; }, kCheckpointPages);
  const std::string blob(16 * 1024, 'x');
  int64_t max_wal = 0;
  for (int i = 0; i < 400; ++i) {
    ASSERT_TRUE(store->events()
                    .AppendAudit("upkeep_test",
                                 "{\"i\":" + std::to_string(i) + ",\"blob\":\"" + blob + "\"}")
                    .ok());
    max_wal = std::max(max_wal, FileSize(db + "-wal"));
  }
  EXPECT_EQ(commits.load(), 400);
  const int64_t written = 400LL * 16 * 1024;
  // Threshold pages plus one transaction (a few pages of 4 KiB) plus frame headers.
  const int64_t bound = (kCheckpointPages + 30) * (4096 + 24) + 32;
  std::printf("wal: %lld bytes written through it, largest -wal file %lld bytes (bound %lld)\n",
              static_cast<long long>(written), static_cast<long long>(max_wal),
              static_cast<long long>(bound));
  EXPECT_GT(max_wal, 0);
  EXPECT_LT(max_wal, bound);
  EXPECT_LT(max_wal * 5, written);
  // Idle: nothing committed for 0 ms -> TRUNCATE: the -wal file is emptied.
  ASSERT_TRUE(
      store->database().MaintainWal(std::chrono::hours(1), std::chrono::milliseconds(0)).ok());
  EXPECT_EQ(FileSize(db + "-wal"), 0);
  // Everything is still there.
  int64_t newest = 0;
  ASSERT_TRUE(store->events().MaxEventId(&newest).ok());
  EXPECT_GE(newest, 400);
  std::string integrity;
  ASSERT_TRUE(store->database().IntegrityCheck(&integrity).ok());
  EXPECT_EQ(integrity, "ok");
}

// The checkpointer copies, on its own thread and connection, what another connection committed
// into the WAL back into the database file.
TEST(StoreUpkeep, BackgroundCheckpointCopiesTheWalIntoTheDatabaseFile) {
  TempDir dir;
  const std::string db = dir.file("bg.db");
  std::unique_ptr<SqliteConnection> writer;
  ASSERT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadWrite, &writer).ok());
  // SQLite's auto-checkpoint off: only the checkpointer copies.
  ASSERT_TRUE(writer->Exec("PRAGMA wal_autocheckpoint = 0; CREATE TABLE t(x TEXT)").ok());
  std::unique_ptr<WalCheckpointer> checkpointer;
  ASSERT_TRUE(WalCheckpointer::Open(db, &checkpointer).ok());
  const std::string blob(4000, 'x');
  ASSERT_TRUE(writer->Exec("BEGIN").ok());
  for (int i = 0; i < 200; ++i) {
    SqliteStatement st;
    ASSERT_TRUE(writer->Prepare("INSERT INTO t(x) VALUES (?)", &st).ok());
    st.Bind(1, blob + std::to_string(i));
    ASSERT_TRUE(st.Run().ok());
  }
  ASSERT_TRUE(writer->Exec("COMMIT").ok());
  const int64_t before = FileSize(db);
  EXPECT_LT(before, 50 * 4096);  // the rows are in the WAL only
  checkpointer->Request();
  checkpointer->Wait();
  EXPECT_EQ(checkpointer->checkpoints(), 1);
  EXPECT_GT(FileSize(db), before + 200 * 4000);
  // The rows read back through the file and the WAL alike.
  SqliteStatement count;
  ASSERT_TRUE(writer->Prepare("SELECT COUNT(*) FROM t", &count).ok());
  bool row = false;
  ASSERT_TRUE(count.Step(&row).ok());
  EXPECT_EQ(count.ColumnInt(0), 200);
}

TEST(StoreUpkeep, CampaignMaxAttemptsDecidesRequeue) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  NewCampaign nc;
  nc.name = "three";
  nc.base_hash = "base-hash-three";
  nc.base_recipe_json = R"({"depth":2})";
  nc.base_resolved_json = R"({"depth":2,"model_dim":128})";
  nc.max_attempts = 3;
  int64_t cid = 0;
  ASSERT_TRUE(store->campaigns().CreateCampaign(nc, &cid).ok());
  xv::v1::Campaign shown;
  ASSERT_TRUE(store->campaigns().GetCampaign(cid, "", false, &shown).ok());
  EXPECT_EQ(shown.max_attempts(), 3);
  SubmissionIds ids;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(1, "three"), &ids).ok());
  int64_t worker = 0;
  ASSERT_TRUE(store->workers().UpsertWorker(MakeRegister("w"), &worker).ok());
  const int64_t exp = ids.experiment_ids[0];
  for (int attempt = 1; attempt <= 3; ++attempt) {
    xv::v1::ExperimentSpec spec;
    ASSERT_TRUE(store->attempts().AssignExperiment(exp, worker, &spec).ok());
    ASSERT_EQ(spec.attempt(), attempt);
    bool requeued = false;
    ASSERT_TRUE(store->attempts().MarkAttemptLost(exp, attempt, "no heartbeat", 0, &requeued).ok());
    EXPECT_EQ(requeued, attempt < 3) << "attempt " << attempt;
  }
  xv::v1::Experiment e;
  ASSERT_TRUE(store->experiments().GetExperiment(exp, &e).ok());
  EXPECT_EQ(e.state(), "lost");
  // A campaign created without a limit (and the implicit "default" one) keeps 2.
  SubmissionIds other;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(1), &other).ok());
  xv::v1::Campaign def;
  ASSERT_TRUE(store->campaigns().GetCampaign(0, "default", false, &def).ok());
  EXPECT_EQ(def.max_attempts(), 2);
}

TEST(StoreUpkeep, EventLogHasEveryStateInOrder) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  int64_t before = 0;
  ASSERT_TRUE(store->events().MaxEventId(&before).ok());
  SubmissionIds ids;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(1, "log"), &ids).ok());
  bool idle = true;
  ASSERT_TRUE(store->events().ScopeIdle(ids.campaign_id, &idle).ok());
  EXPECT_FALSE(idle);
  int64_t worker = 0;
  ASSERT_TRUE(store->workers().UpsertWorker(MakeRegister("w"), &worker).ok());
  const int64_t exp = ids.experiment_ids[0];
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store->attempts().AssignExperiment(exp, worker, &spec).ok());
  AppliedEvents applied;
  ASSERT_TRUE(store->attempts()
                  .ApplyTrainerEvents(
                      worker,
                      {MakeEvent(exp, 1, 1, "start", R"({"type":"start"})"),
                       MakeEvent(exp, 1, 2, "step", R"({"type":"step","step":1,"loss":3.5})"),
                       MakeEvent(exp, 1, 2, "step", R"({"type":"step","step":1,"loss":3.5})"),
                       MakeEvent(exp, 1, 3, "summary",
                                 R"({"type":"summary","val_bpb":1.25,"training_seconds":1,)"
                                 R"("total_seconds":2,"num_steps":1})")},
                      &applied)
                  .ok());
  xv::v1::Finished fin;
  fin.set_experiment_id(exp);
  fin.set_attempt(1);
  fin.set_state("succeeded");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store->attempts().FinishAttempt(worker, fin, &ack).ok());
  // A resent Finished: no second state event, only its finished_ignored record (which Watch does
  // not stream).
  ASSERT_TRUE(store->attempts().FinishAttempt(worker, fin, &ack).ok());
  std::vector<StoredEvent> rows;
  ASSERT_TRUE(store->events().ListEventsAfter(before, 0, 100, &rows).ok());
  std::vector<std::string> seen;
  for (const auto& r : rows) {
    if (r.experiment_id != exp) continue;
    EXPECT_EQ(r.campaign, "log");
    EXPECT_EQ(r.round_id, ids.round_id);
    EXPECT_EQ(r.name, "c0");
    std::string what = r.type;
    if (r.type == "state") {
      what += ":" + std::string(r.json.find("\"queued\"") != std::string::npos      ? "queued"
                                : r.json.find("\"assigned\"") != std::string::npos  ? "assigned"
                                : r.json.find("\"succeeded\"") != std::string::npos ? "succeeded"
                                                                                    : r.json);
    }
    seen.push_back(what);
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"state:queued", "state:assigned", "start", "step",
                                            "summary", "state:succeeded", "finished_ignored"}));
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_LT(rows[i - 1].id, rows[i].id);
  // up_to_id bounds the replay.
  std::vector<StoredEvent> first_two;
  ASSERT_TRUE(store->events().ListEventsAfter(before, rows[1].id, 100, &first_two).ok());
  EXPECT_EQ(first_two.size(), 2u);
  ASSERT_TRUE(store->events().ScopeIdle(ids.campaign_id, &idle).ok());
  EXPECT_TRUE(idle);
}

}  // namespace
}  // namespace xv::store
