// Tests of submit-time validation (daemon/engine/submission_builder.h) with the real recipe library
// and the shipped cpu-tiny recipe.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "daemon/engine/submission_builder.h"

namespace xv::daemon {
namespace {

std::string CpuTinyYaml() {
  const char* src = std::getenv("XV_SOURCE_DIR");
  std::string path = std::string(src ? src : ".") + "/recipes/cpu-tiny.yaml";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

xv::v1::SubmitRequest Request(std::vector<std::vector<std::pair<std::string, std::string>>> cands,
                              int replicates = 0) {
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(CpuTinyYaml());
  req.set_recipe_name("cpu-tiny");
  req.set_replicates(replicates);
  for (const auto& c : cands) {
    auto* cand = req.add_candidates();
    for (const auto& [k, v] : c) {
      auto* o = cand->add_overrides();
      o->set_key(k);
      o->set_value(v);
    }
  }
  return req;
}

TEST(BuildSubmission, NoCandidatesIsTheBaseRecipe) {
  store::NewSubmission sub;
  Status s = BuildSubmission(Request({}), SubmissionLimits(), &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sub.experiments.size(), 1u);
  const auto& e = sub.experiments[0];
  EXPECT_EQ(e.name, "base");
  EXPECT_EQ(e.overrides_json, "{}");
  EXPECT_EQ(sub.campaign, "default");
  EXPECT_EQ(sub.trainer, "libtorch");
  EXPECT_EQ(e.device_requirement, "any");  // device: auto
  EXPECT_DOUBLE_EQ(e.time_budget_s, 25.0);
  EXPECT_DOUBLE_EQ(e.hard_deadline_s, 2 * 25.0 + 300.0);
  EXPECT_EQ(e.recipe_hash, sub.base_hash);
  // The spec the trainer gets parses back to the same recipe (hash-identical).
  Recipe r;
  ASSERT_TRUE(ParseRecipeJson(nlohmann::json::parse(e.recipe_json), &r).ok());
  EXPECT_EQ(CanonicalHash(r), e.recipe_hash);
  EXPECT_EQ(r.depth, 2);
}

TEST(BuildSubmission, CandidatesWithReplicatesGetConsecutiveSeeds) {
  store::NewSubmission sub;
  Status s = BuildSubmission(Request({{{"matrix_lr", "0.03"}}, {{"matrix_lr", "0.05"}}}, 3),
                             SubmissionLimits(), &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sub.experiments.size(), 6u);
  std::set<std::string> hashes;
  for (int i = 0; i < 6; ++i) {
    const auto& e = sub.experiments[i];
    EXPECT_EQ(e.candidate_index, i / 3);
    EXPECT_EQ(e.replicate, i % 3);
    EXPECT_EQ(e.seed, 42 + i % 3);
    hashes.insert(e.recipe_hash);
    Recipe r;
    ASSERT_TRUE(ParseRecipeJson(nlohmann::json::parse(e.recipe_json), &r).ok());
    EXPECT_EQ(r.seed, e.seed);
    EXPECT_DOUBLE_EQ(r.matrix_lr, i < 3 ? 0.03 : 0.05);
  }
  EXPECT_EQ(hashes.size(), 6u);
  EXPECT_EQ(sub.experiments[0].name, "matrix_lr=0.03");
  EXPECT_EQ(nlohmann::json::parse(sub.experiments[0].overrides_json)["matrix_lr"].get<double>(),
            0.03);
}

TEST(BuildSubmission, UnknownKnobNamesFieldAndCandidate) {
  store::NewSubmission sub;
  Status s = BuildSubmission(Request({{{"matrix_lr", "0.03"}}, {{"matrx_lr", "0.05"}}}),
                             SubmissionLimits(), &sub);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("candidate 2"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("matrx_lr"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("unknown"), std::string::npos) << s.message();
  EXPECT_TRUE(sub.experiments.empty());
}

TEST(BuildSubmission, BatchThatDoesNotDivideIsRefused) {
  store::NewSubmission sub;
  Status s = BuildSubmission(Request({{{"total_batch_size", "5000"}}}), SubmissionLimits(), &sub);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("candidate 1 (total_batch_size=5000)"), std::string::npos)
      << s.message();
  EXPECT_NE(s.message().find("total_batch_size"), std::string::npos) << s.message();
}

TEST(BuildSubmission, KnobsThatMoveTogetherAreValidatedTogether) {
  // 12 x 256 = 3072 does not divide the base's 4096, so applied one by one the first step fails.
  xv::v1::SubmitRequest req = Request({});
  auto* cand = req.add_candidates();
  auto* o = cand->add_overrides();
  o->set_key("device_batch_size");
  o->set_value("12");
  o = cand->add_overrides();
  o->set_key("total_batch_size");
  o->set_value("6144");
  store::NewSubmission sub;
  Status s = BuildSubmission(req, SubmissionLimits(), &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sub.experiments.size(), 1u);
  EXPECT_EQ(sub.experiments[0].name, "device_batch_size=12,total_batch_size=6144");
  auto overrides = nlohmann::json::parse(sub.experiments[0].overrides_json);
  EXPECT_EQ(overrides["device_batch_size"].get<int>(), 12);
  EXPECT_EQ(overrides["total_batch_size"].get<int>(), 6144);
}

TEST(BuildSubmission, NoOpOverrideIsRefusedUnlessTheBaseIsACandidate) {
  store::NewSubmission sub;
  Status s = BuildSubmission(Request({{{"matrix_lr", "0.04"}}}), SubmissionLimits(), &sub);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("no-op override: matrix_lr=0.04 equals the base"), std::string::npos)
      << s.message();
  // With the base itself as a candidate, the same override duplicates it.
  s = BuildSubmission(Request({{}, {{"matrix_lr", "0.04"}}}), SubmissionLimits(), &sub);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("same resolved config as candidate 1"), std::string::npos)
      << s.message();
  // Base + a real change is fine.
  s = BuildSubmission(Request({{}, {{"matrix_lr", "0.05"}}}), SubmissionLimits(), &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sub.experiments[0].name, "base");
  EXPECT_EQ(sub.experiments[1].name, "matrix_lr=0.05");
}

TEST(BuildSubmission, BoundsAreEnforced) {
  SubmissionLimits limits;
  store::NewSubmission sub;
  xv::v1::SubmitRequest req = Request({}, 65);
  Status s = BuildSubmission(req, limits, &sub);
  EXPECT_NE(s.message().find("replicates"), std::string::npos) << s.message();
  req = Request({});
  req.set_recipe_yaml(std::string(64 * 1024 + 1, '#'));
  s = BuildSubmission(req, limits, &sub);
  EXPECT_NE(s.message().find("recipe_yaml"), std::string::npos) << s.message();
  req = Request({});
  for (int i = 0; i < 257; ++i) {
    auto* o = req.add_candidates()->add_overrides();
    o->set_key("seed");
    o->set_value(std::to_string(i + 100));
  }
  s = BuildSubmission(req, limits, &sub);
  EXPECT_NE(s.message().find("candidates"), std::string::npos) << s.message();
  req = Request({});
  req.set_recipe_yaml("depth: [1, 2\n");
  s = BuildSubmission(req, limits, &sub);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("recipe: ", 0), 0u) << s.message();
}

TEST(BuildSubmission, TrainerIsANameNeverACommand) {
  xv::v1::SubmitRequest req = Request({});
  req.set_trainer("/bin/sh -c rm");
  store::NewSubmission sub;
  Status s = BuildSubmission(req, SubmissionLimits(), &sub);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(s.message().rfind("trainer: ", 0), 0u) << s.message();
  req.set_trainer("upstream-fork");
  ASSERT_TRUE(BuildSubmission(req, SubmissionLimits(), &sub).ok());
  EXPECT_EQ(sub.trainer, "upstream-fork");
}

TEST(BuildSubmission, CudaRecipesRequireAGpuWorker) {
  store::NewSubmission sub;
  Status s = BuildSubmission(Request({{{"device", "cuda"}}}), SubmissionLimits(), &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(sub.experiments[0].device_requirement, "gpu");
}

}  // namespace
}  // namespace xv::daemon
