// UTF-8 discipline of the store and the worker edge (issue 11): every cut backs up to a code-point
// boundary, nothing stored can be invalid UTF-8, a database poisoned before the fix heals on read,
// Register is bounded, and worker rows of made-up names do not live forever. Real SQLite files.
#include <gtest/gtest.h>

#include <sqlite3.h>

#include <algorithm>

#include "common/untrusted_text.h"
#include "daemon/api/worker_message_edge.h"
#include "daemon/store/store.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"
#include "xv/v1/experiments.pb.h"

namespace xv::store {
namespace {

using testing::MakeEvent;
using testing::MakeRegister;
using testing::MakeSubmission;
using testing::TempDir;

std::string Repeat(const std::string& s, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// Runs `sql` on the database file with the raw SQLite API, behind the store's back (what an older
// xvd, or another tool, could have written).
void RawExec(const std::string& db, const std::string& sql) {
  sqlite3* conn = nullptr;
  ASSERT_EQ(sqlite3_open(db.c_str(), &conn), SQLITE_OK);
  char* err = nullptr;
  EXPECT_EQ(sqlite3_exec(conn, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
      << (err ? err : "") << " in " << sql;
  sqlite3_free(err);
  sqlite3_close(conn);
}

// The bytes of one text column as stored, read with the raw SQLite API.
std::string RawText(const std::string& db, const std::string& sql) {
  sqlite3* conn = nullptr;
  EXPECT_EQ(sqlite3_open(db.c_str(), &conn), SQLITE_OK);
  sqlite3_stmt* st = nullptr;
  EXPECT_EQ(sqlite3_prepare_v2(conn, sql.c_str(), -1, &st, nullptr), SQLITE_OK) << sql;
  std::string out;
  if (sqlite3_step(st) == SQLITE_ROW) {
    const void* p = sqlite3_column_blob(st, 0);
    out.assign(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(st, 0)));
  } else {
    ADD_FAILURE() << "no row: " << sql;
  }
  sqlite3_finalize(st);
  sqlite3_close(conn);
  return out;
}

// What a client gets: the experiment must survive a round trip through the wire (a proto3 string
// holding invalid UTF-8 fails to parse, which is how one row failed every listing).
void ExpectSerializable(const xv::v1::Experiment& e) {
  xv::v1::ListExperimentsResponse resp;
  *resp.add_experiments() = e;
  xv::v1::ListExperimentsResponse back;
  EXPECT_TRUE(back.ParseFromString(resp.SerializeAsString())) << "experiment " << e.id();
  EXPECT_TRUE(IsValidUtf8(e.stderr_tail()));
  EXPECT_TRUE(IsValidUtf8(e.failure_detail()));
}

class StoreText : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Store::Open(db(), &store_).ok());
    ASSERT_TRUE(store_->submissions().InsertSubmission(MakeSubmission(2), &ids_).ok());
    ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("host:cpu"), &worker_).ok());
    ASSERT_TRUE(store_->attempts().AssignExperiment(ids_.experiment_ids[0], worker_, &spec_).ok());
  }
  std::string db() const { return dir_.file("xv.db"); }
  xv::v1::Finished FailedWith(const std::string& detail, const std::string& tail) {
    xv::v1::Finished f;
    f.set_experiment_id(ids_.experiment_ids[0]);
    f.set_attempt(1);
    f.set_state("failed");
    f.set_failure_kind("crashed");
    f.set_failure_detail(detail);
    f.set_stderr_tail(tail);
    return f;
  }

  TempDir dir_;
  std::unique_ptr<Store> store_;
  SubmissionIds ids_;
  int64_t worker_ = 0;
  xv::v1::ExperimentSpec spec_;
};

