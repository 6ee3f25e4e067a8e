// Reclaiming a lost attempt (docs/reliability.md § Reclaiming a lost attempt), with real processes:
// a real `xvd` (lease 1.5 s, heartbeats every 200 ms) on a unix socket, real `xv-worker`s running
// the scripted fake trainer, the database file read directly afterwards. The worker is SIGSTOPped
// (the process only: its trainer, in its own process group, keeps running) until its attempt is
// marked lost and requeued, then SIGCONTed.
//  - ReturningWorkerReclaimsItsAttempt: it is the only worker, so the requeue is still queued when
//    it comes back: the attempt is reclaimed (same attempt, same trainer process, never
//    restarted), the experiment succeeds with one result, the event log reads lost -> reclaimed
//    (and `xvctl watch` shows both), and every trainer event and metric row is stored once.
//  - RequeueTakenFirstCancelsTheReturningTrainer: a second worker took the requeue (attempt 2)
//    and succeeded meanwhile: the returning worker's trainer is cancelled, attempt 1 ends
//    cancelled, and the experiment keeps attempt 2's result: exactly one result row.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "tests/e2e/database_file.h"
#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

class AttemptReclaimE2ETest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(Sandbox::BinariesBuilt());
    ASSERT_TRUE(sb_.StartDaemon(&xvd_, {"--lease-ms", "1500", "--heartbeat-ms", "200"}));
  }
  void TearDown() override {
    if (stopped_pid_ > 0) ::kill(stopped_pid_, SIGCONT);
    w1_.Stop();
    w2_.Stop();
    xvd_.Stop();
    if (trainer_pid_ > 1 && ProcessRunning(trainer_pid_)) ::kill(-trainer_pid_, SIGKILL);
  }

  // w1's trainer runs `steps` steps of 0.1 s: long enough to outlive the stop and the requeue.
  void StartLongWorker(int steps) {
    w1_ = sb_.StartFakeWorker(
        "w1", {{"XV_FAKE_STEPS", std::to_string(steps)}, {"XV_FAKE_STEP_SECONDS", "0.1"}},
        {"--kill-grace", "1"});
  }

  int64_t SubmitOne() {
    CommandResult r =
        sb_.Xvctl({"submit", SourcePath("recipes/cpu-tiny.yaml"), "--set", "time_budget_s=2",
                   "--candidate", "matrix_lr=0.02", "--campaign", "reclaim", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    if (!j.is_object() || j["experiment_ids"].size() != 1) {
      ADD_FAILURE() << "submit --json: " << r.out;
      return 0;
    }
    return j["experiment_ids"][0].get<int64_t>();
  }

  std::string Db(const std::string& sql) { return DatabaseFile(sb_.state() + "/xv.db").Value(sql); }
  int64_t DbInt(const std::string& sql) { return DatabaseFile(sb_.state() + "/xv.db").Int(sql); }
  bool WaitForValue(const std::string& sql, const std::string& want, double timeout_s) {
    return WaitUntil([&] { return Db(sql) == want; }, timeout_s);
  }

  fs::path AttemptDir(int64_t id, int attempt) {
    return sb_.dir() / "work-w1" / ("exp-" + std::to_string(id) + "-a" + std::to_string(attempt));
  }

  // Runs w1's attempt 1 of `id` until its events arrive, then SIGSTOPs w1 until the daemon marks
  // the attempt lost and requeues it. *stopped_at: when w1 was stopped.
  void StopWorkerUntilLost(int64_t id, Clock::time_point* stopped_at) {
    const std::string e = std::to_string(id);
    ASSERT_TRUE(WaitUntil(
        [&] {
          return DbInt("SELECT count(*) FROM events WHERE source = 'trainer' AND experiment_id = " +
                       e) >= 4;
        },
        30))
        << Logs();
    std::ifstream(AttemptDir(id, 1) / "fake_trainer.pid") >> trainer_pid_;
    ASSERT_GT(trainer_pid_, 1);
    ASSERT_EQ(::kill(w1_.pid(), SIGSTOP), 0);
    stopped_pid_ = w1_.pid();
    *stopped_at = Clock::now();
    ASSERT_TRUE(WaitForValue(
        "SELECT state FROM attempts WHERE experiment_id = " + e + " AND attempt = 1", "lost", 15))
        << Logs();
    EXPECT_EQ(Db("SELECT state FROM experiments WHERE id = " + e), "queued") << Logs();
    ASSERT_TRUE(ProcessRunning(trainer_pid_)) << "the trainer did not outlive the stop";
  }

  void ContinueWorker() {
    ASSERT_EQ(::kill(stopped_pid_, SIGCONT), 0);
    stopped_pid_ = 0;
  }

  // Every stored trainer event and metric row of `id` is there once.
  void ExpectNothingTwice(int64_t id) {
    const std::string e = std::to_string(id);
    EXPECT_EQ(
        DbInt("SELECT count(*) FROM events WHERE source = 'trainer' AND experiment_id = " + e),
        DbInt("SELECT count(*) FROM (SELECT DISTINCT attempt, seq FROM events WHERE source = "
              "'trainer' AND experiment_id = " +
              e + ")"));
    EXPECT_EQ(DbInt("SELECT count(*) FROM metrics WHERE experiment_id = " + e),
              DbInt("SELECT count(*) FROM (SELECT DISTINCT attempt, step FROM metrics WHERE "
                    "experiment_id = " +
                    e + ")"));
    EXPECT_EQ(DbInt("SELECT count(*) FROM results WHERE experiment_id = " + e), 1)
        << "exactly one result";
    EXPECT_EQ(Db("PRAGMA integrity_check"), "ok");
  }

  std::string Logs() {
    return "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log")) + "\n--- w1.log ---\n" +
           FileTail(sb_.Path("w1.log")) + "\n--- w2.log ---\n" + FileTail(sb_.Path("w2.log"));
  }

  Sandbox sb_{"reclaim"};
  ChildGuard xvd_, w1_, w2_;
  int trainer_pid_ = 0;
  pid_t stopped_pid_ = 0;
};

