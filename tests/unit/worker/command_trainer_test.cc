// The `command` trainer plugin: the worker config file (every refusal names the field), the XV_*
// environment and spec.json contract, and AttemptRunner running real command trainers (a script
// that records its environment, tests/fixtures/noisy_trainer.sh printing upstream's format, FAIL,
// a missing summary, an unconfigured name, the deadline).
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "worker/attempt_runner.h"
#include "worker/command_trainer.h"
#include "worker/trainer_config.h"

namespace xv::worker {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string SourcePath(const std::string& rel) {
  const char* src = getenv("XV_SOURCE_DIR");
  return std::string(src ? src : ".") + "/" + rel;
}

std::string ReadText(const fs::path& p) {
  std::ifstream f(p);
  return std::string((std::istreambuf_iterator<char>(f)), {});
}

// ---- the config file ----

TEST(WorkerConfigTest, ParsesLibtorchAndCommandTrainers) {
  WorkerConfig c;
  Status st = ParseWorkerConfigYaml(R"(
trainers:
  - name: libtorch
    kind: libtorch
  - name: upstream-fork
    kind: command
    program: /usr/bin/python3
    args: [/home/me/autoresearch/train.py, --quiet]
    env: {PYTHONUNBUFFERED: "1", OMP_NUM_THREADS: 4}
    output: upstream
  - name: plain
    kind: command
    program: /bin/true
)",
                                    &c);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(c.trainers.size(), 3u);
  EXPECT_EQ(c.trainers[0].kind, TrainerKind::kLibtorch);
  EXPECT_EQ(c.trainers[0].output, TrainerOutputFormat::kXvEvents);
  const TrainerConfig& u = c.trainers[1];
  EXPECT_EQ(u.name, "upstream-fork");
  EXPECT_EQ(u.kind, TrainerKind::kCommand);
  EXPECT_EQ(u.program, "/usr/bin/python3");
  EXPECT_EQ(u.args, (std::vector<std::string>{"/home/me/autoresearch/train.py", "--quiet"}));
  ASSERT_EQ(u.env.size(), 2u);
  EXPECT_EQ(u.env[1], (std::pair<std::string, std::string>{"OMP_NUM_THREADS", "4"}));
  EXPECT_EQ(u.output, TrainerOutputFormat::kUpstream);
  EXPECT_EQ(c.trainers[2].output, TrainerOutputFormat::kAuto);  // the default
  EXPECT_TRUE(c.trainers[2].args.empty());
  EXPECT_EQ(FindTrainer(c, ""), &c.trainers[0]);  // "" means libtorch
  EXPECT_EQ(FindTrainer(c, "plain"), &c.trainers[2]);
  EXPECT_EQ(FindTrainer(c, "nope"), nullptr);
}

