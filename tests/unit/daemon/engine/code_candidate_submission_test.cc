// Code candidates at submit (issue 16), over a real SQLite store without gRPC: whole-file and
// patch candidates (daemon/engine/submission_builder.h RoundSources), their identity, the sources
// table (daemon/store/source_table.h), the spec a worker gets and dispatch matching
// (daemon/sched/placement.h).
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "common/sha256.h"
#include "daemon/engine/submission_builder.h"
#include "daemon/sched/placement.h"
#include "daemon/store/store.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"

namespace xv::daemon {
namespace {

constexpr const char* kRecipe =
    "depth: 2\naspect_ratio: 32\nhead_dim: 32\nwindow_pattern: SL\nvocab_size: 512\n"
    "sequence_len: 64\ndevice_batch_size: 4\ntotal_batch_size: 512\ntime_budget_s: 2\n"
    "eval_tokens: 2048\ndevice: cpu\n";
constexpr const char* kBase = "import torch\nMATRIX_LR = 0.04\nLR_SCALE = 1.0\nprint('ok')\n";
constexpr const char* kEdited = "import torch\nMATRIX_LR = 0.04\nLR_SCALE = 2.0\nprint('ok')\n";
constexpr const char* kPatch =
    "--- a/train.py\n+++ b/train.py\n@@ -2,2 +2,2 @@\n MATRIX_LR = 0.04\n-LR_SCALE = 1.0\n"
    "+LR_SCALE = 2.0\n";

class CodeCandidateSubmissionTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(store::Store::Open(dir_.file("xv.db"), &store_).ok()); }

  xv::v1::SubmitRequest Request(const std::string& trainer = "fork") {
    xv::v1::SubmitRequest req;
    req.set_recipe_yaml(kRecipe);
    req.set_campaign("code");
    req.set_trainer(trainer);
    return req;
  }

  Status Build(const xv::v1::SubmitRequest& req, store::NewSubmission* sub) {
    return BuildCampaignRound(store_.get(), req, SubmissionLimits(), CampaignRoundOptions{}, sub);
  }

  store::testing::TempDir dir_;
  std::unique_ptr<store::Store> store_;
};

TEST_F(CodeCandidateSubmissionTest, WholeFileCandidatesAreOneConfigPerText) {
  xv::v1::SubmitRequest req = Request();
  req.add_candidates()->set_source(kEdited);
  req.add_candidates()->add_overrides()->set_key("matrix_lr");
  req.mutable_candidates(1)->mutable_overrides(0)->set_value("0.02");
  store::NewSubmission sub;
  Status s = Build(req, &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sub.experiments.size(), 2u);
  const store::NewExperiment& code = sub.experiments[0];
  const std::string sha = Sha256Hex(kEdited);
  EXPECT_EQ(code.source_sha256, sha);
  EXPECT_EQ(code.name, "source:" + sha.substr(0, 12));
  EXPECT_EQ(sub.sources.size(), 1u);
  EXPECT_EQ(sub.sources.at(sha), kEdited);
  EXPECT_TRUE(sub.experiments[1].source_sha256.empty());
  // The source is part of the identity: the same recipe without it is another config.
  EXPECT_NE(code.config_hash, sub.base_config_hash);
  EXPECT_EQ(code.config_hash, CodeIdentityHash(sub.base_config_hash, sha));

  // Stored: one sources row, named by the recipe row; a second submission of the same text is the
  // same recipe row and config, the sources row shared.
  store::SubmissionIds first, second;
  ASSERT_TRUE(store_->submissions().InsertSubmission(sub, &first).ok());
  store::NewSubmission again;
  xv::v1::SubmitRequest one = Request();
  one.add_candidates()->set_source(kEdited);
  ASSERT_TRUE(Build(one, &again).ok());
  EXPECT_EQ(again.experiments[0].recipe_hash, code.recipe_hash);
  ASSERT_TRUE(store_->submissions().InsertSubmission(again, &second).ok());
  xv::v1::Experiment a, b;
  ASSERT_TRUE(store_->experiments().GetExperiment(first.experiment_ids[0], &a).ok());
  ASSERT_TRUE(store_->experiments().GetExperiment(second.experiment_ids[0], &b).ok());
  EXPECT_EQ(a.source_sha256(), sha);
  EXPECT_EQ(a.source_bytes(), static_cast<int64_t>(std::string(kEdited).size()));
  EXPECT_EQ(a.recipe_hash(), b.recipe_hash());
  EXPECT_EQ(a.config_hash(), b.config_hash());
  store::StoredSource stored;
  bool found = false;
  ASSERT_TRUE(store_->sources().FindSource(sha, &found, &stored).ok());
  ASSERT_TRUE(found);
  EXPECT_EQ(stored.text, kEdited);

  // The queue marks it a code candidate; its spec carries the text.
  std::vector<store::QueuedExperiment> queued;
  ASSERT_TRUE(store_->experiments().ListQueued(&queued).ok());
  ASSERT_GE(queued.size(), 2u);
  for (const auto& q : queued) {
    EXPECT_EQ(q.code_candidate, q.id != first.experiment_ids[1]) << q.id;
  }
  xv::v1::Register reg;
  reg.set_worker_name("w");
  int64_t worker_id = 0;
  ASSERT_TRUE(store_->workers().UpsertWorker(reg, &worker_id).ok());
  xv::v1::ExperimentSpec spec;
  ASSERT_TRUE(store_->attempts().AssignExperiment(first.experiment_ids[0], worker_id, &spec).ok());
  EXPECT_EQ(spec.source_sha256(), sha);
  EXPECT_EQ(spec.source_text(), kEdited);
  ASSERT_TRUE(store_->attempts().AssignExperiment(first.experiment_ids[1], worker_id, &spec).ok());
  EXPECT_TRUE(spec.source_text().empty());
}

