// Tests of the store's read path at lab scale (issue 18): reads run on the pool of read-only
// connections while the writer holds its lock and an open transaction; migration 11's per-state
// counters agree with a count of the table through every change of state; the list functions
// replace their output; the integrity check, run in the background after opening, finds an index
// that does not match its table and puts the database in read-only mode for good; migration 14's
// latest_metrics row follows each experiment's steps on write and is backfilled from old rows;
// migration 17 stores a step event's figures in its events row and keeps the metrics rows before;
// migration 19's id index serves the counts past a cursor.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <chrono>
#include <future>
#include <map>

#include "store_with_worker.h"

namespace xv::store {
namespace {

using testing::MakeEvent;
using testing::MakeFinished;
using testing::MakeSubmission;
using testing::QueryInt;
using testing::StoreWithWorker;
using testing::TempDir;

// Experiments per state counted from the table itself (what the counters must equal).
std::map<std::string, int64_t> CountTable(const std::string& db) {
  std::map<std::string, int64_t> counts;
  std::unique_ptr<SqliteConnection> conn;
  EXPECT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadOnly, &conn).ok());
  SqliteStatement st;
  EXPECT_TRUE(conn->Prepare("SELECT state, COUNT(*) FROM experiments GROUP BY state", &st).ok());
  for (bool row = true;;) {
    EXPECT_TRUE(st.Step(&row).ok());
    if (!row) break;
    counts[st.ColumnText(0)] = st.ColumnInt(1);
  }
  return counts;
}

using ReadPath = StoreWithWorker;

TEST_F(ReadPath, ReadsDoNotWaitForTheWriterAndSeeOnlyCommittedRows) {
  std::future<void> read;
  {
    // The writer's lock held, inside a write transaction that added an experiment.
    MutexLock lock(store_->database().mu());
    SqliteConnection* w = store_->database().conn();
    ASSERT_TRUE(w->BeginImmediate().ok());
    ASSERT_TRUE(w->Exec("INSERT INTO experiments (campaign_id, round_id, recipe_id, name, seed, "
                        "time_budget_s, hard_deadline_s) SELECT campaign_id, round_id, recipe_id, "
                        "'uncommitted', 1, 1, 1 FROM experiments LIMIT 1")
                    .ok());
    read = std::async(std::launch::async, [this] {
      std::vector<xv::v1::Experiment> list;
      ASSERT_TRUE(store_->experiments().ListExperiments({}, &list).ok());
      EXPECT_EQ(list.size(), 2u);  // not the uncommitted third
      xv::v1::Experiment one;
      ASSERT_TRUE(store_->experiments().GetExperiment(ids_.experiment_ids[1], &one).ok());
      std::map<std::string, int64_t> counts;
      ASSERT_TRUE(store_->experiments().CountByState(&counts).ok());
      EXPECT_EQ(counts["queued"], 1);
      EXPECT_EQ(counts["assigned"], 1);
      std::vector<QueuedExperiment> queued;
      ASSERT_TRUE(store_->experiments().ListQueued(&queued).ok());
      EXPECT_EQ(queued.size(), 1u);
    });
    const bool done = read.wait_for(std::chrono::seconds(30)) == std::future_status::ready;
    w->Rollback();
    ASSERT_TRUE(done) << "the reads waited for the writer's lock";
  }
  read.get();
}

