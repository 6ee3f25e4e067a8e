// Fixtures shared by the event outbox and event spool tests: the WorkerMessages a worker owes the
// daemon (a trainer's step event, an attempt's Finished) and a scratch directory per test.
// Thread-safety: none; one test thread.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <system_error>

#include "xv/v1/workers.pb.h"

namespace xv::worker::testing {

// Trainer event `seq` of attempt `att` of experiment `exp`: type "step", its JSON naming the step.
inline v1::WorkerMessage StepEvent(int64_t exp, int32_t att, int64_t seq) {
  v1::WorkerMessage m;
  auto* e = m.mutable_event();
  e->set_experiment_id(exp);
  e->set_attempt(att);
  e->set_seq(seq);
  e->set_type("step");
  e->set_json("{\"type\":\"step\",\"step\":" + std::to_string(seq) + "}");
  return m;
}

// The Finished of attempt `att` of experiment `exp` after event `last_seq`: state succeeded, with
// a stderr tail.
inline v1::WorkerMessage SucceededFinished(int64_t exp, int32_t att, int64_t last_seq) {
  v1::WorkerMessage m;
  auto* f = m.mutable_finished();
  f->set_experiment_id(exp);
  f->set_attempt(att);
  f->set_last_seq(last_seq);
  f->set_state("succeeded");
  f->set_stderr_tail("val_bpb: 1.2\n");
  return m;
}

// <system temp dir>/xv-<tag>-<pid>-<running test's name>. The constructor removes what an earlier
// run left there and does not create it (the code under test may be the one to make it); the
// destructor removes it unless the test failed (kept to look at). Construct it inside a test (as a
// fixture member): it reads the running test's name.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& tag) {
    const ::testing::TestInfo* test = ::testing::UnitTest::GetInstance()->current_test_info();
    path_ =
        std::filesystem::temp_directory_path() / ("xv-" + tag + "-" + std::to_string(::getpid()) +
                                                  "-" + (test != nullptr ? test->name() : "none"));
    std::filesystem::remove_all(path_);
  }
  ~ScratchDir() {
    std::error_code ec;
    if (!::testing::Test::HasFailure()) std::filesystem::remove_all(path_, ec);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;

  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace xv::worker::testing
