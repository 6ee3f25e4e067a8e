// An autoresearch fork's constants: found at the top level only, rewritten from a resolved recipe
// (comments, annotations and the rest of the file untouched), a knob without its constant refused
// by name unless it keeps its default, and the `autoresearch` trainer kind of the worker config.
#include "worker/autoresearch_source.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "common/recipe.h"
#include "common/sha256.h"
#include "worker/autoresearch_trainer.h"
#include "worker/trainer_config.h"
#include "worker/trainer_sandbox.h"

namespace xv::worker {
namespace {

using nlohmann::json;

const char* const kFork = R"(""" A fork.
DEPTH = 99 inside the docstring is not a constant
"""
import os
from prepare import MAX_SEQ_LEN, TIME_BUDGET

DEPTH = 8                # layers
ASPECT_RATIO = 64
MATRIX_LR = 0.04  # "quoted # hash" stays a comment
WINDOW_PATTERN = "SSSL"  # nominal
ADAM_BETAS: tuple = (0.8, 0.95)
TOTAL_BATCH_SIZE = 2**19
EMBEDDING_LR = 0.6
if DEPTH == 8:
    MATRIX_LR = 1.0
HEAD_DIM = {"a": [1,
   2]}["a"][0]
NAME_WITH_HASH = "a#b"
)";

std::set<std::string> Names(const std::vector<SourceConstant>& found) {
  std::set<std::string> names;
  for (const auto& c : found) names.insert(c.name);
  return names;
}

json Defaults() { return RecipeToJson(Recipe{}); }

TEST(AutoresearchSource, FindsTopLevelConstantsOnly) {
  const std::vector<SourceConstant> found = FindTopLevelConstants(kFork);
  EXPECT_EQ(Names(found), (std::set<std::string>{"DEPTH", "ASPECT_RATIO", "MATRIX_LR",
                                                 "WINDOW_PATTERN", "ADAM_BETAS", "TOTAL_BATCH_SIZE",
                                                 "EMBEDDING_LR", "HEAD_DIM", "NAME_WITH_HASH"}));
  const std::string source = kFork;
  for (const auto& c : found) {
    const std::string value = source.substr(c.value_begin, c.value_end - c.value_begin);
    if (c.name == "DEPTH") {
      EXPECT_EQ(value, "8");
      EXPECT_EQ(c.line, 7u);
    }
    if (c.name == "MATRIX_LR") EXPECT_EQ(value, "0.04");
    if (c.name == "WINDOW_PATTERN") EXPECT_EQ(value, "\"SSSL\"");
    if (c.name == "ADAM_BETAS") EXPECT_EQ(value, "(0.8, 0.95)");
    if (c.name == "NAME_WITH_HASH") EXPECT_EQ(value, "\"a#b\"");
    EXPECT_EQ(c.multi_line, c.name == "HEAD_DIM") << c.name;
  }
}

TEST(AutoresearchSource, PythonLiterals) {
  EXPECT_EQ(PythonLiteral(json(0.02)), "0.02");
  EXPECT_EQ(PythonLiteral(json(8)), "8");
  EXPECT_EQ(PythonLiteral(json("L")), "\"L\"");
  EXPECT_EQ(PythonLiteral(json(true)), "True");
  EXPECT_EQ(PythonLiteral(json::array({0.9, 0.99})), "(0.9, 0.99)");
  EXPECT_EQ(PythonLiteral(json::array({1})), "(1,)");
}

TEST(AutoresearchSource, RewritesConstantsFromTheRecipe) {
  Recipe r;
  r.matrix_lr = 0.02;
  r.window_pattern = "L";
  r.adam_betas = {0.9, 0.99};
  r.depth = 4;
  r.total_batch_size = 65536;
  // head_dim keeps its default: its multi-line constant is not touched.
  const std::string no_head_dim =
      std::string(kFork).substr(0, std::string(kFork).find("HEAD_DIM = {"));
  RewrittenSource out;
  Status st =
      RewriteSourceConstants(no_head_dim, "/forks/train.py", RecipeToJson(r), Defaults(), &out);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_NE(out.text.find("DEPTH = 4                # layers\n"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("MATRIX_LR = 0.02  # \"quoted # hash\" stays a comment\n"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("WINDOW_PATTERN = \"L\"  # nominal\n"), std::string::npos);
  EXPECT_NE(out.text.find("ADAM_BETAS: tuple = (0.9, 0.99)\n"), std::string::npos);
  EXPECT_NE(out.text.find("TOTAL_BATCH_SIZE = 65536\n"), std::string::npos);
  // Indented code and the docstring are left alone.
  EXPECT_NE(out.text.find("    MATRIX_LR = 1.0\n"), std::string::npos);
  EXPECT_NE(out.text.find("DEPTH = 99 inside the docstring"), std::string::npos);
  EXPECT_EQ(out.sha256, Sha256Hex(out.text));
  bool saw = false;
  for (const auto& [name, literal] : out.assigned) {
    if (name == "MATRIX_LR") {
      EXPECT_EQ(literal, "0.02");
      saw = true;
    }
  }
  EXPECT_TRUE(saw);
  // The same recipe gives the same file; another gives another hash.
  RewrittenSource again, other;
  ASSERT_TRUE(
      RewriteSourceConstants(no_head_dim, "/forks/train.py", RecipeToJson(r), Defaults(), &again)
          .ok());
  EXPECT_EQ(again.sha256, out.sha256);
  r.matrix_lr = 0.03;
  ASSERT_TRUE(
      RewriteSourceConstants(no_head_dim, "/forks/train.py", RecipeToJson(r), Defaults(), &other)
          .ok());
  EXPECT_NE(other.sha256, out.sha256);
}

TEST(AutoresearchSource, RefusesAKnobWithoutItsConstantNamingKnobAndFile) {
  Recipe r;
  r.softcap = 30;  // upstream hard-codes 15; the fork has no SOFTCAP
  RewrittenSource out;
  Status st =
      RewriteSourceConstants("DEPTH = 8\n", "/forks/train.py", RecipeToJson(r), Defaults(), &out);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("softcap"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("SOFTCAP"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("/forks/train.py"), std::string::npos) << st.message();
  // Defaults, prepare-supplied and worker knobs need no constant.
  Recipe d;
  d.sequence_len = 256;
  d.time_budget_s = 8;
  d.eval_tokens = 4096;
  d.seed = 7;
  d.device = "cpu";
  d.threads = 1;
  EXPECT_TRUE(
      RewriteSourceConstants("DEPTH = 8\n", "/forks/train.py", RecipeToJson(d), Defaults(), &out)
          .ok());
  EXPECT_EQ(out.text, "DEPTH = 8\n");
}

// A fork's own MAX_SEQ_LEN is its training length: train_sequence_len, or sequence_len when that
// is 0 (never the literal 0); its own EVAL_SEQ_LEN is the campaign's sequence_len.
TEST(AutoresearchSource, MaxSeqLenIsTheTrainingLengthAndEvalSeqLenTheEvaluations) {
  const std::string fork = "MAX_SEQ_LEN = 2048\nEVAL_SEQ_LEN = 2048\nDEPTH = 8\n";
  Recipe r;
  r.sequence_len = 256;  // (the rewrite does not validate the recipe's other sizes)
  RewrittenSource same;
  ASSERT_TRUE(RewriteSourceConstants(fork, "train.py", RecipeToJson(r), Defaults(), &same).ok());
  EXPECT_EQ(same.text, "MAX_SEQ_LEN = 256\nEVAL_SEQ_LEN = 256\nDEPTH = 8\n");
  r.train_sequence_len = 64;
  RewrittenSource shorter;
  ASSERT_TRUE(RewriteSourceConstants(fork, "train.py", RecipeToJson(r), Defaults(), &shorter).ok());
  EXPECT_EQ(shorter.text, "MAX_SEQ_LEN = 64\nEVAL_SEQ_LEN = 256\nDEPTH = 8\n");
  EXPECT_NE(shorter.sha256, same.sha256);
  // A fork without either constant takes both from prepare: nothing to refuse.
  RewrittenSource plain;
  EXPECT_TRUE(
      RewriteSourceConstants("DEPTH = 8\n", "train.py", RecipeToJson(r), Defaults(), &plain).ok());
}

TEST(AutoresearchSource, RefusesAMultiLineConstantItMustRewrite) {
  Recipe r;
  r.adam_betas = {0.9, 0.99};
  RewrittenSource out;
  Status st = RewriteSourceConstants("ADAM_BETAS = (0.8,\n              0.95)\n", "train.py",
                                     RecipeToJson(r), Defaults(), &out);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("line 1"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("ADAM_BETAS"), std::string::npos) << st.message();
}

TEST(AutoresearchSource, KnobMapCoversEveryKnobWithUpstreamNames) {
  std::set<std::string> knobs;
  for (const KnobConstant& k : AutoresearchKnobMap()) {
    knobs.insert(k.knob);
    // Upstream trains at and builds its model for MAX_SEQ_LEN; prepare evaluates at EVAL_SEQ_LEN.
    if (k.knob == "train_sequence_len") EXPECT_EQ(k.constant, "MAX_SEQ_LEN");
    if (k.knob == "sequence_len") EXPECT_EQ(k.constant, "EVAL_SEQ_LEN");
    if (k.knob == "time_budget_s") EXPECT_EQ(k.constant, "TIME_BUDGET");
    if (k.knob == "matrix_lr") EXPECT_EQ(k.constant, "MATRIX_LR");
    if (k.knob == "window_pattern") EXPECT_EQ(k.constant, "WINDOW_PATTERN");
    if (k.knob == "adam_betas") EXPECT_EQ(k.constant, "ADAM_BETAS");
    if (k.knob == "depth") EXPECT_EQ(k.constant, "DEPTH");
  }
  for (const std::string& name : RecipeKnobNames()) EXPECT_EQ(knobs.count(name), 1u) << name;
}

// docs/autoresearch.md's table is the map: one row per knob with its constant.
TEST(AutoresearchSource, DocsTableListsEveryKnobWithItsConstant) {
  const char* src = std::getenv("XV_SOURCE_DIR");
  ASSERT_NE(src, nullptr) << "XV_SOURCE_DIR not set (run through ctest)";
  std::ifstream f(std::string(src) + "/docs/autoresearch.md");
  std::stringstream text;
  text << f.rdbuf();
  ASSERT_FALSE(text.str().empty());
  for (const KnobConstant& k : AutoresearchKnobMap()) {
    const std::string row =
        "| `" + k.knob + "` | " + (k.constant.empty() ? "" : "`" + k.constant + "` ") + "|";
    EXPECT_NE(text.str().find(row), std::string::npos) << row;
  }
}

TEST(AutoresearchConfig, ParsesTheKindWithItsSource) {
  WorkerConfig c;
  Status st = ParseWorkerConfigYaml(
      "trainers:\n  - name: fork\n    kind: autoresearch\n    source: /forks/train.py\n", &c);
  ASSERT_TRUE(st.ok()) << st.message();
  ASSERT_EQ(c.trainers.size(), 1u);
  EXPECT_EQ(c.trainers[0].kind, TrainerKind::kAutoresearch);
  EXPECT_EQ(c.trainers[0].program, "/usr/bin/python3");
  EXPECT_EQ(c.trainers[0].source, "/forks/train.py");
  EXPECT_TRUE(IsCommandLike(c.trainers[0].kind));
  const std::pair<const char*, const char*> bad[] = {
      {"trainers:\n  - name: f\n    kind: autoresearch\n", "trainers[0].source: required"},
      {"trainers:\n  - name: f\n    kind: autoresearch\n    source: train.py\n",
       "trainers[0].source: must be an absolute path"},
      {"trainers:\n  - name: f\n    kind: command\n    program: /bin/true\n    source: /a.py\n",
       "trainers[0].source: only autoresearch trainers"},
      {"trainers:\n  - name: f\n    kind: autoresearch\n    source: /a.py\n    prepare: p\n",
       "trainers[0].prepare: must be an absolute path"},
  };
  for (const auto& [yaml, want] : bad) {
    WorkerConfig w;
    Status s = ParseWorkerConfigYaml(yaml, &w);
    ASSERT_FALSE(s.ok()) << yaml;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  }
}

// A fork in a fresh temporary folder `dir` (train.py with two constants, a prepare folder, an
// empty attempt folder) and its autoresearch trainer config running /usr/bin/python3.
TrainerConfig ForkInTemporaryFolder(const std::string& tag, std::filesystem::path* dir_out) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / (tag + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "attempt");
  fs::create_directories(dir / "prepare");
  std::ofstream(dir / "prepare" / "prepare.py") << "MAX_SEQ_LEN = 1\n";
  std::ofstream(dir / "train.py") << "MATRIX_LR = 0.04\nDEPTH = 8\n";
  TrainerConfig t;
  t.name = "fork";
  t.kind = TrainerKind::kAutoresearch;
  t.program = "/usr/bin/python3";
  t.source = (dir / "train.py").string();
  t.prepare_dir = (dir / "prepare").string();
  *dir_out = dir;
  return t;
}

// The launch: the copy in the attempt directory with the override, run as `program COPY args`,
// the prepare folder first on PYTHONPATH (before a configured one), the copy's hash exported.
TEST(AutoresearchTrainer, LaunchesTheRewrittenCopyWithPrepareFirstOnPythonPath) {
  namespace fs = std::filesystem;
  fs::path dir;
  TrainerConfig t = ForkInTemporaryFolder("xv_ar_launch_", &dir);
  t.args = {"--flag"};
  t.env = {{"PYTHONPATH", "/opt/extra"}};
  Recipe r;
  r.matrix_lr = 0.02;
  r.threads = 2;
  v1::ExperimentSpec spec;
  spec.set_experiment_id(7);
  spec.set_attempt(1);
  spec.set_recipe_json(RecipeToJson(r).dump());
  ChildSpec child;
  AutoresearchAttempt a;
  Status st = PrepareAutoresearchTrainer(t, spec, {"/data", "cpu", ""}, (dir / "attempt").string(),
                                         &child, &a);
  ASSERT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(child.argv,
            (std::vector<std::string>{"/usr/bin/python3", (dir / "attempt" / "train.py").string(),
                                      "--flag"}));
  std::map<std::string, std::string> env;
  for (const auto& [k, v] : child.env_overrides) env[k] = v;  // later entries win
  EXPECT_EQ(env["PYTHONPATH"], (dir / "prepare").string() + ":/opt/extra");
  EXPECT_EQ(env["XV_SOURCE_SHA256"], a.rewritten.sha256);
  EXPECT_EQ(env["OMP_NUM_THREADS"], "2");
  EXPECT_EQ(env["XV_DATA_DIR"], "/data");
  std::ifstream copy(dir / "attempt" / "train.py");
  std::stringstream text;
  text << copy.rdbuf();
  EXPECT_EQ(text.str(), "MATRIX_LR = 0.02\nDEPTH = 8\n");
  EXPECT_EQ(Sha256Hex(text.str()), a.rewritten.sha256);
  const nlohmann::json ev = SourceEvent(a, "fork", 1.5);
  EXPECT_EQ(ev["type"], "source");
  EXPECT_EQ(ev["sha256"], a.rewritten.sha256);
  EXPECT_EQ(ev["constants"]["MATRIX_LR"], "0.02");
  EXPECT_EQ(ev["metric_version"], kPrepareModuleMetricVersion);
  // No prepare.py where the config points: refused before start, naming the folder.
  t.prepare_dir = (dir / "attempt").string();
  st = PrepareAutoresearchTrainer(t, spec, {"/data", "cpu", ""}, (dir / "attempt").string(), &child,
                                  &a);
  EXPECT_EQ(st.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(st.message().find((dir / "attempt").string()), std::string::npos) << st.message();
  fs::remove_all(dir);
}

TEST(TrainerSandbox, BubblewrapHidesAllButTheSystemTheDataAndTheAttemptDir) {
  SandboxMounts m;
  m.attempt_dir = "/work/w/exp-1-a1";
  m.data_dir = "/data/xv";
  m.read_only = {"/opt/xv/python"};
  const std::vector<std::string> a = BubblewrapArguments(m, {"/dev/nvidia0", "/dev/nvidiactl"});
  auto has = [&](const std::vector<std::string>& seq) {
    return std::search(a.begin(), a.end(), seq.begin(), seq.end()) != a.end();
  };
  EXPECT_EQ(a.front(), kBubblewrapPath);
  EXPECT_EQ(a.back(), "--");
  EXPECT_TRUE(has({"--unshare-net"}));
  EXPECT_TRUE(has({"--die-with-parent"}));
  EXPECT_TRUE(has({"--ro-bind", "/usr", "/usr"}));
  EXPECT_TRUE(has({"--ro-bind", "/data/xv", "/data/xv"}));
  EXPECT_TRUE(has({"--ro-bind", "/opt/xv/python", "/opt/xv/python"}));
  EXPECT_TRUE(has({"--bind", "/work/w/exp-1-a1", "/work/w/exp-1-a1"}));
  EXPECT_TRUE(has({"--dev-bind", "/dev/nvidia0", "/dev/nvidia0"}));
  EXPECT_TRUE(has({"--tmpfs", "/tmp"}));
  // The only writable bind is the attempt directory; / itself is never bound.
  int writable = 0;
  for (size_t i = 0; i + 1 < a.size(); ++i) {
    writable += a[i] == "--bind";
    EXPECT_FALSE((a[i] == "--ro-bind" || a[i] == "--bind") && a[i + 1] == "/") << i;
  }
  EXPECT_EQ(writable, 1);

  ChildSpec child;
  child.argv = {"/usr/bin/python3", "train.py"};
  m.data_dir = "data";
  EXPECT_FALSE(SandboxedChild(m, &child).ok());  // a relative mount is refused
}

// With GPU nodes the sandbox passes them through and shows /sys read-only (the GPU runtimes read
// the PCI topology there); a CPU attempt gets neither.
TEST(TrainerSandbox, GpuNodesComeWithSysReadOnlyAndCpuAttemptsGetNeither) {
  SandboxMounts m;
  m.attempt_dir = "/work/w/exp-1-a1";
  m.data_dir = "/data/xv";
  auto has = [](const std::vector<std::string>& a, const std::vector<std::string>& seq) {
    return std::search(a.begin(), a.end(), seq.begin(), seq.end()) != a.end();
  };
  const std::vector<std::string> gpu = BubblewrapArguments(
      m, {"/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia-caps", "/dev/nvidiactl"});
  for (const char* node :
       {"/dev/nvidia-uvm", "/dev/nvidia0", "/dev/nvidia-caps", "/dev/nvidiactl"}) {
    EXPECT_TRUE(has(gpu, {"--dev-bind", node, node})) << node;
  }
  EXPECT_TRUE(has(gpu, {"--ro-bind", "/sys", "/sys"}));
  EXPECT_FALSE(has(gpu, {"--bind", "/sys", "/sys"}));
  const std::vector<std::string> cpu = BubblewrapArguments(m, {});
  EXPECT_FALSE(has(cpu, {"/sys"}));
  EXPECT_EQ(std::count(cpu.begin(), cpu.end(), "--dev-bind"), 0);
}

// A trainer program in a Python virtual environment outside /usr (the GPU machine's python is
// /opt/torch/.venv/bin/python3): the whole environment and its base interpreter's prefix are
// readable in the sandbox, not only the bin folder; a system program needs nothing more.
TEST(TrainerSandbox, ProgramInAVenvBindsTheVenvAndItsBaseInterpreter) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("xv_sandbox_venv_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir / "venv" / "bin");
  fs::create_directories(dir / "base" / "bin");
  fs::create_directories(dir / "tools");
  std::ofstream(dir / "base" / "bin" / "python3.12") << "#!/bin/sh\n";
  fs::create_symlink(dir / "base" / "bin" / "python3.12", dir / "venv" / "bin" / "python3");
  std::ofstream(dir / "venv" / "pyvenv.cfg")
      << "home = " << (dir / "base" / "bin").string() << "\ninclude-system-site-packages = false\n";
  std::ofstream(dir / "tools" / "run.sh") << "#!/bin/sh\n";

  EXPECT_EQ(ProgramReadOnlyFolders((dir / "venv" / "bin" / "python3").string()),
            (std::vector<std::string>{(dir / "venv").string(), (dir / "base").string()}));
  EXPECT_EQ(ProgramReadOnlyFolders((dir / "tools" / "run.sh").string()),
            (std::vector<std::string>{(dir / "tools").string()}));
  EXPECT_TRUE(ProgramReadOnlyFolders("/usr/bin/python3").empty());
  EXPECT_TRUE(ProgramReadOnlyFolders("/python3").empty());  // never the whole root
  // A venv whose base interpreter is the system's: only the venv.
  std::ofstream(dir / "venv" / "pyvenv.cfg") << "home = /usr/bin\n";
  fs::remove(dir / "venv" / "bin" / "python3");
  fs::create_symlink("/usr/bin/python3", dir / "venv" / "bin" / "python3");
  EXPECT_EQ(ProgramReadOnlyFolders((dir / "venv" / "bin" / "python3").string()),
            (std::vector<std::string>{(dir / "venv").string()}));
  fs::remove_all(dir);
}

TEST(TrainerSandbox, DenialsAreFoundInTheStderrTail) {
  EXPECT_EQ(SandboxDenial("Traceback\nOSError: [Errno 30] Read-only file system: '/d/x'\n"),
            "OSError: [Errno 30] Read-only file system: '/d/x'");
  EXPECT_NE(SandboxDenial("ConnectionRefusedError: [Errno 111] Connection refused"), "");
  EXPECT_NE(SandboxDenial("FileNotFoundError: [Errno 2] No such file or directory: '/s/xv.db'"),
            "");
  EXPECT_EQ(SandboxDenial("RuntimeError: CUDA out of memory\n"), "");
}

TEST(TrainerSandbox, ConfigTakesSandboxForCommandLikeTrainersOnly) {
  WorkerConfig c;
  ASSERT_TRUE(ParseWorkerConfigYaml("trainers:\n  - name: f\n    kind: autoresearch\n"
                                    "    source: /a.py\n    sandbox: bubblewrap\n",
                                    &c)
                  .ok());
  EXPECT_TRUE(c.trainers[0].sandbox);
  Status s = ParseWorkerConfigYaml(
      "trainers:\n  - name: f\n    kind: command\n    program: /bin/true\n    sandbox: docker\n",
      &c);
  EXPECT_NE(s.message().find("trainers[0].sandbox: must be none or bubblewrap"), std::string::npos)
      << s.message();
  s = ParseWorkerConfigYaml("trainers:\n  - name: l\n    kind: libtorch\n    sandbox: bubblewrap\n",
                            &c);
  EXPECT_NE(s.message().find("trainers[0].sandbox: only command and autoresearch"),
            std::string::npos)
      << s.message();
}

// Code candidates (issue 16): allow_code_candidates only for a sandboxed autoresearch trainer.
TEST(CodeCandidates, ConfigAllowsThemForSandboxedAutoresearchTrainersOnly) {
  WorkerConfig c;
  ASSERT_TRUE(ParseWorkerConfigYaml("trainers:\n  - name: f\n    kind: autoresearch\n"
                                    "    source: /a.py\n    sandbox: bubblewrap\n"
                                    "    allow_code_candidates: true\n",
                                    &c)
                  .ok());
  EXPECT_TRUE(c.trainers[0].allow_code_candidates);
  ASSERT_TRUE(ParseWorkerConfigYaml(
                  "trainers:\n  - name: f\n    kind: autoresearch\n    source: /a.py\n", &c)
                  .ok());
  EXPECT_FALSE(c.trainers[0].allow_code_candidates);  // the default
  Status s = ParseWorkerConfigYaml(
      "trainers:\n  - name: f\n    kind: autoresearch\n    source: /a.py\n"
      "    allow_code_candidates: true\n",
      &c);
  EXPECT_NE(s.message().find("trainers[0].allow_code_candidates: code candidates run only "
                             "sandboxed"),
            std::string::npos)
      << s.message();
  s = ParseWorkerConfigYaml(
      "trainers:\n  - name: f\n    kind: command\n    program: /bin/true\n"
      "    sandbox: bubblewrap\n    allow_code_candidates: true\n",
      &c);
  EXPECT_NE(s.message().find("only autoresearch trainers run code candidates"), std::string::npos)
      << s.message();
  s = ParseWorkerConfigYaml(
      "trainers:\n  - name: f\n    kind: autoresearch\n    source: /a.py\n"
      "    sandbox: bubblewrap\n    allow_code_candidates: yes please\n",
      &c);
  EXPECT_NE(s.message().find("must be true or false"), std::string::npos) << s.message();
}

// A code candidate's text replaces the configured file (its constants rewritten the same way);
// its hash is checked, and a trainer that does not allow code candidates refuses it.
TEST(CodeCandidates, TheSpecsTextRunsInsteadOfTheConfiguredFile) {
  namespace fs = std::filesystem;
  fs::path dir;
  TrainerConfig t = ForkInTemporaryFolder("xv_ar_code_", &dir);
  t.sandbox = true;
  t.allow_code_candidates = true;
  Recipe r;
  r.matrix_lr = 0.02;
  v1::ExperimentSpec spec;
  spec.set_experiment_id(8);
  spec.set_attempt(1);
  spec.set_recipe_json(RecipeToJson(r).dump());
  const std::string candidate = "MATRIX_LR = 0.04\nDEPTH = 8\nEXTRA = 1  # the agent's edit\n";
  spec.set_source_text(candidate);
  spec.set_source_sha256(Sha256Hex(candidate));
  ChildSpec child;
  AutoresearchAttempt a;
  Status st = PrepareAutoresearchTrainer(t, spec, {"/data", "cpu", ""}, (dir / "attempt").string(),
                                         &child, &a);
  ASSERT_TRUE(st.ok()) << st.message();
  std::ifstream copy(dir / "attempt" / "train.py");
  std::stringstream text;
  text << copy.rdbuf();
  EXPECT_EQ(text.str(), "MATRIX_LR = 0.02\nDEPTH = 8\nEXTRA = 1  # the agent's edit\n");
  EXPECT_EQ(a.candidate_sha256, Sha256Hex(candidate));
  EXPECT_EQ(SourceEvent(a, "fork", 1.0)["candidate_sha256"], Sha256Hex(candidate));
  // A text that is not the one hashed, and a trainer that does not allow code candidates.
  spec.set_source_sha256(Sha256Hex("other"));
  st = PrepareAutoresearchTrainer(t, spec, {"/data", "cpu", ""}, (dir / "attempt").string(), &child,
                                  &a);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("source_sha256"), std::string::npos) << st.message();
  spec.set_source_sha256(Sha256Hex(candidate));
  t.allow_code_candidates = false;
  st = PrepareAutoresearchTrainer(t, spec, {"/data", "cpu", ""}, (dir / "attempt").string(), &child,
                                  &a);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("does not run code candidates"), std::string::npos) << st.message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace xv::worker
