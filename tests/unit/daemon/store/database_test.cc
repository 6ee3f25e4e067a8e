// Tests of the store's Database: migrations, reopen, read-only use and a corrupt file.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <fstream>
#include <string>

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
                            "stored_metrics", "nan_events", "workers", "events"}) {
    EXPECT_EQ(QueryInt(dir.file("xv.db"),
                       std::string("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND "
                                   "name = '") +
                           table + "'"),
              1)
        << table;
  }
  // Schema 17: metrics is a view (a step event's figures live in its events row).
  EXPECT_EQ(QueryInt(dir.file("xv.db"),
                     "SELECT COUNT(*) FROM sqlite_master WHERE type = 'view' AND name = 'metrics'"),
            1);
  std::unique_ptr<SqliteConnection> conn;
  ASSERT_TRUE(
      SqliteConnection::Open(dir.file("xv.db"), SqliteConnection::Mode::kReadOnly, &conn).ok());
  SqliteStatement st;
  ASSERT_TRUE(conn->Prepare("PRAGMA journal_mode", &st).ok());
  bool row = false;
  ASSERT_TRUE(st.Step(&row).ok());
  EXPECT_EQ(st.ColumnText(0), "wal");
}

// Migration 12 dropped events_experiment (experiment_id, attempt): the unique index on
// (experiment_id, attempt, seq) serves the lookups of an attempt's events, which every trainer
// event's acknowledgement and the reclaim check run.
TEST(Migrations, AnAttemptsEventsAreFoundThroughTheUniqueIndexAlone) {
  TempDir dir;
  std::unique_ptr<Store> store;
  Status s = Store::Open(dir.file("xv.db"), &store);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(QueryInt(dir.file("xv.db"),
                     "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND name = "
                     "'events_experiment'"),
            0);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open_v2(dir.file("xv.db").c_str(), &db, SQLITE_OPEN_READONLY, nullptr),
            SQLITE_OK);
  for (const char* sql :
       {"SELECT e.seq FROM events e WHERE e.source = 'trainer' AND e.experiment_id = 1 AND "
        "e.attempt = 1 AND e.seq >= 3 AND NOT EXISTS (SELECT 1 FROM events f WHERE "
        "f.experiment_id = 1 AND f.attempt = 1 AND f.seq = e.seq + 1) ORDER BY e.seq LIMIT 1",
        "SELECT 1 FROM events WHERE source = 'trainer' AND experiment_id = 1 AND attempt = 1"}) {
    sqlite3_stmt* st = nullptr;
    ASSERT_EQ(sqlite3_prepare_v2(db, (std::string("EXPLAIN QUERY PLAN ") + sql).c_str(), -1, &st,
                                 nullptr),
              SQLITE_OK)
        << sqlite3_errmsg(db);
    std::string plan;
    while (sqlite3_step(st) == SQLITE_ROW) {
      plan += reinterpret_cast<const char*>(sqlite3_column_text(st, 3));
      plan += "; ";
    }
    sqlite3_finalize(st);
    EXPECT_NE(plan.find("USING INDEX sqlite_autoindex_events_1"), std::string::npos)
        << sql << "\nplan: " << plan;
    EXPECT_EQ(plan.find("SCAN"), std::string::npos) << sql << "\nplan: " << plan;
  }
  sqlite3_close(db);
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
    ASSERT_TRUE(testing::MigrateTo(conn.get(), 1).ok());
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