TEST_F(ReadPath, CountersFollowEveryChangeOfState) {
  const std::string db = dir_.file("xv.db");
  auto expect_same = [&](const std::string& when) {
    std::map<std::string, int64_t> counts;
    ASSERT_TRUE(store_->experiments().CountByState(&counts).ok());
    EXPECT_EQ(counts, CountTable(db)) << when;
  };
  expect_same("after the fixture's submission and assignment");
  SubmissionIds more;
  ASSERT_TRUE(store_->submissions().InsertSubmission(MakeSubmission(3, "other"), &more).ok());
  expect_same("after a second submission");
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts()
                  .FinishAttempt(worker_, MakeFinished(ids_.experiment_ids[0], 1, "failed"), &ack)
                  .ok());
  expect_same("after a Finished");
  ExperimentState state = ExperimentState::kQueued;
  int64_t worker = 0;
  int attempt = 0;
  ASSERT_TRUE(
      store_->attempts().CancelExperiment(more.experiment_ids[0], &state, &worker, &attempt).ok());
  expect_same("after a cancel");
  {
    MutexLock lock(store_->database().mu());
    SqliteConnection* w = store_->database().conn();
    const std::string id1 = std::to_string(more.experiment_ids[1]);
    const std::string id2 = std::to_string(more.experiment_ids[2]);
    Status changed = w->Exec("UPDATE experiments SET trainer = 'other' WHERE id = " + id1);
    ASSERT_TRUE(changed.ok()) << changed.ToString();
    Status deleted =
        w->Exec("PRAGMA foreign_keys = OFF; DELETE FROM experiments WHERE id = " + id2 +
                "; PRAGMA foreign_keys = ON");
    ASSERT_TRUE(deleted.ok()) << deleted.ToString();
  }
  expect_same("after a trainer change and a delete");
  std::map<std::string, int64_t> by_trainer;
  ASSERT_TRUE(store_->experiments().CountQueuedByTrainer(&by_trainer).ok());
  EXPECT_EQ(by_trainer, (std::map<std::string, int64_t>{{"libtorch", 1}, {"other", 1}}));
}

TEST_F(ReadPath, ListsReplaceTheirOutput) {
  std::vector<xv::v1::Experiment> list(5);
  ASSERT_TRUE(store_->experiments().ListExperiments({}, &list).ok());
  EXPECT_EQ(list.size(), 2u);
  std::vector<QueuedExperiment> queued(3);
  ASSERT_TRUE(store_->experiments().ListQueued(&queued).ok());
  EXPECT_EQ(queued.size(), 1u);
  std::vector<ActiveAttempt> active(3);
  ASSERT_TRUE(store_->experiments().ListActive(&active).ok());
  EXPECT_EQ(active.size(), 1u);
  std::map<std::string, int64_t> counts{{"bogus", 7}};
  ASSERT_TRUE(store_->experiments().CountByState(&counts).ok());
  EXPECT_EQ(counts.count("bogus"), 0u);
}

