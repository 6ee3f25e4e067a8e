// The fixture most store tests share: a database with a submission of two experiments and one
// worker holding the first (attempt 1, assigned), plus QueryInt, which reads a figure the way
// another process would.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "daemon/store/embedded_migrations.h"
#include "daemon/store/migration_runner.h"
#include "daemon/store/store.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"

namespace xv::store::testing {

// One integer from a query on a fresh read-only connection (what another process would see).
inline int64_t QueryInt(const std::string& db, const std::string& sql) {
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

// Brings the database of `conn` to schema `version` with the embedded migrations 1..version (an
// older schema than the binary's, for a migration test).
inline Status MigrateTo(SqliteConnection* conn, int version) {
  const std::vector<Migration>& all = EmbeddedMigrations();
  if (version < 1 || version > static_cast<int>(all.size())) {
    return Status::InvalidArgument("no embedded migration " + std::to_string(version));
  }
  return ApplyMigrations(conn, std::vector<Migration>(all.begin(), all.begin() + version), nullptr,
                         nullptr);
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

}  // namespace xv::store::testing