TEST(WorkerConfigTest, RefusalsNameTheField) {
  struct Case {
    const char* yaml;
    const char* expected;
  };
  const Case cases[] = {
      {"trainer: []", "trainer: unknown field"},
      {"trainers: []", "trainers: must be a non-empty list"},
      {"trainers:\n  - name: x\n    kind: command\n    program: /bin/true\n    progam: /x\n",
       "trainers[0].progam: unknown field"},
      {"trainers:\n  - name: x\n    kind: command\n    program: train.py\n",
       "trainers[0].program: must be an absolute path, got 'train.py'"},
      {"trainers:\n  - name: x\n    kind: command\n", "trainers[0].program: required"},
      {"trainers:\n  - name: x\n    kind: shell\n    program: /bin/sh\n",
       "trainers[0].kind: must be libtorch, command or autoresearch, got 'shell'"},
      {"trainers:\n  - name: x\n    program: /bin/sh\n", "trainers[0].kind: required"},
      {"trainers:\n  - kind: libtorch\n", "trainers[0].name: required"},
      {"trainers:\n  - name: 'a b'\n    kind: libtorch\n", "trainers[0].name: 'a b' is not"},
      {"trainers:\n  - name: x\n    kind: command\n    program: /bin/true\n    output: json\n",
       "trainers[0].output: must be auto, xv-events or upstream, got 'json'"},
      {"trainers:\n  - name: x\n    kind: libtorch\n    args: [--fast]\n",
       "trainers[0].args: only command trainers take args"},
      {"trainers:\n  - name: x\n    kind: command\n    program: /bin/true\n    args: /x\n",
       "trainers[0].args: must be a list of strings"},
      {"trainers:\n  - name: x\n    kind: command\n    program: /bin/true\n    env: {1BAD: x}\n",
       "trainers[0].env: '1BAD' is not an environment variable name"},
      {"trainers:\n  - name: x\n    kind: command\n    program: /bin/true\n    env: [OK, 2X=y]\n",
       "trainers[0].env[1]: '2X' is not an environment variable name (NAME or NAME=value)"},
      {"trainers:\n  - name: x\n    kind: command\n    program: /bin/true\n    env: [[A]]\n",
       "trainers[0].env[0]: must be a string"},
      {"trainers:\n  - {name: x, kind: libtorch}\n  - {name: x, kind: command, program: "
       "/bin/true}\n",
       "trainers[1].name: 'x' is configured twice"},
      {"trainers: [\n", "worker config: invalid YAML"},
  };
  for (const Case& c : cases) {
    WorkerConfig config = DefaultWorkerConfig();
    Status st = ParseWorkerConfigYaml(c.yaml, &config);
    EXPECT_FALSE(st.ok()) << c.yaml;
    EXPECT_NE(st.message().find(c.expected), std::string::npos)
        << "yaml:\n"
        << c.yaml << "\nmessage: " << st.message();
    EXPECT_NE(st.message().find("(line "), std::string::npos) << st.message();
    ASSERT_EQ(config.trainers.size(), 1u) << "changed on error";
  }
}

// xv-worker's flags share the file (common/config_file.h reads them); the trainer parser skips the
// keys the worker says are flags, refuses the others, and gives a file of flags only the default.
TEST(WorkerConfigTest, FlagKeysShareTheFileWithTrainers) {
  const IsWorkerFlagKey is_flag = [](const std::string& key) {
    return key == "daemon" || key == "token-file";
  };
  WorkerConfig c;
  ASSERT_TRUE(ParseWorkerConfigYaml("daemon: xvd:7470\ntrainers:\n  - {name: t, kind: libtorch}\n",
                                    &c, is_flag)
                  .ok());
  ASSERT_EQ(c.trainers.size(), 1u);
  EXPECT_EQ(c.trainers[0].name, "t");
  c = WorkerConfig();
  Status st = ParseWorkerConfigYaml("daemon: xvd:7470\ntoken-file: /t\n", &c, is_flag);
  ASSERT_TRUE(st.ok()) << st.ToString();
  ASSERT_EQ(c.trainers.size(), 1u);
  EXPECT_EQ(c.trainers[0].name, "libtorch");
  st = ParseWorkerConfigYaml("daemon: xvd:7470\ndeamon: x\n", &c, is_flag);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("deamon: unknown field (the worker config has 'trainers' and "
                              "xv-worker's flags"),
            std::string::npos)
      << st.message();
  EXPECT_FALSE(ParseWorkerConfigYaml("daemon: xvd:7470\n", &c).ok());  // no flag keys: unknown
}

TEST(WorkerConfigTest, FileErrorsStartWithThePathAndMissingProgramsAreNamed) {
  WorkerConfig c;
  Status st = LoadWorkerConfigFile("/nonexistent/worker.yaml", &c);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/nonexistent/worker.yaml"), std::string::npos);
  ASSERT_TRUE(ParseWorkerConfigYaml(
                  "trainers:\n  - {name: gone, kind: command, program: /nonexistent/train}\n", &c)
                  .ok());
  st = CheckWorkerConfigPrograms(c);
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("trainer 'gone': program /nonexistent/train"), std::string::npos)
      << st.message();
}

TEST(WorkerConfigTest, TheShippedExampleParses) {
  WorkerConfig c;
  Status st = LoadWorkerConfigFile(SourcePath("deploy/worker-config.example.yaml"), &c);
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_NE(FindTrainer(c, "libtorch"), nullptr);
  EXPECT_GE(c.trainers.size(), 2u);
}

