// The worker's event spool end to end, with real processes: a real `xvd` on a unix socket, a real
// `xv-worker` running the scripted fake trainer, kill -9 of either, and the SQLite file read
// directly afterwards.
//  - DaemonKilledMidAttempt: xvd dies while a trainer runs; the trainer finishes with no daemon;
//    xvd comes back; the worker reconnects (backoff), replays its spool, and the experiment ends
//    succeeded once, every event 1..N stored once, one result row, and the spool file is gone.
//  - WorkerKilledAfterTheTrainerFinished: xvd dies mid-attempt, the trainer finishes, the worker
//    is killed with the Finished only in its spool; xvd and a new worker process (same --name and
//    --work-dir) come back: the spooled Finished and events land, exactly once.
//  - WorkerKilledWhileItsTrainerRuns: the orphaned trainer (its own process group, hanging with
//    no output) is killed by the restarted worker; the attempt is lost and requeued, the second
//    attempt succeeds, and the first attempt's events are stored too.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
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

class EventSpoolE2ETest : public ::testing::Test {
 protected:
  static constexpr int kSteps = 20;
  void SetUp() override { ASSERT_TRUE(Sandbox::BinariesBuilt()); }
  void TearDown() override {
    worker_.Stop();
    xvd_.Stop();
    if (orphan_pid_ > 1 && ProcessRunning(orphan_pid_)) ::kill(-orphan_pid_, SIGKILL);
  }

  void StartDaemon() {
    xvd_ = ChildGuard({BinaryPath("xvd"), "--state-dir", sb_.state(), "--listen", "none",
                       "--heartbeat-ms", "500"},
                      {}, sb_.Path("xvd.log"));
    // A killed daemon leaves its socket file behind: wait until one answers.
    ASSERT_TRUE(WaitUntil([&] { return Xvctl({"status"}, 10).exit_code == 0; }, 30)) << Logs();
  }
  void KillDaemon() {
    ASSERT_EQ(::kill(xvd_.pid(), SIGKILL), 0);
    ASSERT_TRUE(WaitUntil([&] { return !xvd_.Alive(); }, 10));
  }