// The paged reads (issue 18): a count of a list's matches past its cursor, a campaign with only
// the rounds asked for, and one experiment's events read by its index equal to the log's.
TEST_F(ReadPath, PagedReadsCountPickRoundsAndReadOneExperimentsEvents) {
  const int64_t first = ids_.experiment_ids[0], second = ids_.experiment_ids[1];
  xv::v1::ListExperimentsRequest req;
  int64_t n = -1;
  ASSERT_TRUE(store_->experiments().CountExperiments(req, &n).ok());
  EXPECT_EQ(n, 2);
  req.set_descending(true);
  req.set_after_id(second);
  req.set_limit(1);  // ignored by the count
  ASSERT_TRUE(store_->experiments().CountExperiments(req, &n).ok());
  EXPECT_EQ(n, 1);  // ids below the second
  req.Clear();
  req.set_state("queued");
  ASSERT_TRUE(store_->experiments().CountExperiments(req, &n).ok());
  EXPECT_EQ(n, 1);

  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(first, &e).ok());
  xv::v1::Campaign full, c;
  ASSERT_TRUE(store_->campaigns().GetCampaign(e.campaign_id(), "", true, &full).ok());
  ASSERT_EQ(full.rounds_size(), 1);
  ASSERT_GE(full.head_history_size(), 1);
  CampaignDetail none;
  none.rounds = false;
  none.newest_head_changes = 0;
  ASSERT_TRUE(store_->campaigns().GetCampaign(e.campaign_id(), "", none, &c).ok());
  EXPECT_EQ(c.name(), full.name());
  EXPECT_EQ(c.head_recipe_json(), full.head_recipe_json());
  EXPECT_EQ(c.rounds_size(), 0);
  EXPECT_EQ(c.head_history_size(), 0);
  CampaignDetail listed;
  listed.round_ids = {e.round_id(), e.round_id() + 1000};
  listed.newest_head_changes = 1;
  c.Clear();
  ASSERT_TRUE(store_->campaigns().GetCampaign(e.campaign_id(), "", listed, &c).ok());
  ASSERT_EQ(c.rounds_size(), 1);
  EXPECT_EQ(c.rounds(0).SerializeAsString(), full.rounds(0).SerializeAsString());
  ASSERT_EQ(c.head_history_size(), 1);
  EXPECT_EQ(c.head_history(0).SerializeAsString(),
            full.head_history(full.head_history_size() - 1).SerializeAsString());
  CampaignDetail other;
  other.round_ids = {e.round_id() + 1000};
  c.Clear();
  ASSERT_TRUE(store_->campaigns().GetCampaign(e.campaign_id(), "", other, &c).ok());
  EXPECT_EQ(c.rounds_size(), 0);
  CampaignDetail newest;
  newest.newest_rounds = 1;
  c.Clear();
  ASSERT_TRUE(store_->campaigns().GetCampaign(e.campaign_id(), "", newest, &c).ok());
  EXPECT_EQ(c.SerializeAsString(), full.SerializeAsString());
  std::map<int64_t, RoundCounts> rounds;
  ASSERT_TRUE(store_->campaigns().CountRounds(&rounds).ok());
  EXPECT_EQ(rounds[e.campaign_id()].rounds, 1);
  EXPECT_EQ(rounds[e.campaign_id()].open, full.rounds(0).state() == "open" ? 1 : 0);

  std::vector<StoredEvent> log, mine;
  ASSERT_TRUE(store_->events().ListEventsAfter(0, 0, 10000, &log).ok());
  ASSERT_TRUE(store_->events().ListExperimentEventsAfter(first, 0, 0, 10000, &mine).ok());
  std::vector<int64_t> want, got;
  for (const auto& ev : log) {
    if (ev.experiment_id == first) want.push_back(ev.id);
  }
  for (const auto& ev : mine) {
    EXPECT_EQ(ev.experiment_id, first);
    got.push_back(ev.id);
  }
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(got, want);
  mine.clear();
  ASSERT_TRUE(store_->events().ListExperimentEventsAfter(first, want[0], 0, 10000, &mine).ok());
  EXPECT_EQ(mine.size(), want.size() - 1);  // after the cursor
}

// Migration 19: a count of the experiments past an id cursor (CountExperiments' WHERE for
// `xvctl results --before ID` and every paged list's "more match") reads the id index, about 10
// bytes an experiment, and not the table's whole rows.
TEST_F(ReadPath, CountsPastAnIdCursorReadTheIdIndex) {
  std::unique_ptr<SqliteConnection> conn;
  ASSERT_TRUE(
      SqliteConnection::Open(dir_.file("xv.db"), SqliteConnection::Mode::kReadOnly, &conn).ok());
  for (const char* bound : {"e.id < ?", "e.id > ?"}) {
    SqliteStatement st;
    ASSERT_TRUE(conn->Prepare(std::string("EXPLAIN QUERY PLAN SELECT COUNT(*) FROM experiments e "
                                          "WHERE 1 AND ") +
                                  bound,
                              &st)
                    .ok());
    std::string plan;
    for (bool row = true;;) {
      ASSERT_TRUE(st.Step(&row).ok());
      if (!row) break;
      plan += st.ColumnText(3) + "\n";
    }
    EXPECT_NE(plan.find("COVERING INDEX experiments_id"), std::string::npos)
        << bound << ": " << plan;
  }
}

// A step event of `exp`'s attempt `attempt`.
xv::v1::TrainerEvent StepEvent(int64_t exp, int attempt, int64_t seq, int64_t step, double loss,
                               double tok_per_sec) {
  return MakeEvent(exp, attempt, seq, "step",
                   R"({"type":"step","step":)" + std::to_string(step) + R"(,"loss":)" +
                       std::to_string(loss) + R"(,"lrm":1,"dt_ms":10,"tok_per_sec":)" +
                       std::to_string(tok_per_sec) + R"(,"mfu_percent":12.5,"progress":0.5})");
}

