// Operations end to end (issue 6) with real processes: `xvd`, `xv-worker` (scripted fake trainer)
// and `xvctl`.
//  - DrainFinishesTheRunningAttemptThenTheWorkerExits: `xvctl drain NAME` while the worker runs
//    one of three experiments: that one succeeds, the worker exits 0, nothing else is assigned to
//    it, `xvctl status` shows draining then drained; a restarted worker of the same name takes the
//    rest. Unknown and disconnected workers are refused by name.
//  - CampaignMaxAttemptsLimitsRequeues: `campaign create --max-attempts 1` is shown by `campaign
//    show`; a worker killed with -9 mid-run loses the attempt and, with one attempt allowed, the
//    experiment ends lost instead of being requeued; out-of-range values are refused by flag.
//  - CancelStopsRunningAndQueuedExperiments: `xvctl cancel RUNNING QUEUED FINISHED 999999`: the
//    running trainer is stopped and both end cancelled, the finished one keeps its state, the
//    unknown id is named and makes the exit code 1; the worker takes the next experiment.
//  - StoppedWorkerHandsItsAttemptBackToTheQueue: SIGTERM to a worker mid-run (systemd, Slurm and
//    Kubernetes stop workers so) reports the attempt interrupted: xvd requeues it at once (the
//    lease is far longer than the test) and the next worker runs it to success as attempt 2.
//  - FullDiskMakesTheDaemonReadOnlyUntilSpaceReturns: the state directory is a 4 MiB tmpfs
//    (mounted by the test; root only, else skipped) filled to the last byte after the WAL was
//    truncated: the next submission fails with FAILED_PRECONDITION naming the cause and the
//    database path, `xvctl status` shows `read-only: ...`, reads keep working, nothing is
//    assigned; once the filler is removed the daemon leaves the mode by itself and a submission
//    runs to success. `PRAGMA integrity_check` is ok afterwards.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

class OperationsE2eTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(Sandbox::BinariesBuilt()); }
  void TearDown() override {
    for (auto& w : workers_) w.Stop();
    xvd_.Stop();
    if (mounted_) ::umount2(sb_.state().c_str(), MNT_DETACH);
  }

  void StartDaemon(const std::vector<std::string>& extra = {}) {
    ASSERT_TRUE(sb_.StartDaemon(&xvd_, extra));
  }

  ChildGuard& StartWorker(const std::string& name, const Env& env) {
    workers_.push_back(
        sb_.StartFakeWorker(name, env, {}, name + "-" + std::to_string(workers_.size()) + ".log"));
    return workers_.back();
  }

  CommandResult Xvctl(std::vector<std::string> args, double timeout_s = 60) {
    return sb_.Xvctl(std::move(args), timeout_s);
  }
  json XvctlJson(const std::vector<std::string>& args) {
    CommandResult r = Xvctl(args);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err << Logs();
    json j = json::parse(r.out, nullptr, false);
    return j.is_discarded() ? json::object() : j;
  }
  // The worker entry of `status --json` named `name` (null when absent).
  json WorkerStatus(const std::string& name) {
    json s = XvctlJson({"status", "--json"});
    for (const auto& w : s.value("workers", json::array())) {
      if (w["name"] == name) return w;
    }
    return nullptr;
  }
  json Experiment(int64_t id) {
    json r = XvctlJson({"results", "--json", "--limit", "1000"});
    for (const auto& e : r.value("experiments", json::array())) {
      if (e["id"] == id) return e;
    }
    return nullptr;
  }

  std::string Logs() {
    std::string s = "\n--- xvd.log ---\n" + FileTail(sb_.Path("xvd.log"));
    for (auto& w : workers_) s += "\n--- " + w.log_path() + " ---\n" + FileTail(w.log_path());
    return s;
  }

  Sandbox sb_{"op"};
  ChildGuard xvd_;
  std::vector<ChildGuard> workers_;
  bool mounted_ = false;
};

