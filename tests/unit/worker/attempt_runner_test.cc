// AttemptRunner against the scripted fake trainer (tests/fixtures/fake_trainer.sh) and against
// launchers that fail: every exit path ends in the right state, events are numbered in order, the
// deadline and cancel kill the whole process group.
#include "worker/attempt_runner.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

namespace xv::worker {
namespace {

namespace fs = std::filesystem;

std::string FakeTrainer() {
  const char* src = getenv("XV_SOURCE_DIR");
  return std::string(src ? src : ".") + "/tests/fixtures/fake_trainer.sh";
}

// Processes of process group `pgid` that are not zombies, from /proc/<pid>/stat.
int LiveMembersOfGroup(int pgid) {
  int n = 0;
  for (const auto& entry : fs::directory_iterator("/proc")) {
    std::string name = entry.path().filename().string();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream f(entry.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(f)), {});
    size_t close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(stat.substr(close + 2));
    char state = 0;
    int ppid = 0, pgrp = 0;
    rest >> state >> ppid >> pgrp;
    if (pgrp == pgid && state != 'Z' && state != 'X') ++n;
  }
  return n;
}

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() { unsetenv(name_); }

 private:
  const char* name_;
};

class AttemptRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("xv-attempt-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    inv_.trainer_bin = FakeTrainer();
    inv_.data_dir = (dir_ / "data").string();
    inv_.device_flag = "cpu";
    inv_.work_dir = (dir_ / "work").string();
    inv_.kill_grace_s = 0.5;
    launcher_ = NewPosixProcessLauncher();
    setenv("XV_FAKE_STEP_SECONDS", "0.01", 1);
  }
  void TearDown() override {
    unsetenv("XV_FAKE_STEP_SECONDS");
    fs::remove_all(dir_);
  }

  v1::ExperimentSpec Spec(double matrix_lr, double deadline_s = 60) {
    v1::ExperimentSpec s;
    s.set_experiment_id(12);
    s.set_attempt(1);
    s.set_recipe_json("{\"depth\": 2, \"matrix_lr\": " + std::to_string(matrix_lr) + "}");
    s.set_time_budget_s(1);
    s.set_hard_deadline_s(deadline_s);
    return s;
  }

  v1::Finished Run(const v1::ExperimentSpec& spec, AttemptRunner* runner = nullptr) {
    AttemptRunner local(inv_, launcher_.get());
    if (!runner) runner = &local;
    events_.clear();
    return runner->Run(spec, [&](const v1::TrainerEvent& ev) { events_.push_back(ev); });
  }

  fs::path dir_;
  TrainerInvocation inv_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::vector<v1::TrainerEvent> events_;
};

TEST_F(AttemptRunnerTest, SuccessRelaysEveryEventInOrderAndWritesTheSpecDir) {
  ScopedEnv steps("XV_FAKE_STEPS", "4");
  v1::Finished fin = Run(Spec(0.03));
  EXPECT_EQ(fin.state(), "succeeded");
  EXPECT_EQ(fin.exit_code(), 0);
  EXPECT_EQ(fin.failure_kind(), "");
  EXPECT_EQ(fin.experiment_id(), 12);
  EXPECT_EQ(fin.attempt(), 1);
  // start + 4 steps + eval + summary
  ASSERT_EQ(events_.size(), 7u);
  for (size_t i = 0; i < events_.size(); ++i) {
    EXPECT_EQ(events_[i].seq(), static_cast<int64_t>(i + 1));
    EXPECT_EQ(events_[i].experiment_id(), 12);
    EXPECT_GT(events_[i].unix_ms(), 0);
  }
  EXPECT_EQ(events_.front().type(), "start");
  EXPECT_EQ(events_.back().type(), "summary");
  EXPECT_EQ(fin.last_seq(), 7);
  auto summary = nlohmann::json::parse(events_.back().json());
  EXPECT_DOUBLE_EQ(summary["val_bpb"].get<double>(), 1.3);  // 1 + 10 * 0.03
  // Spec dir: the recipe verbatim, the spec, the trainer's stderr.
  fs::path spec_dir = dir_ / "work" / "exp-12-a1";
  std::ifstream recipe(spec_dir / "recipe.json");
  std::string text((std::istreambuf_iterator<char>(recipe)), {});
  EXPECT_EQ(text, Spec(0.03).recipe_json());
  EXPECT_TRUE(fs::exists(spec_dir / "spec.json"));
  EXPECT_GT(fs::file_size(spec_dir / "trainer.stderr.log"), 0u);
  EXPECT_NE(fin.stderr_tail().find("val_bpb:"), std::string::npos) << fin.stderr_tail();
}