// The latest_metrics row of `exp` as "attempt step rows loss tok_per_sec mfu_percent".
std::string LatestRow(const std::string& db, int64_t exp) {
  std::unique_ptr<SqliteConnection> conn;
  EXPECT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadOnly, &conn).ok());
  SqliteStatement st;
  EXPECT_TRUE(conn->Prepare("SELECT attempt || ' ' || step || ' ' || rows || ' ' || COALESCE(loss, "
                            "'') || ' ' || COALESCE(tok_per_sec, '') || ' ' || "
                            "COALESCE(mfu_percent, '') FROM latest_metrics WHERE experiment_id = " +
                                std::to_string(exp),
                            &st)
                  .ok());
  bool row = false;
  EXPECT_TRUE(st.Step(&row).ok());
  return row ? st.ColumnText(0) : "(none)";
}

TEST_F(ReadPath, LatestMetricsFollowTheHighestStepOfTheNewestAttemptOncePerBatch) {
  const std::string db = dir_.file("xv.db");
  const int64_t exp = ids_.experiment_ids[0];
  EXPECT_EQ(LatestRow(db, exp), "(none)");
  AppliedEvents applied;
  // One batch of three steps: one row, the highest step's figures, three rows counted.
  ASSERT_TRUE(
      store_->attempts()
          .ApplyTrainerEvents(worker_,
                              {StepEvent(exp, 1, 1, 0, 9.0, 100), StepEvent(exp, 1, 2, 2, 8.0, 120),
                               StepEvent(exp, 1, 3, 1, 8.5, 110)},
                              &applied)
          .ok());
  EXPECT_EQ(LatestRow(db, exp), "1 2 3 8.0 120.0 12.5");
  // A later batch with a lower step counts its row and keeps the figures; a higher one replaces
  // them; a duplicate counts nothing.
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(worker_, {StepEvent(exp, 1, 4, 1, 7.0, 1)}, &applied)
                  .ok());
  EXPECT_EQ(LatestRow(db, exp), "1 2 4 8.0 120.0 12.5");
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_, {StepEvent(exp, 1, 4, 9, 1.0, 1), StepEvent(exp, 1, 5, 3, 7.5, 130)},
                      &applied)
                  .ok());
  EXPECT_EQ(applied.duplicates, 1);
  EXPECT_EQ(LatestRow(db, exp), "1 3 5 7.5 130.0 12.5");
  EXPECT_EQ(Count("SELECT COUNT(*) FROM metrics WHERE experiment_id = " + std::to_string(exp)), 5);
  {
    // The row already follows a newer attempt: a step of attempt 1 (a late event) leaves it.
    MutexLock lock(store_->database().mu());
    ASSERT_TRUE(
        store_->database()
            .conn()
            ->Exec("UPDATE latest_metrics SET attempt = 2, rows = 1 WHERE experiment_id = " +
                   std::to_string(exp))
            .ok());
  }
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(worker_, {StepEvent(exp, 1, 6, 4, 7.0, 140)}, &applied)
                  .ok());
  EXPECT_EQ(LatestRow(db, exp), "2 3 1 7.5 130.0 12.5");
}