TEST_F(OperationsE2eTest, DrainFinishesTheRunningAttemptThenTheWorkerExits) {
  StartDaemon();
  const std::vector<std::pair<std::string, std::string>> env = {{"XV_FAKE_STEPS", "20"},
                                                                {"XV_FAKE_STEP_SECONDS", "0.1"}};
  StartWorker("op-1", env);
  json sub =
      XvctlJson({"submit", SourcePath("recipes/cpu-tiny.yaml"), "--candidate", "matrix_lr=0.01",
                 "--candidate", "matrix_lr=0.02", "--candidate", "matrix_lr=0.03", "--json"});
  ASSERT_EQ(sub.value("experiment_ids", json::array()).size(), 3u) << sub.dump();
  int64_t running = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        json w = WorkerStatus("op-1");
        running = w.is_null() ? 0 : w.value("current_experiment_id", int64_t{0});
        return running != 0;
      },
      30))
      << Logs();

  CommandResult drain = Xvctl({"drain", "op-1", "--reason", "maintenance"});
  ASSERT_EQ(drain.exit_code, 0) << drain.err << Logs();
  EXPECT_NE(drain.out.find("draining worker op-1"), std::string::npos) << drain.out;
  EXPECT_EQ(WorkerStatus("op-1").value("state", ""), "draining");
  CommandResult text = Xvctl({"status"});
  EXPECT_NE(text.out.find("draining"), std::string::npos) << text.out;

  // The worker finishes the running attempt and exits 0 by itself.
  ChildGuard& w1 = workers_[0];
  ASSERT_TRUE(WaitUntil([&] { return !w1.Alive(); }, 40)) << "worker did not exit" << Logs();
  const int status = w1.Stop();
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "status " << status << Logs();
  EXPECT_EQ(Experiment(running).value("state", ""), "succeeded") << Logs();
  int queued = 0;
  for (const auto& id : sub["experiment_ids"]) {
    if (id == running) continue;
    json e = Experiment(id);
    EXPECT_EQ(e.value("state", ""), "queued") << e.dump();
    queued += e.value("state", "") == "queued";
  }
  EXPECT_EQ(WorkerStatus("op-1").value("state", ""), "drained");
  std::printf("drain: experiment %lld finished, worker exited 0, %d left queued\n",
              static_cast<long long>(running), queued);

  // Refusals name the worker.
  CommandResult unknown = Xvctl({"drain", "no-such-worker"});
  EXPECT_EQ(unknown.exit_code, 1);
  EXPECT_NE(unknown.err.find("'no-such-worker': no such worker"), std::string::npos) << unknown.err;
  CommandResult gone = Xvctl({"drain", "op-1"});
  EXPECT_EQ(gone.exit_code, 1);
  EXPECT_NE(gone.err.find("is not connected"), std::string::npos) << gone.err;
  CommandResult neither = Xvctl({"drain"});
  EXPECT_EQ(neither.exit_code, 2) << neither.err;

  // Restarted, the worker takes work again.
  StartWorker("op-1", {{"XV_FAKE_STEPS", "2"}, {"XV_FAKE_STEP_SECONDS", "0.01"}});
  CommandResult wait = Xvctl({"wait", "--timeout", "60"}, 90);
  ASSERT_EQ(wait.exit_code, 0) << wait.out << wait.err << Logs();
  for (const auto& id : sub["experiment_ids"]) {
    EXPECT_EQ(Experiment(id).value("state", ""), "succeeded");
  }
}