TEST(WorkerConfigTest, EnvListPassesNamesOnAndSetsPairs) {
  WorkerConfig config;
  ASSERT_TRUE(ParseWorkerConfigYaml(R"(trainers:
  - name: fork
    kind: command
    program: /usr/bin/python3
    env: [WANDB_API_KEY, PYTHONUNBUFFERED=1, EMPTY=]
)",
                                    &config)
                  .ok());
  const TrainerConfig& t = config.trainers[0];
  EXPECT_EQ(t.env_inherit, std::vector<std::string>{"WANDB_API_KEY"});
  ASSERT_EQ(t.env.size(), 2u);
  EXPECT_EQ(t.env[0], (std::pair<std::string, std::string>{"PYTHONUNBUFFERED", "1"}));
  EXPECT_EQ(t.env[1], (std::pair<std::string, std::string>{"EMPTY", ""}));
}

// ---- environment and spec.json ----

TEST(CommandTrainerTest, InheritsOnlyTheBaseSetAndTheNamedVariables) {
  const char* worker_env[] = {"PATH=/usr/bin:/bin",
                              "HOME=/home/lab",
                              "LC_ALL=C.UTF-8",
                              "CUDA_HOME=/usr/local/cuda",
                              "HSA_OVERRIDE_GFX_VERSION=11.0.0",
                              "ROCR_VISIBLE_DEVICES=0,1",
                              "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True",
                              "AWS_SECRET_ACCESS_KEY=do-not-pass",
                              "GITHUB_TOKEN=do-not-pass",
                              "XV_STATE_DIR=/var/lib/xv",
                              "WANDB_API_KEY=named",
                              "NOEQUALS",
                              nullptr};
  std::map<std::string, std::string> env;
  for (auto& [k, v] : InheritedCommandEnvironment(worker_env, {"WANDB_API_KEY", "NOT_SET"})) {
    env[k] = v;
  }
  EXPECT_EQ(env, (std::map<std::string, std::string>{
                     {"CUDA_HOME", "/usr/local/cuda"},
                     {"HOME", "/home/lab"},
                     {"HSA_OVERRIDE_GFX_VERSION", "11.0.0"},
                     {"LC_ALL", "C.UTF-8"},
                     {"PATH", "/usr/bin:/bin"},
                     {"PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True"},
                     {"ROCR_VISIBLE_DEVICES", "0,1"},
                     {"WANDB_API_KEY", "named"},
                 }));
}

TEST(CommandTrainerTest, EveryTopLevelKnobBecomesAnXvVariable) {
  json recipe = {{"matrix_lr", 0.04},
                 {"depth", 8},
                 {"adam_betas", {0.8, 0.95}},
                 {"value_embeddings", true},
                 {"window_pattern", "SSSL"},
                 {"softcap", 15.0},
                 {"derived", {{"model_dim", 512}}}};
  std::map<std::string, std::string> env;
  for (auto& [k, v] : RecipeKnobEnvironment(recipe)) env[k] = v;
  EXPECT_EQ(env.size(), 6u);
  EXPECT_EQ(env["XV_MATRIX_LR"], "0.04");
  EXPECT_EQ(env["XV_DEPTH"], "8");
  EXPECT_EQ(env["XV_ADAM_BETAS"], "0.8,0.95");
  EXPECT_EQ(env["XV_VALUE_EMBEDDINGS"], "true");
  EXPECT_EQ(env["XV_WINDOW_PATTERN"], "SSSL");
  EXPECT_EQ(env["XV_SOFTCAP"], "15.0");
  EXPECT_EQ(env.count("XV_DERIVED"), 0u);
}

class CommandTrainerRunTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("xv-command-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    inv_.trainer_bin = "/nonexistent/xv-train";
    inv_.data_dir = (dir_ / "data").string();
    inv_.device_flag = "cpu";
    inv_.visible_devices = "";
    inv_.work_dir = (dir_ / "work").string();
    inv_.kill_grace_s = 0.5;
    launcher_ = NewPosixProcessLauncher();
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // A command trainer `name` running the shell script `body`.
  void AddScript(const std::string& name, const std::string& body,
                 TrainerOutputFormat output = TrainerOutputFormat::kAuto) {
    const fs::path path = dir_ / (name + ".sh");
    std::ofstream(path) << "#!/usr/bin/env bash\n" << body;
    fs::permissions(path, fs::perms::owner_all);
    TrainerConfig t;
    t.name = name;
    t.kind = TrainerKind::kCommand;
    t.program = path.string();
    t.args = {"fixed-arg"};
    t.env.emplace_back("FROM_CONFIG", "yes");
    t.env.emplace_back("XV_MATRIX_LR", "overridden by the recipe");
    t.output = output;
    inv_.trainers.push_back(t);
  }

  v1::ExperimentSpec Spec(const std::string& trainer, double deadline_s = 30) {
    v1::ExperimentSpec s;
    s.set_experiment_id(7);
    s.set_attempt(2);
    s.set_trainer(trainer);
    s.set_recipe_json(R"({"depth": 4, "matrix_lr": 0.04, "adam_betas": [0.8, 0.95], "seed": 11,)"
                      R"( "window_pattern": "SL"})");
    s.set_recipe_hash("abc123");
    s.set_seed(11);
    s.set_time_budget_s(5);
    s.set_hard_deadline_s(deadline_s);
    s.set_campaign_id(3);
    s.set_round_id(9);
    return s;
  }

  v1::Finished Run(const v1::ExperimentSpec& spec) {
    AttemptRunner runner(inv_, launcher_.get());
    events_.clear();
    return runner.Run(spec, [&](const v1::TrainerEvent& ev) { events_.push_back(ev); });
  }

  std::vector<json> EventsOfType(const std::string& type) {
    std::vector<json> out;
    for (const auto& e : events_) {
      if (e.type() == type) out.push_back(json::parse(e.json()));
    }
    return out;
  }

  fs::path dir_;
  TrainerInvocation inv_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::vector<v1::TrainerEvent> events_;
};