TEST_F(ReadPath, MigrationFourteenBackfillsLatestMetricsFromTheMetricsRows) {
  const std::string db = dir_.file("xv.db");
  const int64_t exp = ids_.experiment_ids[0];
  AppliedEvents applied;
  ASSERT_TRUE(
      store_->attempts()
          .ApplyTrainerEvents(worker_,
                              {StepEvent(exp, 1, 1, 0, 9.0, 100), StepEvent(exp, 1, 2, 5, 8.0, 120),
                               StepEvent(exp, 1, 3, 1, 8.5, 110)},
                              &applied)
          .ok());
  const std::string written = LatestRow(db, exp);
  EXPECT_EQ(written, "1 5 3 8.0 120.0 12.5");
  {
    // Rows of an older attempt of the other experiment and of this one: the newest attempt wins.
    MutexLock lock(store_->database().mu());
    const std::string other = std::to_string(ids_.experiment_ids[1]);
    ASSERT_TRUE(store_->database()
                    .conn()
                    ->Exec("INSERT INTO metrics(experiment_id, attempt, step, loss) VALUES (" +
                           other + ", 1, 7, 3.0), (" + other + ", 2, 1, 4.0), (" + other +
                           ", 2, 2, 5.0), (" + std::to_string(exp) + ", 0, 99, 1.0)")
                    .ok());
  }
  store_.reset();
  {
    // The database as schema 13 left it (no latest_metrics table), and migration 14 run on it.
    // The later migrations rebuild or rename tables, so they are not run a second time.
    std::unique_ptr<SqliteConnection> conn;
    ASSERT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadWrite, &conn).ok());
    ASSERT_TRUE(conn->Exec("DROP TABLE latest_metrics; PRAGMA user_version = 13").ok());
    ASSERT_TRUE(testing::MigrateTo(conn.get(), 14).ok());
    ASSERT_TRUE(
        conn->Exec("PRAGMA user_version = " + std::to_string(EmbeddedMigrations().size())).ok());
  }
  ASSERT_TRUE(Store::Open(db, &store_).ok());
  EXPECT_EQ(LatestRow(db, exp), written);
  EXPECT_EQ(LatestRow(db, ids_.experiment_ids[1]), "2 2 2 5.0  ");
}

// Schema 17: a step event's figures live in its own events row, metrics is a view of those rows
// and of stored_metrics. A plausible step event is one row in events (with its figures) and one
// row in metrics; an implausible one is stored with no figures and is no metrics row.
TEST_F(ReadPath, StepFiguresAreStoredInTheEventsRowAndReadThroughMetrics) {
  const std::string db = dir_.file("xv.db");
  const int64_t exp = ids_.experiment_ids[0];
  const std::string e = std::to_string(exp);
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(
                      worker_,
                      {StepEvent(exp, 1, 1, 3, 9.0, 100),
                       MakeEvent(exp, 1, 2, "step", R"({"type":"step","step":4,"dt_ms":-1})")},
                      &applied)
                  .ok());
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM events WHERE source = 'trainer' AND "
                     "experiment_id = " +
                         e),
            2);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM events WHERE experiment_id = " + e +
                             " AND seq = 1 AND step = 3 AND loss = 9.0 AND tok_per_sec = 100.0 "
                             "AND mfu_percent = 12.5 AND progress = 0.5"),
            1);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM events WHERE experiment_id = " + e +
                             " AND seq = 2 AND step IS NULL AND loss IS NULL"),
            1);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM metrics WHERE experiment_id = " + e), 1);
  EXPECT_EQ(QueryInt(db, "SELECT step FROM metrics WHERE experiment_id = " + e), 3);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM stored_metrics"), 0);
}