TEST_F(AttemptReclaimE2ETest, ReturningWorkerReclaimsItsAttempt) {
  constexpr int kSteps = 60;
  StartLongWorker(kSteps);
  const int64_t id = SubmitOne();
  ASSERT_GT(id, 0);
  const std::string e = std::to_string(id);
  Clock::time_point stopped_at;
  StopWorkerUntilLost(id, &stopped_at);
  // Nobody else may take the requeue: w1 is the only worker and its lease lapsed.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  EXPECT_EQ(Db("SELECT state FROM experiments WHERE id = " + e), "queued");
  EXPECT_EQ(ReadFileText(AttemptDir(id, 1) / "events.jsonl").find("\"summary\""), std::string::npos)
      << "the trainer finished before the worker came back; make it longer";
  const double stopped_s = std::chrono::duration<double>(Clock::now() - stopped_at).count();
  ContinueWorker();

  ASSERT_TRUE(WaitForValue("SELECT state FROM experiments WHERE id = " + e, "succeeded", 60))
      << Logs();
  EXPECT_EQ(Db("SELECT attempt FROM experiments WHERE id = " + e), "1") << "reclaimed, not rerun";
  EXPECT_EQ(DbInt("SELECT count(*) FROM attempts WHERE experiment_id = " + e), 1);
  EXPECT_EQ(Db("SELECT state FROM attempts WHERE experiment_id = " + e), "succeeded");
  EXPECT_EQ(Db("SELECT printf('%.6f', val_bpb) FROM results WHERE experiment_id = " + e +
               " AND attempt = 1"),
            "1.200000");
  // One trainer process ran the whole attempt: start, every step, eval, summary, each once.
  const std::string trainer = " FROM events WHERE source = 'trainer' AND experiment_id = " + e;
  EXPECT_EQ(DbInt("SELECT count(*)" + trainer), kSteps + 3) << Logs();
  EXPECT_EQ(DbInt("SELECT min(seq)" + trainer), 1);
  EXPECT_EQ(DbInt("SELECT max(seq)" + trainer), kSteps + 3);
  EXPECT_EQ(DbInt("SELECT count(*)" + trainer + " AND type = 'start'"), 1);
  EXPECT_EQ(DbInt("SELECT count(*) FROM metrics WHERE experiment_id = " + e), kSteps);
  ExpectNothingTwice(id);
  // The attempt's history in the event log: lost, then reclaimed, and no second assignment.
  EXPECT_EQ(Db("SELECT group_concat(type, ',') FROM (SELECT type FROM events WHERE source = "
               "'daemon' AND experiment_id = " +
               e + " AND type IN ('lost', 'reclaimed') ORDER BY id)"),
            "lost,reclaimed");
  EXPECT_EQ(DbInt("SELECT count(*) FROM events WHERE source = 'daemon' AND type = 'state' AND "
                  "experiment_id = " +
                  e + " AND json_extract(json, '$.state') = 'assigned'"),
            1);
  // xvctl watch replays it for a person or an agent.
  CommandResult w = sb_.Xvctl({"watch", "--experiment", e, "--since", "0", "--until-idle"}, 30);
  ASSERT_EQ(w.exit_code, 0) << w.out << w.err;
  const size_t lost_at = w.out.find("queued: attempt 1 lost: no contact from worker");
  const size_t reclaimed_at = w.out.find("running (attempt 1): attempt 1 reclaimed: worker w1");
  EXPECT_NE(lost_at, std::string::npos) << w.out;
  EXPECT_NE(reclaimed_at, std::string::npos) << w.out;
  EXPECT_LT(lost_at, reclaimed_at) << w.out;
  EXPECT_NE(ReadFileText(sb_.Path("xvd.log")).find("attempt 1 reclaimed"), std::string::npos);
  EXPECT_EQ(ReadFileText(sb_.Path("w1.log")).find("cancel experiment"), std::string::npos)
      << "the reclaimed trainer was told to cancel" << Logs();
  std::printf(
      "reclaim e2e: w1 stopped %.1f s (lease 1.5 s); attempt 1 lost, then reclaimed; "
      "%lld events, %lld metric rows, %lld result\n",
      stopped_s, static_cast<long long>(DbInt("SELECT count(*)" + trainer)),
      static_cast<long long>(DbInt("SELECT count(*) FROM metrics WHERE experiment_id = " + e)),
      static_cast<long long>(DbInt("SELECT count(*) FROM results WHERE experiment_id = " + e)));
}