  void StartWorker(const std::vector<std::pair<std::string, std::string>>& env) {
    worker_ = sb_.StartFakeWorker("spool-cpu", env, {"--kill-grace", "1"}, "worker.log");
  }
  // kill -9 of the worker process only: its trainer (own process group) is not signalled.
  void KillWorker() {
    ASSERT_EQ(::kill(worker_.pid(), SIGKILL), 0);
    ASSERT_TRUE(WaitUntil([&] { return !worker_.Alive(); }, 10));
  }

  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    args.insert(args.begin(), {BinaryPath("xvctl"), "--daemon", sb_.daemon()});
    return RunCommand(args, timeout_s);
  }

  int64_t SubmitOne() {
    CommandResult r =
        Xvctl({"submit", SourcePath("recipes/cpu-tiny.yaml"), "--set", "time_budget_s=2",
               "--candidate", "matrix_lr=0.02", "--campaign", "spool", "--json"});
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    if (!j.is_object() || j["experiment_ids"].size() != 1) {
      ADD_FAILURE() << "submit --json: " << r.out;
      return 0;
    }
    return j["experiment_ids"][0].get<int64_t>();
  }

  fs::path SpecDir(int64_t id, int attempt) {
    return sb_.dir() / "work-spool-cpu" /
           ("exp-" + std::to_string(id) + "-a" + std::to_string(attempt));
  }
  fs::path SpoolFile(int64_t id, int attempt) {
    return sb_.dir() / "work-spool-cpu" / "spool" /
           ("exp-" + std::to_string(id) + "-a" + std::to_string(attempt) + ".spool");
  }
  // The daemon stored at least `n` events of the attempt.
  bool EventsStored(int64_t id, int attempt, int64_t n) {
    DatabaseFile db(sb_.state() + "/xv.db");
    return db.Int("SELECT COUNT(*) FROM events WHERE source = 'trainer' AND experiment_id = " +
                  std::to_string(id) + " AND attempt = " + std::to_string(attempt)) >= n;
  }
  bool WorkerLogHas(const std::string& text) {
    return ReadFileText(sb_.dir() / "worker.log").find(text) != std::string::npos;
  }

  void WaitAll(double timeout_s) {
    CommandResult r = Xvctl({"wait", "--timeout", std::to_string(timeout_s)}, timeout_s + 30);
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
  }

  // The experiment ended succeeded exactly once on `attempt`, with every event of that attempt
  // (start, kSteps steps, eval, summary) stored once and one result row.
  void ExpectSucceededOnce(int64_t id, int attempt) {
    DatabaseFile db(sb_.state() + "/xv.db");
    const std::string e = std::to_string(id);
    const std::string where =
        " WHERE experiment_id = " + e + " AND attempt = " + std::to_string(attempt);
    EXPECT_EQ(db.Value("SELECT state FROM experiments WHERE id = " + e), "succeeded") << Logs();
    EXPECT_EQ(db.Int("SELECT attempt FROM experiments WHERE id = " + e), attempt);
    EXPECT_EQ(db.Value("SELECT state FROM attempts" + where), "succeeded");
    EXPECT_EQ(db.Int("SELECT COUNT(*) FROM results WHERE experiment_id = " + e), 1);
    EXPECT_EQ(db.Value("SELECT printf('%.6f', val_bpb) FROM results WHERE experiment_id = " + e),
              "1.200000");
    const int64_t n = kSteps + 3;
    const std::string trainer = where + " AND source = 'trainer'";
    EXPECT_EQ(db.Int("SELECT COUNT(*) FROM events" + trainer), n) << Logs();
    EXPECT_EQ(db.Int("SELECT COUNT(DISTINCT seq) FROM events" + trainer), n);
    EXPECT_EQ(db.Int("SELECT MIN(seq) FROM events" + trainer), 1);
    EXPECT_EQ(db.Int("SELECT MAX(seq) FROM events" + trainer), n);
    EXPECT_EQ(db.Int("SELECT COUNT(*) FROM metrics" + where), kSteps);
    EXPECT_EQ(db.Int("SELECT COUNT(DISTINCT step) FROM metrics" + where), kSteps);
    EXPECT_EQ(db.Value("PRAGMA integrity_check"), "ok");
    std::printf(
        "spool e2e: experiment %lld attempt %d: %lld events, %lld metric rows, %lld result\n",
        static_cast<long long>(id), attempt,
        static_cast<long long>(db.Int("SELECT COUNT(*) FROM events" + trainer)),
        static_cast<long long>(db.Int("SELECT COUNT(*) FROM metrics" + where)),
        static_cast<long long>(db.Int("SELECT COUNT(*) FROM results WHERE "
                                      "experiment_id = " +
                                      e)));
  }

  std::string Logs() {
    return "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log")) + "\n--- worker.log ---\n" +
           FileTail(sb_.Path("worker.log"));
  }

  Sandbox sb_{"spool"};
  ChildGuard xvd_, worker_;
  int orphan_pid_ = 0;
};

TEST_F(EventSpoolE2ETest, DaemonKilledMidAttempt) {
  StartDaemon();
  StartWorker({{"XV_FAKE_STEPS", std::to_string(kSteps)}, {"XV_FAKE_STEP_SECONDS", "0.25"}});
  const int64_t id = SubmitOne();
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitUntil([&] { return EventsStored(id, 1, 4); }, 30)) << Logs();
  KillDaemon();
  // The trainer keeps running and finishes with no daemon; everything waits in the spool.
  ASSERT_TRUE(WaitUntil([&] { return WorkerLogHas("attempt 1: succeeded"); }, 30)) << Logs();
  EXPECT_TRUE(fs::exists(SpoolFile(id, 1))) << Logs();
  EXPECT_TRUE(worker_.Alive());
  std::this_thread::sleep_for(std::chrono::seconds(2));  // a few reconnect attempts fail
  StartDaemon();
  WaitAll(60);
  ExpectSucceededOnce(id, 1);
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists(SpoolFile(id, 1)); }, 10))
      << "the spool file outlived its acknowledged Finished" << Logs();
  EXPECT_TRUE(WorkerLogHas("reconnecting to")) << Logs();
}

