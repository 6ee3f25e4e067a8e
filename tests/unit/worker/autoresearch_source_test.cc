// An autoresearch fork's constants: found at the top level only, rewritten from a resolved recipe
// (comments, annotations and the rest of the file untouched), a knob without its constant refused
// by name unless it keeps its default, and the `autoresearch` trainer kind of the worker config.
#include "worker/autoresearch_source.h"

#include <gtest/gtest.h>

#include <set>

#include "common/recipe.h"
#include "common/sha256.h"
#include "worker/trainer_config.h"

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
    if (k.knob == "sequence_len") EXPECT_EQ(k.constant, "MAX_SEQ_LEN");
    if (k.knob == "time_budget_s") EXPECT_EQ(k.constant, "TIME_BUDGET");
    if (k.knob == "matrix_lr") EXPECT_EQ(k.constant, "MATRIX_LR");
    if (k.knob == "window_pattern") EXPECT_EQ(k.constant, "WINDOW_PATTERN");
    if (k.knob == "adam_betas") EXPECT_EQ(k.constant, "ADAM_BETAS");
    if (k.knob == "depth") EXPECT_EQ(k.constant, "DEPTH");
  }
  for (const std::string& name : RecipeKnobNames()) EXPECT_EQ(knobs.count(name), 1u) << name;
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

}  // namespace
}  // namespace xv::worker