TEST_F(StoreText, ATailOfTwoByteCharactersIsCutOnACodePointAndEveryListingSerializes) {
  // 18,001 bytes: "x" then 9,000 "é"; a cut at 16 KiB or 2 KiB from the end by bytes lands in the
  // middle of a character.
  const std::string tail = "x" + Repeat("\xC3\xA9", 9000);
  xv::v1::EventAck ack;
  ASSERT_TRUE(store_->attempts().FinishAttempt(worker_, FailedWith("boom", tail), &ack).ok());

  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(ids_.experiment_ids[0], &e).ok());
  EXPECT_LE(e.stderr_tail().size(), 16u * 1024);
  EXPECT_GE(e.stderr_tail().size(), 16u * 1024 - 1);
  EXPECT_EQ(e.stderr_tail(), Repeat("\xC3\xA9", static_cast<int>(e.stderr_tail().size() / 2)));
  ExpectSerializable(e);

  std::vector<xv::v1::Experiment> listed;
  ASSERT_TRUE(
      store_->experiments().ListExperiments(xv::v1::ListExperimentsRequest(), &listed).ok());
  ASSERT_EQ(listed.size(), 2u);
  EXPECT_LE(listed[0].stderr_tail().size(), 2u * 1024);
  EXPECT_GE(listed[0].stderr_tail().size(), 2u * 1024 - 1);
  for (const auto& x : listed) ExpectSerializable(x);
}

TEST_F(StoreText, InvalidUtf8IsNeverStored) {
  xv::v1::EventAck ack;
  ASSERT_TRUE(
      store_->attempts()
          .FinishAttempt(worker_, FailedWith("bad \xFF\xFE detail", "tail \xFF\xFE end"), &ack)
          .ok());
  const std::string id = std::to_string(ids_.experiment_ids[0]);
  const std::string tail = RawText(db(), "SELECT stderr_tail FROM experiments WHERE id = " + id);
  EXPECT_EQ(tail, "tail \xEF\xBF\xBD\xEF\xBF\xBD end");
  const std::string detail =
      RawText(db(), "SELECT failure_detail FROM attempts WHERE experiment_id = " + id);
  EXPECT_EQ(detail, "bad \xEF\xBF\xBD\xEF\xBF\xBD detail");
}

TEST_F(StoreText, EventJsonOverTheCapIsCutOnACodePoint) {
  const int64_t exp = ids_.experiment_ids[0];
  // 1 + 2 * 150,000 bytes of text: the 256 KiB cap falls inside a character.
  const std::string json = R"({"type":"log","text":")" + Repeat("\xC3\xA9", 150000) + "\"}";
  AppliedEvents applied;
  ASSERT_TRUE(store_->attempts()
                  .ApplyTrainerEvents(worker_, {MakeEvent(exp, 1, 1, "log", json)}, &applied)
                  .ok());
  const std::string stored =
      RawText(db(), "SELECT json FROM events WHERE source = 'trainer' AND seq = 1");
  EXPECT_LE(stored.size(), 256u * 1024);
  EXPECT_GE(stored.size(), 256u * 1024 - 1);
  EXPECT_TRUE(IsValidUtf8(stored));
  ASSERT_EQ(applied.acks.size(), 1u);
  EXPECT_EQ(applied.acks[0].seq(), 1);
}

TEST_F(StoreText, RowsPoisonedByAnOlderDaemonHealOnRead) {
  store_.reset();
  const std::string id = std::to_string(ids_.experiment_ids[0]);
  // What an older xvd stored: a tail cut in the middle of "é", and raw invalid bytes.
  RawExec(db(),
          "UPDATE experiments SET stderr_tail = CAST(x'41c3a9c3' AS TEXT), "
          "failure_detail = CAST(x'ff6f6b' AS TEXT) WHERE id = " +
              id);
  ASSERT_TRUE(Store::Open(db(), &store_).ok());
  xv::v1::Experiment e;
  ASSERT_TRUE(store_->experiments().GetExperiment(ids_.experiment_ids[0], &e).ok());
  EXPECT_EQ(e.stderr_tail(), "A\xC3\xA9\xEF\xBF\xBD");
  EXPECT_EQ(e.failure_detail(), "\xEF\xBF\xBDok");
  ExpectSerializable(e);
  std::vector<xv::v1::Experiment> listed;
  ASSERT_TRUE(
      store_->experiments().ListExperiments(xv::v1::ListExperimentsRequest(), &listed).ok());
  for (const auto& x : listed) ExpectSerializable(x);
}