TEST_F(AttemptRunnerTest, CrashBySignalIsFailedCrashedWithTheSignal) {
  ScopedEnv mode("XV_FAKE_MODE", "crash");
  v1::Finished fin = Run(Spec(0.04));
  EXPECT_EQ(fin.state(), "failed");
  EXPECT_EQ(fin.failure_kind(), "crashed");
  EXPECT_EQ(fin.signal(), SIGSEGV);
  EXPECT_EQ(fin.exit_code(), -1);
  EXPECT_NE(fin.failure_detail().find("SIGSEGV"), std::string::npos);
  EXPECT_NE(fin.stderr_tail().find("segfault requested"), std::string::npos);
  EXPECT_EQ(events_.size(), 2u);  // start, step 1
}

TEST_F(AttemptRunnerTest, ExitCodesMapToStates) {
  struct Case {
    const char* mode;
    const char* state;
    const char* kind;
    const char* detail;
  } cases[] = {
      {"diverge", "diverged", "diverged", "loss is nan at step 1"},
      {"invalid", "invalid", "invalid_config", "matrix_lr: rejected by the fake trainer"},
      {"oom", "failed", "oom", "out of memory (fake)"},
      {"data_error", "failed", "data_error", "shards/val-00000.xvt: truncated (fake)"},
      {"exit1", "failed", "crashed", "exit code 1"},
  };
  for (const auto& c : cases) {
    ScopedEnv mode("XV_FAKE_MODE", c.mode);
    v1::Finished fin = Run(Spec(0.04));
    EXPECT_EQ(fin.state(), c.state) << c.mode;
    EXPECT_EQ(fin.failure_kind(), c.kind) << c.mode;
    EXPECT_EQ(fin.failure_detail(), c.detail) << c.mode;
  }
}

TEST_F(AttemptRunnerTest, HardDeadlineTerminatesTheProcessGroup) {
  ScopedEnv mode("XV_FAKE_MODE", "hang");
  auto t0 = std::chrono::steady_clock::now();
  v1::Finished fin = Run(Spec(0.04, /*deadline_s=*/1.0));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(fin.state(), "timed_out");
  EXPECT_EQ(fin.failure_kind(), "timed_out");
  EXPECT_EQ(fin.signal(), SIGTERM);
  EXPECT_LT(took, 5.0);
  // The fake's `sleep` child was in the same group: nothing of it survives.
  std::ifstream pidf(dir_ / "work" / "exp-12-a1" / "fake_trainer.pid");
  int pid = 0;
  pidf >> pid;
  ASSERT_GT(pid, 0);
  // Zombies do not count: an orphan's reaper may be slow (PID 1 of a container).
  bool gone = false;
  for (int i = 0; i < 50 && !gone; ++i) {
    gone = LiveMembersOfGroup(pid) == 0;
    if (!gone) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(gone) << "process group " << pid << " still has live members";
}

TEST_F(AttemptRunnerTest, ATrainerIgnoringTermIsKilledAfterTheGrace) {
  ScopedEnv mode("XV_FAKE_MODE", "hang_ignore_term");
  auto t0 = std::chrono::steady_clock::now();
  v1::Finished fin = Run(Spec(0.04, /*deadline_s=*/1.0));
  double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(fin.state(), "timed_out");
  EXPECT_EQ(fin.signal(), SIGKILL);
  EXPECT_GE(took, 1.4);  // deadline + grace
  EXPECT_LT(took, 6.0);
}

TEST_F(AttemptRunnerTest, CancelFromAnotherThreadEndsAsCancelled) {
  ScopedEnv mode("XV_FAKE_MODE", "hang");
  AttemptRunner runner(inv_, launcher_.get());
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    runner.Cancel(99, 1);  // another experiment: ignored
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
    runner.Cancel(12, 1);
  });
  v1::Finished fin = Run(Spec(0.04), &runner);
  canceller.join();
  EXPECT_EQ(fin.state(), "cancelled");
  EXPECT_EQ(fin.failure_kind(), "cancelled");
}