TEST_F(AttemptReclaimE2ETest, RequeueTakenFirstCancelsTheReturningTrainer) {
  constexpr int kSteps = 120;
  StartLongWorker(kSteps);
  const int64_t id = SubmitOne();
  ASSERT_GT(id, 0);
  const std::string e = std::to_string(id);
  Clock::time_point stopped_at;
  StopWorkerUntilLost(id, &stopped_at);
  w2_ = sb_.StartFakeWorker("w2", {{"XV_FAKE_STEPS", "5"}, {"XV_FAKE_STEP_SECONDS", "0.05"}});
  ASSERT_TRUE(WaitForValue("SELECT state FROM experiments WHERE id = " + e, "succeeded", 30))
      << Logs();
  EXPECT_EQ(Db("SELECT attempt FROM experiments WHERE id = " + e), "2");
  ASSERT_TRUE(ProcessRunning(trainer_pid_)) << "w1's trainer ended before w1 came back";
  ContinueWorker();

  ASSERT_TRUE(WaitUntil([&] { return !ProcessRunning(trainer_pid_); }, 20))
      << "w1's trainer was not cancelled" << Logs();
  ASSERT_TRUE(
      WaitForValue("SELECT state FROM attempts WHERE experiment_id = " + e + " AND attempt = 1",
                   "cancelled", 20))
      << Logs();
  EXPECT_EQ(Db("SELECT state FROM experiments WHERE id = " + e), "succeeded");
  EXPECT_EQ(Db("SELECT attempt FROM experiments WHERE id = " + e), "2");
  EXPECT_EQ(Db("SELECT w.name FROM experiments x JOIN workers w ON w.id = x.worker_id WHERE x.id "
               "= " +
               e),
            "w2");
  EXPECT_EQ(Db("SELECT attempt FROM results WHERE experiment_id = " + e), "2");
  EXPECT_EQ(Db("SELECT printf('%.6f', val_bpb) FROM results WHERE experiment_id = " + e),
            "1.200000");
  EXPECT_EQ(DbInt("SELECT count(*) FROM events WHERE source = 'trainer' AND experiment_id = " + e +
                  " AND attempt = 1 AND type = 'summary'"),
            0)
      << "w1's trainer ran to its end";
  ExpectNothingTwice(id);
  EXPECT_EQ(DbInt("SELECT count(*) FROM events WHERE type = 'reclaimed'"), 0);
  EXPECT_NE(ReadFileText(sb_.Path("xvd.log"))
                .find("its requeue was assigned first: attempt 2 on "
                      "worker w2"),
            std::string::npos)
      << Logs();
  EXPECT_NE(ReadFileText(sb_.Path("w1.log")).find("cancel experiment " + e + " attempt 1"),
            std::string::npos)
      << Logs();
  std::printf(
      "reclaim e2e: attempt 2 on w2 first; w1's trainer cancelled after %lld of its events; "
      "1 result (attempt 2)\n",
      static_cast<long long>(DbInt("SELECT count(*) FROM events WHERE source = 'trainer' "
                                   "AND experiment_id = " +
                                   e + " AND attempt = 1")));
}

}  // namespace
}  // namespace xv::e2e