TEST_F(CommandTrainerRunTest, RunsTheConfiguredProgramWithTheSpecAndXvVariables) {
  AddScript("noisy",
            "printf '%s\\n' \"$0\" \"$@\" > args.txt\n"
            "env | grep -E '^(XV_|FROM_CONFIG|CUDA_VISIBLE|HIP_VISIBLE)' | sort > env.txt\n"
            "exec " +
                SourcePath("tests/fixtures/noisy_trainer.sh") + "\n");
  v1::Finished fin = Run(Spec("noisy"));
  ASSERT_EQ(fin.state(), "succeeded") << fin.failure_detail() << "\n" << fin.stderr_tail();
  EXPECT_EQ(fin.exit_code(), 0);

  const fs::path spec_dir = dir_ / "work" / "exp-7-a2";
  // argv: the configured program and its fixed args, nothing else.
  EXPECT_EQ(ReadText(spec_dir / "args.txt"), (dir_ / "noisy.sh").string() + "\nfixed-arg\n");
  // Environment: config env, XV_<KNOB>, the spec variables, hidden GPUs on a CPU worker.
  std::map<std::string, std::string> env;
  std::istringstream lines(ReadText(spec_dir / "env.txt"));
  for (std::string line; std::getline(lines, line);) {
    env[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
  }
  EXPECT_EQ(env["FROM_CONFIG"], "yes");
  EXPECT_EQ(env["XV_MATRIX_LR"], "0.04");  // the recipe wins over the config env
  EXPECT_EQ(env["XV_DEPTH"], "4");
  EXPECT_EQ(env["XV_ADAM_BETAS"], "0.8,0.95");
  EXPECT_EQ(env["XV_WINDOW_PATTERN"], "SL");
  EXPECT_EQ(env["XV_SEED"], "11");
  EXPECT_EQ(env["XV_SPEC"], (spec_dir / "spec.json").string());
  EXPECT_EQ(env["XV_SPEC_DIR"], spec_dir.string());
  EXPECT_EQ(env["XV_EXPERIMENT_ID"], "7");
  EXPECT_EQ(env["XV_ATTEMPT"], "2");
  EXPECT_EQ(env["XV_DATA_DIR"], inv_.data_dir);
  EXPECT_EQ(env["XV_DEVICE"], "cpu");
  EXPECT_EQ(env["XV_TRAINER"], "noisy");
  EXPECT_EQ(env["XV_TIME_BUDGET_S"], "5.0");
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 1u);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "");
  EXPECT_EQ(env["HIP_VISIBLE_DEVICES"], "");

  json spec = json::parse(ReadText(spec_dir / "spec.json"));
  EXPECT_EQ(spec["experiment_id"], 7);
  EXPECT_EQ(spec["attempt"], 2);
  EXPECT_EQ(spec["trainer"], "noisy");
  EXPECT_EQ(spec["seed"], 11);
  EXPECT_EQ(spec["time_budget_s"], 5.0);
  EXPECT_EQ(spec["hard_deadline_s"], 30.0);
  EXPECT_EQ(spec["recipe_hash"], "abc123");
  EXPECT_EQ(spec["recipe"]["matrix_lr"], 0.04);
  EXPECT_EQ(spec["data_dir"], inv_.data_dir);
  EXPECT_EQ(spec["device"], "cpu");
  EXPECT_EQ(spec["campaign_id"], 3);
  EXPECT_EQ(spec["round_id"], 9);
  EXPECT_TRUE(fs::exists(spec_dir / "recipe.json"));

  // Upstream's output became xv events: '\r'-separated progress -> steps, the block -> summary.
  EXPECT_GE(EventsOfType("step").size(), 1u);
  std::vector<json> summaries = EventsOfType("summary");
  ASSERT_EQ(summaries.size(), 1u);
  const double val_bpb = summaries[0]["val_bpb"].get<double>();
  EXPECT_NEAR(val_bpb, 1.4, 0.06);  // 1 + 10 * 0.04 + 0.01 * N(0, 1)
  EXPECT_EQ(summaries[0]["num_steps"], 3);
  EXPECT_EQ(summaries[0]["depth"], 4);
  EXPECT_EQ(events_.back().type(), "summary");
  for (size_t i = 0; i < events_.size(); ++i) EXPECT_EQ(events_[i].seq(), int64_t(i) + 1);
  EXPECT_EQ(fin.last_seq(), static_cast<int64_t>(events_.size()));

  // Same resolved config, same noise; another seed, other noise.
  v1::Finished again = Run(Spec("noisy"));
  ASSERT_EQ(again.state(), "succeeded");
  EXPECT_EQ(EventsOfType("summary")[0]["val_bpb"].get<double>(), val_bpb);
  v1::ExperimentSpec reseeded = Spec("noisy");
  reseeded.set_recipe_json(R"({"depth": 4, "matrix_lr": 0.04, "seed": 12})");
  ASSERT_EQ(Run(reseeded).state(), "succeeded");
  EXPECT_NE(EventsOfType("summary")[0]["val_bpb"].get<double>(), val_bpb);
}

TEST_F(CommandTrainerRunTest, TheTrainerGetsACleanEnvironmentPlusWhatItsConfigNames) {
  // The worker's environment holds a credential the trainer must not see, and one its config names.
  ASSERT_EQ(::setenv("XV_TEST_CLOUD_TOKEN", "secret-not-for-trainers", 1), 0);
  ASSERT_EQ(::setenv("XV_TEST_NAMED_FOR_TRAINER", "passed-on", 1), 0);
  AddScript("clean",
            "env | sort > env.txt\nexec " + SourcePath("tests/fixtures/noisy_trainer.sh") + "\n");
  inv_.trainers.back().env_inherit = {"XV_TEST_NAMED_FOR_TRAINER"};
  v1::Finished fin = Run(Spec("clean"));
  ::unsetenv("XV_TEST_CLOUD_TOKEN");
  ::unsetenv("XV_TEST_NAMED_FOR_TRAINER");
  ASSERT_EQ(fin.state(), "succeeded") << fin.failure_detail() << "\n" << fin.stderr_tail();

  std::map<std::string, std::string> env;
  std::istringstream lines(ReadText(dir_ / "work" / "exp-7-a2" / "env.txt"));
  for (std::string line; std::getline(lines, line);) {
    env[line.substr(0, line.find('='))] = line.substr(line.find('=') + 1);
  }
  EXPECT_EQ(env.count("XV_TEST_CLOUD_TOKEN"), 0u) << "a variable not named reached the trainer";
  EXPECT_EQ(env["XV_TEST_NAMED_FOR_TRAINER"], "passed-on");
  EXPECT_EQ(env["FROM_CONFIG"], "yes");
  EXPECT_EQ(env["PATH"], getenv("PATH"));
  EXPECT_EQ(env["XV_EXPERIMENT_ID"], "7");
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 1u);
  // Nothing else of the worker's: every variable is of the base set, configured, or the worker's
  // own XV_* / device variables (bash adds PWD, SHLVL and _ itself).
  for (const auto& [name, value] : env) {
    const bool expected = IsBaseEnvironmentName(name) || name.rfind("XV_", 0) == 0 ||
                          name == "FROM_CONFIG" || name == "PWD" || name == "SHLVL" ||
                          name == "_" || name == "OLDPWD";
    EXPECT_TRUE(expected) << name << "=" << value << " reached the trainer";
  }
}