// Migration 17 on a database of schema 16: the metrics rows stored before stay metrics rows
// (in stored_metrics, figures unchanged), no events row is added, and a row inserted into metrics
// directly lands in stored_metrics.
TEST(Migrations, SeventeenKeepsTheMetricsRowsStoredBefore) {
  TempDir dir;
  const std::string db = dir.file("xv.db");
  {
    std::unique_ptr<SqliteConnection> conn;
    ASSERT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadWrite, &conn).ok());
    ASSERT_TRUE(testing::MigrateTo(conn.get(), 16).ok());
    ASSERT_TRUE(conn->Exec("PRAGMA foreign_keys = OFF").ok());  // rows of no experiment row
    ASSERT_TRUE(conn->Exec("INSERT INTO metrics(experiment_id, attempt, step, loss, tok_per_sec) "
                           "VALUES (7, 1, 1, 3.5, 100), (7, 1, 2, 3.25, 110), (8, 2, 1, 4.0, NULL)")
                    .ok());
    ASSERT_TRUE(conn->Exec("INSERT INTO events(source, experiment_id, attempt, seq, type, json) "
                           "VALUES ('trainer', 7, 1, 1, 'step', '{\"step\":1}')")
                    .ok());
  }
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(db, &store).ok());
  EXPECT_EQ(store->database().schema_version(), static_cast<int>(EmbeddedMigrations().size()));
  store.reset();
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM metrics"), 3);
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM metrics WHERE experiment_id = 7 AND attempt = 1 "
                     "AND ((step = 1 AND loss = 3.5 AND tok_per_sec = 100) OR (step = 2 AND "
                     "loss = 3.25 AND tok_per_sec = 110))"),
            2);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM events"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM events WHERE step IS NOT NULL"), 0);
  {
    std::unique_ptr<SqliteConnection> conn;
    ASSERT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadWrite, &conn).ok());
    ASSERT_TRUE(conn->Exec("PRAGMA foreign_keys = OFF").ok());
    ASSERT_TRUE(conn->Exec("INSERT INTO metrics(experiment_id, attempt, step, loss) "
                           "VALUES (8, 2, 2, 3.0)")
                    .ok());
  }
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM stored_metrics WHERE experiment_id = 8"), 2);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM metrics WHERE experiment_id = 8 AND attempt = 2"),
            2);
}

// Version 18 rebuilds events without its reference to experiments: every row keeps its id and
// every column, the UNIQUE index and the metrics view (and its trigger) are as before, and only
// the foreign key is gone.
TEST(Migrations, EighteenKeepsEveryEventAndDropsOnlyTheExperimentReference) {
  TempDir dir;
  const std::string db = dir.file("xv.db");
  const std::string count_references = "SELECT COUNT(*) FROM pragma_foreign_key_list('events')";
  {
    std::unique_ptr<SqliteConnection> conn;
    ASSERT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadWrite, &conn).ok());
    ASSERT_TRUE(testing::MigrateTo(conn.get(), 17).ok());
    ASSERT_TRUE(conn->Exec("PRAGMA foreign_keys = OFF").ok());  // rows of no experiment row
    ASSERT_TRUE(
        conn->Exec("INSERT INTO events(id, source, experiment_id, attempt, seq, type, json, "
                   "unix_ms, created_at, step, loss, lrm, dt_ms, tok_per_sec, mfu_percent, "
                   "progress) VALUES (40, 'trainer', 7, 1, 3, 'step', '{\"step\":9}', 1234, "
                   "'2026-12-03T07:00:00.000Z', 9, 3.5, 0.75, 12.5, 2048, 41.5, 0.25), "
                   "(41, 'daemon', NULL, NULL, NULL, 'writable', '{\"after\":\"x\"}', NULL, "
                   "'2026-12-03T07:00:01.000Z', NULL, NULL, NULL, NULL, NULL, NULL, NULL)")
            .ok());
    ASSERT_TRUE(conn->Exec("INSERT INTO metrics(experiment_id, attempt, step, loss) "
                           "VALUES (8, 2, 1, 4.0)")
                    .ok());
  }
  ASSERT_EQ(QueryInt(db, count_references), 1);  // version 17 still has it
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(db, &store).ok());
  EXPECT_EQ(store->database().schema_version(), static_cast<int>(EmbeddedMigrations().size()));
  store.reset();
  EXPECT_EQ(QueryInt(db, count_references), 0);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM events"), 2);
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM events WHERE id = 40 AND source = 'trainer' AND "
                     "experiment_id = 7 AND attempt = 1 AND seq = 3 AND type = 'step' AND json = "
                     "'{\"step\":9}' AND unix_ms = 1234 AND created_at = "
                     "'2026-12-03T07:00:00.000Z' AND step = 9 AND loss = 3.5 AND lrm = 0.75 AND "
                     "dt_ms = 12.5 AND tok_per_sec = 2048 AND mfu_percent = 41.5 AND progress = "
                     "0.25"),
            1);
  EXPECT_EQ(QueryInt(db,
                     "SELECT COUNT(*) FROM events WHERE id = 41 AND source = 'daemon' AND "
                     "experiment_id IS NULL AND type = 'writable' AND created_at = "
                     "'2026-12-03T07:00:01.000Z' AND step IS NULL"),
            1);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM pragma_index_list('events') WHERE \"unique\" = 1"),
            1);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM metrics"), 2);  // the event's and the stored row
  {
    std::unique_ptr<SqliteConnection> conn;  // foreign_keys=ON, as the daemon's
    ASSERT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadWrite, &conn).ok());
    // The same (experiment, attempt, seq) is still refused; an experiment without a row is not.
    EXPECT_FALSE(conn->Exec("INSERT INTO events(source, experiment_id, attempt, seq, type) "
                            "VALUES ('trainer', 7, 1, 3, 'step')")
                     .ok());
    EXPECT_TRUE(conn->Exec("INSERT INTO events(source, experiment_id, attempt, seq, type) "
                           "VALUES ('trainer', 7, 1, 4, 'log')")
                    .ok());
    ASSERT_TRUE(conn->Exec("PRAGMA foreign_keys = OFF").ok());  // stored_metrics keeps its own
    ASSERT_TRUE(conn->Exec("INSERT INTO metrics(experiment_id, attempt, step, loss) "
                           "VALUES (8, 2, 2, 3.0)")
                    .ok());
  }
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM stored_metrics WHERE experiment_id = 8"), 2);
}

