// A large submission on a real SQLite file (issue 11, finding 6; issue 18): its rows are staged in
// bounded transactions that let readers and writers through and published in one, so nobody sees
// half of it, and a crash in the middle leaves nothing queued (the next open deletes the staged
// rows).
//  - while a 10,240-row submission is being stored, a reader that starts after the submission's
//    first commit is answered before the submission returns, and sees none of it;
//  - a writer killed (SIGKILL) between those commits leaves no round, no experiment and no event of
//    the submission; the file is sound and the same submission then stores completely;
//  - a submission refused at its last step (a plan phase that already has a round) leaves nothing
//    queued either, and the recipe rows it added are deleted again.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <thread>

#include "daemon/store/sqlite_connection.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"

namespace xv::store {
namespace {

using testing::MakeSubmission;
using testing::TempDir;

constexpr int kBigSubmission = 10240;  // 256 candidates x 40 replicates in the issue

int64_t QueryInt(const std::string& db, const std::string& sql) {
  std::unique_ptr<SqliteConnection> conn;
  EXPECT_TRUE(SqliteConnection::Open(db, SqliteConnection::Mode::kReadOnly, &conn).ok());
  SqliteStatement st;
  EXPECT_TRUE(conn->Prepare(sql, &st).ok()) << sql;
  bool row = false;
  EXPECT_TRUE(st.Step(&row).ok());
  return row ? st.ColumnInt(0) : -1;
}

int64_t Count(Store* store, const std::string& state) {
  std::map<std::string, int64_t> counts;
  EXPECT_TRUE(store->experiments().CountByState(&counts).ok());
  return counts[state];
}

TEST(SubmissionInsertTest, ReadersGetThroughABigSubmissionAndSeeAllOrNothing) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  std::mutex mu;
  std::condition_variable cv;
  int commits = 0;
  store->database().SetCommitListener([&] {
    std::lock_guard<std::mutex> lock(mu);
    ++commits;
    cv.notify_all();
  });

  std::atomic<bool> submitted{false};
  SubmissionIds ids;
  Status insert_status;
  std::thread writer([&] {
    insert_status = store->submissions().InsertSubmission(MakeSubmission(kBigSubmission), &ids);
    submitted = true;
  });
  {
    // The submission has committed something: it is under way.
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(60), [&] { return commits > 0; }));
  }
  // Reads answered after the submission's first commit and before its last one.
  int answered_during = 0;
  while (!submitted) {
    const int64_t queued = Count(store.get(), "queued");
    EXPECT_TRUE(queued == 0 || queued == kBigSubmission)
        << "a reader saw part of a submission: " << queued << " queued";
    if (queued == 0) ++answered_during;
  }
  writer.join();
  ASSERT_TRUE(insert_status.ok()) << insert_status.ToString();
  EXPECT_GE(answered_during, 1) << "no reader was answered while the submission was stored";
  EXPECT_EQ(ids.experiment_ids.size(), static_cast<size_t>(kBigSubmission));
  EXPECT_EQ(Count(store.get(), "queued"), kBigSubmission);
  // Staged in transactions of at most 256 rows (fewer when a chunk's 4 ms run out), then one
  // publish: the writer is never held for the whole submission.
  EXPECT_GE(commits, kBigSubmission / 256 + 1);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM staged_experiments"), 0)
      << "the published submission's staged rows were left";
  std::printf("submission of %d rows: %d reads answered while it was stored, %d commits\n",
              kBigSubmission, answered_during, commits);
}

// A small submission (one Submit of a few runs, the agent's usual round) is one transaction:
// one commit (one fsync) before its reply, and no staged row left.
TEST(SubmissionInsertTest, ASmallSubmissionIsStoredInOneCommit) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  std::atomic<int> commits{0};
  store->database().SetCommitListener([&] { ++commits; });
  SubmissionIds ids;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(16), &ids).ok());
  EXPECT_EQ(commits.load(), 1);
  EXPECT_EQ(ids.experiment_ids.size(), 16u);
  EXPECT_EQ(Count(store.get(), "queued"), 16);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM staged_experiments"), 0);
  // The same configs again in the same campaign: the recipe rows are found, not added.
  const int64_t recipes = QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes");
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(16), &ids).ok());
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes"), recipes);
  EXPECT_EQ(Count(store.get(), "queued"), 32);
}