TEST_F(CommandTrainerRunTest, UpstreamFailExitOneIsDiverged) {
  AddScript("fork",
            "printf 'step 00000 (0.0%%) | loss: 9.000000 | lrm: 1.00 | dt: 5ms\\r'\n"
            "printf 'step 00001 (0.1%%) | loss: nan | lrm: 1.00 | dt: 5ms\\r'\n"
            "echo\necho FAIL\nexit 1\n",
            TrainerOutputFormat::kUpstream);
  v1::Finished fin = Run(Spec("fork"));
  EXPECT_EQ(fin.state(), "diverged");
  EXPECT_EQ(fin.failure_kind(), "diverged");
  EXPECT_EQ(fin.exit_code(), 1);
  EXPECT_NE(fin.failure_detail().find("non-finite loss (nan) at step 1"), std::string::npos)
      << fin.failure_detail();
  EXPECT_EQ(EventsOfType("nan").size(), 1u);
  EXPECT_EQ(EventsOfType("error").size(), 1u);
}

TEST_F(CommandTrainerRunTest, ExitZeroWithoutASummaryFailsAndXvEventsPassThrough) {
  AddScript("quiet", "echo '{\"type\":\"start\",\"t\":1}'\necho done\nexit 0\n");
  v1::Finished fin = Run(Spec("quiet"));
  EXPECT_EQ(fin.state(), "failed");
  EXPECT_EQ(fin.failure_kind(), "crashed");
  EXPECT_NE(fin.failure_detail().find("without a summary"), std::string::npos);
  ASSERT_EQ(events_.size(), 2u);
  EXPECT_EQ(events_[0].type(), "start");
  EXPECT_EQ(events_[0].json(), "{\"type\":\"start\",\"t\":1}");
  EXPECT_EQ(events_[1].type(), "log");
}

TEST_F(CommandTrainerRunTest, AnUnconfiguredTrainerNameFailsBeforeAnythingStarts) {
  AddScript("noisy", "exit 0\n");
  v1::Finished fin = Run(Spec("rm -rf /"));
  EXPECT_EQ(fin.state(), "failed");
  EXPECT_NE(fin.failure_detail().find("trainer 'rm -rf /' is not configured on this worker "
                                      "(configured: noisy)"),
            std::string::npos)
      << fin.failure_detail();
  EXPECT_TRUE(events_.empty());
  // libtorch is not offered when the config does not list it.
  EXPECT_NE(Run(Spec("")).failure_detail().find("trainer '' is not configured"), std::string::npos);
}

TEST_F(CommandTrainerRunTest, TheHardDeadlineKillsACommandTrainer) {
  AddScript("slow", "echo 'step 00000 (0.0%) | loss: 9.0'\nsleep 30\n");
  v1::Finished fin = Run(Spec("slow", /*deadline_s=*/0.5));
  EXPECT_EQ(fin.state(), "timed_out");
  EXPECT_EQ(fin.failure_kind(), "timed_out");
  EXPECT_LT(fin.wall_seconds(), 10);
}

}  // namespace
}  // namespace xv::worker