TEST_F(OperationsE2eTest, CancelStopsRunningAndQueuedExperiments) {
  StartDaemon();
  StartWorker("op-c", {{"XV_FAKE_STEPS", "3"}, {"XV_FAKE_STEP_SECONDS", "0.05"}});
  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  json first = XvctlJson({"submit", recipe, "--candidate", "matrix_lr=0.01", "--json"});
  ASSERT_EQ(first.value("experiment_ids", json::array()).size(), 1u) << first.dump();
  const int64_t finished = first["experiment_ids"][0];
  ASSERT_TRUE(WaitUntil([&] { return Experiment(finished).value("state", "") == "succeeded"; }, 30))
      << Logs();
  // A long-running worker for the next ones: restart it with slow steps.
  workers_.back().Stop();
  ChildGuard& w = StartWorker("op-c", {{"XV_FAKE_STEPS", "400"}, {"XV_FAKE_STEP_SECONDS", "0.1"}});
  json sub = XvctlJson({"submit", recipe, "--candidate", "matrix_lr=0.02", "--candidate",
                        "matrix_lr=0.03", "--candidate", "matrix_lr=0.05", "--json"});
  ASSERT_EQ(sub.value("experiment_ids", json::array()).size(), 3u) << sub.dump();
  int64_t running = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        json ws = WorkerStatus("op-c");
        running = ws.is_null() ? 0 : ws.value("current_experiment_id", int64_t{0});
        return running != 0 && Experiment(running).value("state", "") == "running";
      },
      30))
      << Logs();
  int64_t queued = 0, spare = 0;
  for (const auto& id : sub["experiment_ids"]) {
    if (id == running) continue;
    (queued == 0 ? queued : spare) = id.get<int64_t>();
  }
  CommandResult cancel = Xvctl({"cancel", std::to_string(running), std::to_string(queued),
                                std::to_string(finished), "999999"});
  EXPECT_EQ(cancel.exit_code, 1) << cancel.out << cancel.err;
  EXPECT_NE(cancel.out.find("experiment " + std::to_string(running) + ": cancelled"),
            std::string::npos)
      << cancel.out;
  EXPECT_NE(cancel.out.find("experiment " + std::to_string(queued) + ": cancelled"),
            std::string::npos)
      << cancel.out;
  EXPECT_NE(cancel.out.find("experiment " + std::to_string(finished) +
                            ": already succeeded, nothing to cancel"),
            std::string::npos)
      << cancel.out;
  EXPECT_NE(cancel.err.find("999999"), std::string::npos) << cancel.err;
  EXPECT_EQ(Experiment(running).value("state", ""), "cancelled");
  EXPECT_EQ(Experiment(queued).value("state", ""), "cancelled");
  EXPECT_EQ(Experiment(finished).value("state", ""), "succeeded");
  // The worker stops the cancelled trainer long before its 40 s of steps and takes the spare.
  ASSERT_TRUE(WaitUntil(
      [&] {
        json ws = WorkerStatus("op-c");
        return !ws.is_null() && ws.value("current_experiment_id", int64_t{0}) == spare;
      },
      20))
      << Logs();
  EXPECT_TRUE(w.Alive());
  CommandResult json_form = Xvctl({"cancel", std::to_string(spare), "--json"});
  EXPECT_EQ(json_form.exit_code, 0) << json_form.err;
  json parsed = json::parse(json_form.out, nullptr, false);
  ASSERT_FALSE(parsed.is_discarded()) << json_form.out;
  EXPECT_EQ(parsed["experiments"][0].value("state", ""), "cancelled") << json_form.out;
  std::printf("cancel: running %lld and queued %lld cancelled, finished %lld kept, 999999 named\n",
              static_cast<long long>(running), static_cast<long long>(queued),
              static_cast<long long>(finished));
}