// An index whose definition no longer matches its entries: the schema reads, so the file opens,
// and only the full integrity check (not quick_check) sees it.
void MisdefineAnIndex(const std::string& db) {
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &raw), SQLITE_OK);
  char* err = nullptr;
  const int rc = sqlite3_exec(raw,
                              "PRAGMA writable_schema = ON;"
                              "UPDATE sqlite_master SET sql = 'CREATE INDEX experiments_round ON "
                              "experiments(seed)' WHERE name = 'experiments_round';"
                              "PRAGMA writable_schema = OFF;",
                              nullptr, nullptr, &err);
  EXPECT_EQ(rc, SQLITE_OK) << (err ? err : "");
  sqlite3_free(err);
  sqlite3_close(raw);
}

TEST(Integrity, MismatchedIndexOpensThenPutsTheDatabaseInReadOnlyModeForGood) {
  TempDir dir;
  const std::string db = dir.file("xv.db");
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(db, &store).ok());
    SubmissionIds ids;
    ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(3), &ids).ok());
  }
  MisdefineAnIndex(db);
  std::unique_ptr<Store> store;
  Status s = Store::Open(db, &store);
  ASSERT_TRUE(s.ok()) << "xvd starts on it: " << s.ToString();
  std::vector<xv::v1::Experiment> list;
  ASSERT_TRUE(store->experiments().ListExperiments({}, &list).ok());
  EXPECT_EQ(list.size(), 3u);
  std::string result;
  ASSERT_TRUE(store->database().IntegrityCheck(&result).ok());
  EXPECT_NE(result, "ok");
  EXPECT_NE(result.find("experiments_round"), std::string::npos) << result;
  const std::string fault = store->database().WriteFault();
  EXPECT_NE(fault.find("integrity_check failed"), std::string::npos) << fault;
  SubmissionIds ids;
  s = store->submissions().InsertSubmission(MakeSubmission(1, "later"), &ids);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  bool writable = true;
  ASSERT_TRUE(store->database().RetryWrites(&writable).ok());
  EXPECT_FALSE(writable);
  EXPECT_EQ(store->database().WriteFault(), fault);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM experiments"), 3);
}

TEST(Integrity, SoundFileReadsOk) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  SubmissionIds ids;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(2), &ids).ok());
  std::string result;
  ASSERT_TRUE(store->database().IntegrityCheck(&result).ok());
  EXPECT_EQ(result, "ok");
  EXPECT_EQ(store->database().WriteFault(), "");
}

}  // namespace
}  // namespace xv::store