TEST_F(CodeCandidateSubmissionTest, DuplicatesNoOpsAndMisuseAreRefusedNamingTheCandidate) {
  xv::v1::SubmitRequest twice = Request();
  twice.add_candidates()->set_source(kEdited);
  twice.add_candidates()->set_source(kEdited);
  store::NewSubmission sub;
  Status s = Build(twice, &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("candidate 2 (source): same resolved config as candidate 1"),
            std::string::npos)
      << s.message();

  xv::v1::SubmitRequest both = Request();
  both.add_candidates()->set_source(kEdited);
  both.mutable_candidates(0)->set_patch(kPatch);
  s = Build(both, &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("source and patch: give one"), std::string::npos) << s.message();

  xv::v1::SubmitRequest libtorch = Request("libtorch");
  libtorch.add_candidates()->set_source(kEdited);
  s = Build(libtorch, &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("trainer libtorch runs xv-train"), std::string::npos) << s.message();

  xv::v1::SubmitRequest binary = Request();
  binary.add_candidates()->set_source(std::string("x = 1\n\0", 7));
  s = Build(binary, &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("candidate 1 (source): source: holds a NUL byte"), std::string::npos)
      << s.message();

  xv::v1::SubmitRequest big = Request();
  big.add_candidates()->set_source(std::string(store::kMaxSourceBytes + 1, 'x'));
  s = Build(big, &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("at most 524288"), std::string::npos) << s.message();
}

TEST_F(CodeCandidateSubmissionTest, PatchesApplyToTheRegisteredSourceOrAreRefused) {
  xv::v1::SubmitRequest req = Request();
  req.add_candidates()->set_patch(kPatch);
  store::NewSubmission sub;
  // No worker registered the trainer's source yet: nothing to apply the patch to.
  Status s = Build(req, &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find("allow_code_candidates"), std::string::npos) << s.message();

  ASSERT_TRUE(store_->sources().RecordTrainerSource("fork", "w", Sha256Hex(kBase), kBase).ok());
  s = Build(req, &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sub.experiments.size(), 1u);
  EXPECT_EQ(sub.experiments[0].source_sha256, Sha256Hex(kEdited));  // the patched text
  EXPECT_EQ(sub.sources.at(Sha256Hex(kEdited)), kEdited);

  // A patch against another text: refused naming the hunk and the base.
  xv::v1::SubmitRequest stale = Request();
  stale.add_candidates()->set_patch(
      "--- a/train.py\n+++ b/train.py\n@@ -3 +3 @@\n-LR_SCALE = 9.0\n+LR_SCALE = 2.0\n");
  s = Build(stale, &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("candidate 1 (patch): patch: hunk 1 (@@ -3 +3 @@) does not apply"),
            std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("trainer fork's registered source"), std::string::npos) << s.message();

  // A bad registered source is refused by the table.
  EXPECT_FALSE(store_->sources().RecordTrainerSource("fork", "w", "0", kBase).ok());
  EXPECT_FALSE(store_->sources().RecordTrainerSource("fork", "w", Sha256Hex(""), "").ok());
}

TEST_F(CodeCandidateSubmissionTest, TheBaseSourceIsInheritedByCandidatesAndControls) {
  RoundPlan plan;
  plan.head_controls = 1;
  plan.sources.base_sha256 = Sha256Hex(kBase);
  plan.sources.base_text = kBase;
  Recipe base;
  ASSERT_TRUE(ParseRecipeYaml(kRecipe, &base).ok());
  xv::v1::SubmitRequest req = Request();
  auto* o = req.add_candidates()->add_overrides();
  o->set_key("matrix_lr");
  o->set_value("0.02");
  req.add_candidates()->set_source(kBase);  // the base's own text: a no-op
  store::NewSubmission sub;
  Status s = BuildSubmissionFromBase(req, base, plan, SubmissionLimits(), &sub);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("candidate 2 (source): no-op source"), std::string::npos)
      << s.message();
  req.mutable_candidates()->RemoveLast();
  s = BuildSubmissionFromBase(req, base, plan, SubmissionLimits(), &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sub.experiments.size(), 2u);
  for (const auto& e : sub.experiments) EXPECT_EQ(e.source_sha256, Sha256Hex(kBase)) << e.name;
  EXPECT_EQ(sub.base_source_sha256, Sha256Hex(kBase));
  EXPECT_EQ(sub.experiments[1].config_hash, sub.base_config_hash);  // the head control
}

TEST(CodeCandidatePlacement, OnlyWorkersAllowingTheTrainerTakeCodeCandidates) {
  sched::QueuedExperiment code;
  code.id = 1;
  code.trainer = "fork";
  code.code_candidate = true;
  sched::WorkerSlot plain;
  plain.trainers = {"fork"};
  sched::WorkerSlot allowing = plain;
  allowing.code_candidate_trainers = {"fork"};
  sched::WorkerSlot other = plain;
  other.code_candidate_trainers = {"other-fork"};
  EXPECT_FALSE(sched::WorkerCanRun(plain, code));
  EXPECT_FALSE(sched::WorkerCanRun(other, code));
  EXPECT_TRUE(sched::WorkerCanRun(allowing, code));
  code.code_candidate = false;
  EXPECT_TRUE(sched::WorkerCanRun(plain, code));
}

}  // namespace
}  // namespace xv::daemon