TEST_F(OperationsE2eTest, CampaignMaxAttemptsLimitsRequeues) {
  StartDaemon({"--lease-ms", "1500", "--heartbeat-ms", "300"});
  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  CommandResult bad =
      Xvctl({"campaign", "create", "x", "--recipe", recipe, "--max-attempts", "11"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--max-attempts: must be 1..10, got 11"), std::string::npos) << bad.err;
  json one = XvctlJson(
      {"campaign", "create", "once", "--recipe", recipe, "--max-attempts", "1", "--json"});
  EXPECT_EQ(one.value("max_attempts", 0), 1) << one.dump();
  json def = XvctlJson({"campaign", "create", "twice", "--recipe", recipe, "--json"});
  EXPECT_EQ(def.value("max_attempts", 0), 2) << def.dump();
  CommandResult show = Xvctl({"campaign", "show", "once"});
  EXPECT_NE(show.out.find("max attempts: 1"), std::string::npos) << show.out;

  // A worker killed mid-run: its attempt is lost; one attempt allowed -> the experiment is lost.
  ChildGuard& w = StartWorker("op-kill", {{"XV_FAKE_MODE", "hang"}});
  json sub = XvctlJson({"submit", "--campaign", "once", "--candidate", "matrix_lr=0.02", "--json"});
  // The round runs its controls and the candidate in a randomised order: whichever experiment the
  // worker took first is the one its death loses.
  int64_t id = 0;
  ASSERT_TRUE(WaitUntil(
      [&] {
        for (const auto& e : sub["experiment_ids"]) {
          if (Experiment(e.get<int64_t>()).value("state", "") != "running") continue;
          id = e.get<int64_t>();
          return true;
        }
        return false;
      },
      30))
      << Logs();
  ::kill(w.pid(), SIGKILL);
  w.Stop();
  // The orphaned fake trainer (its own process group) hangs on; end it.
  for (const auto& entry : fs::recursive_directory_iterator(sb_.dir() / "work-op-kill")) {
    if (entry.path().filename() != "fake_trainer.pid") continue;
    std::ifstream f(entry.path());
    pid_t pid = 0;
    if (f >> pid && pid > 0) {
      ::kill(-pid, SIGKILL);
      ::kill(pid, SIGKILL);
    }
  }
  ASSERT_TRUE(WaitUntil([&] { return Experiment(id).value("state", "") == "lost"; }, 20))
      << Experiment(id).dump() << Logs();
  json e = Experiment(id);
  EXPECT_EQ(e.value("attempt", 0), 1) << e.dump();
  std::printf(
      "max attempts: campaign 'once' (1 attempt): experiment %lld ended %s after attempt "
      "%d\n",
      static_cast<long long>(id), e.value("state", "").c_str(), e.value("attempt", 0));
}

TEST_F(OperationsE2eTest, StoppedWorkerHandsItsAttemptBackToTheQueue) {
  // A lease far longer than the test: the requeue must come from the worker's report, not from
  // the lease running out.
  StartDaemon({"--lease-ms", "120000", "--heartbeat-ms", "300"});
  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  ChildGuard& stopped = StartWorker("op-stop", {{"XV_FAKE_MODE", "hang"}});
  json sub = XvctlJson({"submit", recipe, "--candidate", "matrix_lr=0.02", "--json"});
  ASSERT_EQ(sub.value("experiment_ids", json::array()).size(), 1u) << sub.dump();
  const int64_t id = sub["experiment_ids"][0];
  ASSERT_TRUE(WaitUntil([&] { return Experiment(id).value("state", "") == "running"; }, 30))
      << Logs();
  // SIGTERM, as systemd, Slurm (scancel, the time limit) and Kubernetes stop a worker.
  const int status = stopped.Stop(30);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "wait status " << status << Logs();
  ASSERT_TRUE(WaitUntil([&] { return Experiment(id).value("state", "") == "queued"; }, 30))
      << Experiment(id).dump() << Logs();
  EXPECT_EQ(Experiment(id).value("attempt", 0), 1) << Experiment(id).dump();
  // The next worker runs it: attempt 2, to success.
  StartWorker("op-next", {});
  ASSERT_TRUE(WaitUntil([&] { return Experiment(id).value("state", "") == "succeeded"; }, 60))
      << Experiment(id).dump() << Logs();
  EXPECT_EQ(Experiment(id).value("attempt", 0), 2) << Experiment(id).dump();
  EXPECT_NE(ReadFileText(sb_.Path("xvd.log")).find("interrupted on op-stop"), std::string::npos)
      << Logs();
  std::printf("stopped worker: experiment %lld requeued on SIGTERM, succeeded on attempt 2\n",
              static_cast<long long>(id));
}

// Writes zeros to `path` until the file system is full.
void FillDisk(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  std::vector<char> block(64 * 1024, 0);
  while (std::fwrite(block.data(), 1, block.size(), f) == block.size()) {
  }
  // Fill the last partial block byte by byte.
  std::setvbuf(f, nullptr, _IONBF, 0);
  while (std::fputc(0, f) != EOF) {
  }
  std::fclose(f);
}

TEST_F(OperationsE2eTest, FullDiskMakesTheDaemonReadOnlyUntilSpaceReturns) {
  if (::geteuid() != 0 ||
      ::mount("tmpfs", sb_.state().c_str(), "tmpfs", 0, "size=4m,mode=0755") != 0) {
    GTEST_SKIP() << "needs root to mount a small tmpfs as the state directory (a real full disk)";
  }
  mounted_ = true;
  StartDaemon({"--write-retry-ms", "300", "--wal-checkpoint-ms", "200", "--wal-idle-ms", "300"});
  const std::string recipe = SourcePath("recipes/cpu-tiny.yaml");
  json first = XvctlJson({"submit", recipe, "--candidate", "matrix_lr=0.01", "--json"});
  ASSERT_EQ(first.value("experiment_ids", json::array()).size(), 1u);
  // Idle: the WAL is truncated, so the next write must allocate space.
  ASSERT_TRUE(WaitUntil([&] { return fs::file_size(sb_.state() + "/xv.db-wal") == 0; }, 10))
      << "the idle TRUNCATE checkpoint never emptied the WAL" << FileTail(sb_.Path("xvd.log"));
  FillDisk(sb_.state() + "/filler");

  CommandResult refused = Xvctl({"submit", recipe, "--candidate", "matrix_lr=0.02"});
  EXPECT_EQ(refused.exit_code, 1) << refused.out << refused.err;
  EXPECT_NE(refused.err.find("read-only mode"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find(sb_.state() + "/xv.db"), std::string::npos) << refused.err;
  EXPECT_NE(refused.err.find("full"), std::string::npos) << refused.err;
  json status = XvctlJson({"status", "--json"});
  const std::string mode = status.value("write_mode", "");
  EXPECT_EQ(mode.rfind("read-only: ", 0), 0u) << status.dump(2);
  EXPECT_NE(mode.find("full"), std::string::npos) << mode;
  CommandResult human = Xvctl({"status"});
  EXPECT_NE(human.out.find("mode: read-only"), std::string::npos) << human.out;
  // Reads keep working; a campaign cannot be created either.
  json results = XvctlJson({"results", "--json"});
  EXPECT_EQ(results.value("experiments", json::array()).size(), 1u) << results.dump();
  CommandResult create = Xvctl({"campaign", "create", "c", "--recipe", recipe});
  EXPECT_EQ(create.exit_code, 1);
  EXPECT_NE(create.err.find("read-only mode"), std::string::npos) << create.err;
  // A worker can not get the queued experiment while the mode lasts.
  StartWorker("op-ro", {{"XV_FAKE_STEPS", "2"}, {"XV_FAKE_STEP_SECONDS", "0.01"}});
  ::usleep(1500 * 1000);
  EXPECT_EQ(Experiment(first["experiment_ids"][0]).value("state", ""), "queued");

  // Space returns: the daemon retries and leaves the mode by itself.
  fs::remove(sb_.state() + "/filler");
  ASSERT_TRUE(WaitUntil(
      [&] {
        return XvctlJson({"status", "--json"}).value("write_mode", "x") == "read-write";
      },
      15))
      << Logs();
  json second = XvctlJson({"submit", recipe, "--candidate", "matrix_lr=0.02", "--json"});
  ASSERT_EQ(second.value("experiment_ids", json::array()).size(), 1u);
  CommandResult wait = Xvctl({"wait", "--timeout", "60"}, 90);
  ASSERT_EQ(wait.exit_code, 0) << wait.out << wait.err << Logs();
  EXPECT_EQ(Experiment(first["experiment_ids"][0]).value("state", ""), "succeeded");
  EXPECT_EQ(Experiment(second["experiment_ids"][0]).value("state", ""), "succeeded");
  const std::string log = FileTail(sb_.Path("xvd.log"), 100000);
  EXPECT_NE(log.find("read-only mode:"), std::string::npos);
  EXPECT_NE(log.find("read-only mode over"), std::string::npos);
  std::printf("read-only: refused with \"%s\"; left the mode after the disk had space again\n",
              mode.c_str());
}

}  // namespace
}  // namespace xv::e2e