TEST_F(AttemptRunnerTest, EventsFileHoldsEveryLineWhileTheTrainerRuns) {
  // The trainer prints start and step 1, then hangs: what events.jsonl holds meanwhile is what a
  // worker killed at that moment leaves behind.
  ScopedEnv mode("XV_FAKE_MODE", "hang");
  AttemptRunner runner(inv_, launcher_.get());
  const fs::path events_path = dir_ / "work" / "exp-12-a1" / "events.jsonl";
  std::vector<std::string> lines;
  std::thread reader([&] {
    const auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10)) {
      std::ifstream f(events_path);
      std::vector<std::string> now;
      for (std::string line; std::getline(f, line);) now.push_back(line);
      if (now.size() >= 2) {
        lines = now;
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    runner.Cancel(12, 1);
  });
  v1::Finished fin = Run(Spec(0.04), &runner);
  reader.join();
  EXPECT_EQ(fin.state(), "cancelled");
  ASSERT_EQ(lines.size(), 2u) << "events.jsonl was not flushed while the trainer ran";
  EXPECT_EQ(nlohmann::json::parse(lines[0])["type"], "start");
  EXPECT_EQ(nlohmann::json::parse(lines[1])["type"], "step");
}

TEST_F(AttemptRunnerTest, MissingTrainerBinaryIsAFailedAttemptNotAWorkerCrash) {
  inv_.trainer_bin = (dir_ / "no-such-trainer").string();
  v1::Finished fin = Run(Spec(0.04));
  EXPECT_EQ(fin.state(), "failed");
  EXPECT_EQ(fin.failure_kind(), "crashed");
  EXPECT_NE(fin.failure_detail().find("no-such-trainer"), std::string::npos)
      << fin.failure_detail();
  EXPECT_TRUE(events_.empty());
}

class RefusingLauncher : public ProcessLauncher {
 public:
  Status Launch(const ChildSpec& spec, std::unique_ptr<ChildProcess>*) override {
    last_argv = spec.argv;
    last_env = spec.env_overrides;
    return Status::ResourceExhausted("fork: Resource temporarily unavailable");
  }
  std::vector<std::string> last_argv;
  std::vector<std::pair<std::string, std::string>> last_env;
};

TEST_F(AttemptRunnerTest, LaunchFailureIsReportedAndTheCommandLineFollowsTheContract) {
  RefusingLauncher refusing;
  inv_.device_flag = "cuda";
  inv_.visible_devices = "3";
  AttemptRunner runner(inv_, &refusing);
  v1::Finished fin = runner.Run(Spec(0.04), [](const v1::TrainerEvent&) {});
  EXPECT_EQ(fin.state(), "failed");
  EXPECT_NE(fin.failure_detail().find("Resource temporarily unavailable"), std::string::npos);
  std::string spec_dir = (dir_ / "work" / "exp-12-a1").string();
  std::vector<std::string> want = {
      FakeTrainer(), "train",       "--recipe-json", spec_dir + "/recipe.json",
      "--data",      inv_.data_dir, "--device",      "cuda"};
  EXPECT_EQ(refusing.last_argv, want);
  std::map<std::string, std::string> env(refusing.last_env.begin(), refusing.last_env.end());
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "3");
  EXPECT_EQ(env["HIP_VISIBLE_DEVICES"], "3");
}

TEST_F(AttemptRunnerTest, NonJsonStdoutLinesAreRelayedAsLogEvents) {
  // A trainer that prints plain text: write a tiny script.
  fs::path script = dir_ / "plain.sh";
  std::ofstream(script) << "#!/bin/sh\necho hello world\necho '{\"type\":\"summary\",\"t\":1}'\n";
  fs::permissions(script, fs::perms::owner_all);
  inv_.trainer_bin = script.string();
  v1::Finished fin = Run(Spec(0.04));
  EXPECT_EQ(fin.state(), "succeeded");
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].type(), "log");
  EXPECT_EQ(nlohmann::json::parse(events_[0].json())["text"], "hello world");
  EXPECT_EQ(events_[1].type(), "summary");
}

}  // namespace
}  // namespace xv::worker