TEST_F(StoreText, OfflineWorkersThatNeverRanAnythingAreForgottenAfterTheHorizon) {
  int64_t id = 0;
  for (int i = 0; i < 300; ++i) {
    ASSERT_TRUE(
        store_->workers().UpsertWorker(MakeRegister("made-up-" + std::to_string(i)), &id).ok());
  }
  // All offline for two days; host:cpu holds an attempt.
  RawExec(db(),
          "UPDATE workers SET state = 'offline', "
          "last_heartbeat = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', '-2 days')");
  // One made-up worker went offline only an hour ago: kept.
  RawExec(db(),
          "UPDATE workers SET last_heartbeat = strftime('%Y-%m-%dT%H:%M:%fZ', 'now', "
          "'-1 hours') WHERE name = 'made-up-7'");
  ASSERT_TRUE(store_->workers().UpsertWorker(MakeRegister("host:gpu1"), &id).ok());
  std::vector<xv::v1::WorkerInfo> workers;
  ASSERT_TRUE(store_->workers().ListWorkers(&workers).ok());
  std::vector<std::string> names;
  for (const auto& w : workers) names.push_back(w.name());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"host:cpu", "host:gpu1", "made-up-7"}));
}

TEST(WorkerEdge, RegisterIsBoundedAndItsNamesChecked) {
  std::vector<std::string> notes;
  xv::v1::Register reg = MakeRegister("gpu0");
  reg.mutable_capabilities()->set_max_concurrent(1000);
  reg.mutable_device()->set_name(Repeat("\xC3\xA9", 300));  // 600 bytes
  reg.set_probe_json("{\"x\":\"\xFF\"}");
  ASSERT_TRUE(daemon::CheckRegister(&reg, &notes).ok());
  EXPECT_EQ(reg.capabilities().max_concurrent(), daemon::kMaxWorkerConcurrency);
  EXPECT_EQ(reg.device().name(), Repeat("\xC3\xA9", 100));
  EXPECT_EQ(reg.probe_json(), "{\"x\":\"\xEF\xBF\xBD\"}");
  EXPECT_EQ(notes.size(), 3u);

  xv::v1::Register esc = MakeRegister("gpu\x1b]0;pwned\x07");
  Status s = daemon::CheckRegister(&esc, &notes);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("register.worker_name"), std::string::npos) << s.message();

  xv::v1::Register huge = MakeRegister(std::string(1 << 20, 'a'));
  s = daemon::CheckRegister(&huge, &notes);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("register.worker_name"), std::string::npos);
  EXPECT_LT(s.message().size(), 400u) << "the error must not echo the input";

  xv::v1::Register trainer = MakeRegister("gpu0");
  trainer.mutable_capabilities()->add_trainers("bad\nname");
  s = daemon::CheckRegister(&trainer, &notes);
  EXPECT_NE(s.message().find("register.capabilities.trainers[1]"), std::string::npos)
      << s.message();
}

TEST(WorkerEdge, FinishedAndEventTextIsRepairedAndBounded) {
  xv::v1::Finished f;
  f.set_state("failed");
  f.set_failure_detail(std::string("\xFF") + Repeat("\xC3\xA9", 10000));  // 20,001 bytes
  f.set_stderr_tail("head " + Repeat("\xC3\xA9", 40000) + " \xFE end");   // > 64 KiB
  std::vector<std::string> notes = daemon::RepairFinished(&f);
  EXPECT_EQ(notes.size(), 2u);
  EXPECT_TRUE(IsValidUtf8(f.failure_detail()));
  EXPECT_LE(f.failure_detail().size(), kMaxDetailBytes);
  EXPECT_EQ(f.failure_detail().substr(0, 3), "\xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(f.stderr_tail()));
  EXPECT_LE(f.stderr_tail().size(), daemon::kMaxStderrTailBytes);
  EXPECT_EQ(f.stderr_tail().substr(f.stderr_tail().size() - 8), " \xEF\xBF\xBD end");
  EXPECT_NE(notes[0].find("finished.failure_detail"), std::string::npos) << notes[0];

  xv::v1::TrainerEvent ev = MakeEvent(1, 1, 7, "lo\xFFg", "{\"type\":\"log\",\"text\":\"\xFE\"}");
  notes = daemon::RepairTrainerEvent(&ev);
  EXPECT_EQ(notes.size(), 2u);
  EXPECT_EQ(ev.type(), "lo\xEF\xBF\xBDg");
  EXPECT_TRUE(IsValidUtf8(ev.json()));
  EXPECT_NE(notes[0].find("event 7: type"), std::string::npos) << notes[0];
}

}  // namespace
}  // namespace xv::store