TEST(SubmissionInsertTest, AWriterKilledMidSubmissionLeavesNothingQueued) {
  TempDir dir;
  const std::string path = dir.file("xv.db");
  {
    std::unique_ptr<Store> store;
    ASSERT_TRUE(Store::Open(path, &store).ok());
  }
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    // The child stores the big submission and dies (no cleanup of any kind) at its third commit.
    std::unique_ptr<Store> store;
    if (!Store::Open(path, &store).ok()) ::_exit(3);
    int commits = 0;
    store->database().SetCommitListener([&] {
      if (++commits == 3) ::raise(SIGKILL);
    });
    SubmissionIds ids;
    (void)store->submissions().InsertSubmission(MakeSubmission(kBigSubmission), &ids);
    ::_exit(4);  // the submission finished in fewer than three commits
  }
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(wstatus) && WTERMSIG(wstatus) == SIGKILL)
      << "the child did not die mid-submission (status " << wstatus << ")";

  // The child died while staging: some rows were staged, none published.
  EXPECT_GT(QueryInt(path, "SELECT COUNT(*) FROM staged_experiments"), 0);
  EXPECT_EQ(QueryInt(path, "SELECT COUNT(*) FROM experiments"), 0);
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(path, &store).ok());  // integrity_check passes
  EXPECT_EQ(QueryInt(path, "SELECT COUNT(*) FROM staged_experiments"), 0)
      << "opening the store left the interrupted submission's staged rows";
  std::map<std::string, int64_t> counts;
  ASSERT_TRUE(store->experiments().CountByState(&counts).ok());
  EXPECT_TRUE(counts.empty()) << "experiments of a killed submission are visible";
  std::vector<QueuedExperiment> queued;
  ASSERT_TRUE(store->experiments().ListQueued(&queued).ok());
  EXPECT_TRUE(queued.empty());
  int64_t max_event = -1;
  ASSERT_TRUE(store->events().MaxEventId(&max_event).ok());
  EXPECT_EQ(max_event, 0) << "events of a killed submission were stored";
  std::vector<xv::v1::Campaign> campaigns;
  ASSERT_TRUE(store->campaigns().ListCampaigns(&campaigns).ok());
  EXPECT_TRUE(campaigns.empty());

  // The same submission stores completely afterwards (its recipes already there are reused).
  SubmissionIds ids;
  ASSERT_TRUE(store->submissions().InsertSubmission(MakeSubmission(kBigSubmission), &ids).ok());
  EXPECT_EQ(Count(store.get(), "queued"), kBigSubmission);
}

TEST(SubmissionInsertTest, ASubmissionRefusedAtItsLastStepLeavesNothingQueued) {
  TempDir dir;
  std::unique_ptr<Store> store;
  ASSERT_TRUE(Store::Open(dir.file("xv.db"), &store).ok());
  SubmissionIds first;
  NewSubmission sub = MakeSubmission(2, "planned");
  ASSERT_TRUE(store->submissions().InsertSubmission(sub, &first).ok());
  StoredPlan plan;
  plan.campaign_id = first.campaign_id;
  plan.name = "p";
  plan.yaml = "phases: []\n";
  int64_t plan_id = 0;
  ASSERT_TRUE(store->plans().InsertPlan(plan, &plan_id).ok());
  NewSubmission phase = MakeSubmission(600, "planned");
  phase.plan_id = plan_id;
  phase.plan_phase = 1;
  SubmissionIds ids;
  ASSERT_TRUE(store->submissions().InsertSubmission(phase, &ids).ok());
  const int64_t queued_before = Count(store.get(), "queued");
  const int64_t recipes_before = QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes");

  // The same phase again: its recipes are stored in chunks first, then the round is refused.
  NewSubmission again = MakeSubmission(600, "planned-again");
  again.plan_id = plan_id;
  again.plan_phase = 1;
  Status s = store->submissions().InsertSubmission(again, &ids);
  EXPECT_EQ(s.code(), Status::Code::kAlreadyExists) << s.ToString();
  EXPECT_EQ(Count(store.get(), "queued"), queued_before);
  EXPECT_EQ(QueryInt(dir.file("xv.db"), "SELECT COUNT(*) FROM recipes"), recipes_before)
      << "the recipe rows the refused submission added were left behind";
  bool found = true;
  CampaignHead head;
  ASSERT_TRUE(store->campaigns().FindCampaignHead("planned-again", &found, &head).ok());
  EXPECT_FALSE(found) << "the refused submission created its campaign";
}

}  // namespace
}  // namespace xv::store