TEST_F(EventSpoolE2ETest, WorkerKilledAfterTheTrainerFinished) {
  StartDaemon();
  const std::vector<std::pair<std::string, std::string>> env = {
      {"XV_FAKE_STEPS", std::to_string(kSteps)}, {"XV_FAKE_STEP_SECONDS", "0.25"}};
  StartWorker(env);
  const int64_t id = SubmitOne();
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitUntil([&] { return EventsStored(id, 1, 4); }, 30)) << Logs();
  KillDaemon();
  ASSERT_TRUE(WaitUntil([&] { return WorkerLogHas("attempt 1: succeeded"); }, 30)) << Logs();
  KillWorker();
  // Only the spool knows the result now.
  ASSERT_TRUE(fs::exists(SpoolFile(id, 1)));
  StartDaemon();
  {
    DatabaseFile db(sb_.state() + "/xv.db");
    const std::string state =
        db.Value("SELECT state FROM experiments WHERE id = " + std::to_string(id));
    EXPECT_TRUE(state == "running" || state == "assigned") << state;
  }
  StartWorker(env);
  WaitAll(60);
  ExpectSucceededOnce(id, 1);
  EXPECT_TRUE(WorkerLogHas("finished under a previous worker process")) << Logs();
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists(SpoolFile(id, 1)); }, 10)) << Logs();
}

TEST_F(EventSpoolE2ETest, WorkerKilledWhileItsTrainerRuns) {
  StartDaemon();
  // The first worker's trainer prints start and step 1, then hangs without output, so it
  // outlives the worker (a trainer that writes again dies of SIGPIPE on its own).
  StartWorker({{"XV_FAKE_STEPS", std::to_string(kSteps)},
               {"XV_FAKE_STEP_SECONDS", "0.05"},
               {"XV_FAKE_MODE", "hang"}});
  const int64_t id = SubmitOne();
  ASSERT_GT(id, 0);
  ASSERT_TRUE(WaitUntil([&] { return EventsStored(id, 1, 2); }, 30)) << Logs();
  std::ifstream(SpecDir(id, 1) / "fake_trainer.pid") >> orphan_pid_;
  ASSERT_GT(orphan_pid_, 1);
  KillWorker();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(ProcessRunning(orphan_pid_)) << "the trainer did not outlive its worker";
  ASSERT_TRUE(fs::exists(SpoolFile(id, 1)));

  // The new worker process (no hang this time) kills the orphan, does not claim the attempt, and
  // the daemon requeues it as attempt 2, which succeeds.
  StartWorker({{"XV_FAKE_STEPS", std::to_string(kSteps)}, {"XV_FAKE_STEP_SECONDS", "0.05"}});
  ASSERT_TRUE(WaitUntil([&] { return !ProcessRunning(orphan_pid_); }, 20))
      << "the orphaned trainer " << orphan_pid_ << " is still running" << Logs();
  WaitAll(60);
  ExpectSucceededOnce(id, 2);
  DatabaseFile db(sb_.state() + "/xv.db");
  const std::string first = " WHERE experiment_id = " + std::to_string(id) + " AND attempt = 1";
  EXPECT_EQ(db.Value("SELECT state FROM attempts" + first), "lost");
  // start and step 1 of the first attempt, replayed from the spool or sent before: once each.
  EXPECT_EQ(db.Int("SELECT COUNT(*) FROM events" + first + " AND source = 'trainer'"), 2);
  EXPECT_TRUE(WorkerLogHas("orphaned trainer process")) << Logs();
  EXPECT_TRUE(WaitUntil([&] { return !fs::exists(SpoolFile(id, 1)); }, 10)) << Logs();
  EXPECT_FALSE(fs::exists(SpoolFile(id, 2)));
}

}  // namespace
}  // namespace xv::e2e
