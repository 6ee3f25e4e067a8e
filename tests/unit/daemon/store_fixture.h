// Test fixture pieces shared by the daemon store tests: a temporary state directory and a hand-made
// submission (no recipe parsing, so the store is tested on its own).
#pragma once

#include <filesystem>
#include <random>
#include <string>

#include "daemon/store/store.h"

namespace xv::store::testing {

// A fresh directory under the system temp dir, removed on destruction.
class TempDir {
 public:
  TempDir() {
    std::random_device rd;
    path_ = std::filesystem::temp_directory_path() /
            ("xv-daemon-test-" + std::to_string(rd()) + std::to_string(rd()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_.string(); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A submission of `n` experiments (candidate "c<i>", one replicate each) with distinct recipe
// hashes.
inline NewSubmission MakeSubmission(int n, const std::string& campaign = "default") {
  NewSubmission sub;
  sub.campaign = campaign;
  sub.recipe_name = "test";
  sub.recipe_yaml = "depth: 2\n";
  sub.base_hash = "base-hash-" + campaign;
  sub.base_recipe_json = R"({"depth":2})";
  sub.base_resolved_json = R"({"depth":2,"model_dim":128})";
  for (int i = 0; i < n; ++i) {
    NewExperiment e;
    e.name = "c" + std::to_string(i);
    e.candidate_index = i;
    e.overrides_json = R"({"matrix_lr":)" + std::to_string(0.01 * (i + 1)) + "}";
    e.seed = 42;
    e.recipe_hash = campaign + "-hash-" + std::to_string(i);
    e.recipe_json = R"({"depth":2,"seed":42})";
    e.resolved_json = R"({"depth":2,"seed":42,"model_dim":128})";
    e.time_budget_s = 20;
    e.hard_deadline_s = 340;
    sub.experiments.push_back(e);
  }
  return sub;
}

inline xv::v1::Register MakeRegister(const std::string& name, const std::string& backend = "cpu") {
  xv::v1::Register reg;
  reg.set_worker_name(name);
  reg.mutable_device()->set_name(backend == "cpu" ? "cpu: test" : "NVIDIA H200");
  reg.mutable_device()->set_backend(backend);
  reg.mutable_capabilities()->add_trainers("libtorch");
  return reg;
}

inline xv::v1::TrainerEvent MakeEvent(int64_t exp, int attempt, int64_t seq,
                                      const std::string& type, const std::string& json) {
  xv::v1::TrainerEvent ev;
  ev.set_experiment_id(exp);
  ev.set_attempt(attempt);
  ev.set_seq(seq);
  ev.set_type(type);
  ev.set_json(json);
  ev.set_unix_ms(1700000000000 + seq);
  return ev;
}

// A trainer's exit report of `attempt` of `exp`, ending in `state` (as the worker sends it).
inline xv::v1::Finished MakeFinished(int64_t exp, int attempt, const std::string& state) {
  xv::v1::Finished f;
  f.set_experiment_id(exp);
  f.set_attempt(attempt);
  f.set_state(state);
  return f;
}

}  // namespace xv::store::testing
