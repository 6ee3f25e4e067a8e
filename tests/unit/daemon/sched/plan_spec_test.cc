// Plan YAML (daemon/sched/plan_spec.h): good plans parse and expand; bad ones are refused with the
// YAML path of the mistake; every file in recipes/plans/ parses.
#include "daemon/sched/plan_spec.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace xv::sched {
namespace {

const char* kGood = R"(
name: lr-night
campaign: tiny
create:
  recipe: recipes/cpu-tiny.yaml
  policy: {mode: welch, replicates: 3, head_controls: 3}
  device_filter: cpu
phases:
  - name: lr
    kind: sweep
    sweep: {matrix_lr: [0.03, 0.05], embedding_lr: [0.4, 0.8]}
    replicates: 3
    stop_if: no_keep
  - kind: candidates
    candidates:
      - {adam_betas: [0.8, 0.9]}
      - {weight_decay: 0.1, matrix_lr: 0.05}
  - name: drop
    kind: ablation
  - name: confirm
    kind: confirm
    seeds: 3
  - name: fmap
    kind: failure_map
    failure_map: {knob: matrix_lr, values: [0.04, 0.08, 0.16]}
)";

TEST(PlanSpec, GoodPlanParsesAndExpands) {
  PlanSpec spec;
  Status s = ParsePlanYaml(kGood, &spec);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(spec.name, "lr-night");
  EXPECT_EQ(spec.campaign, "tiny");
  EXPECT_TRUE(spec.create.set);
  EXPECT_EQ(spec.create.recipe_path, "recipes/cpu-tiny.yaml");
  EXPECT_NE(spec.create.policy_yaml.find("replicates: 3"), std::string::npos);
  EXPECT_EQ(spec.create.device_filter, "cpu");
  ASSERT_EQ(spec.phases.size(), 5u);
  EXPECT_EQ(spec.phases[1].name, "phase-2");
  EXPECT_EQ(spec.phases[0].replicates, 3);
  EXPECT_TRUE(spec.phases[0].stop_if_no_keep);
  EXPECT_FALSE(spec.phases[1].stop_if_no_keep);

  const auto sweep = ExpandPhaseCandidates(spec.phases[0]);
  ASSERT_EQ(sweep.size(), 4u);  // cartesian 2 x 2, first knob slowest
  EXPECT_EQ(JoinPlanOverrides(sweep[0]), "matrix_lr=0.03,embedding_lr=0.4");
  EXPECT_EQ(JoinPlanOverrides(sweep[1]), "matrix_lr=0.03,embedding_lr=0.8");
  EXPECT_EQ(JoinPlanOverrides(sweep[3]), "matrix_lr=0.05,embedding_lr=0.8");

  const auto cands = ExpandPhaseCandidates(spec.phases[1]);
  ASSERT_EQ(cands.size(), 2u);
  EXPECT_EQ(JoinPlanOverrides(cands[0]), "adam_betas=[0.8, 0.9]");
  EXPECT_EQ(JoinPlanOverrides(cands[1]), "weight_decay=0.1,matrix_lr=0.05");

  EXPECT_EQ(spec.phases[2].kind, PlanPhaseKind::kAblation);
  EXPECT_TRUE(ExpandPhaseCandidates(spec.phases[2]).empty());
  EXPECT_EQ(spec.phases[3].seeds, 3);
  EXPECT_TRUE(ExpandPhaseCandidates(spec.phases[3]).empty());

  const auto fmap = ExpandPhaseCandidates(spec.phases[4]);
  ASSERT_EQ(fmap.size(), 3u);
  EXPECT_EQ(JoinPlanOverrides(fmap[2]), "matrix_lr=0.16");
}

// Each bad plan is refused with the error starting with the YAML path of the mistake.
TEST(PlanSpec, BadPlansNameTheYamlPath) {
  const std::string head = "name: p\ncampaign: c\nphases:\n";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"  - {kind: sweep, sweep: {matrix_lr: [0.03, abc]}}\n", "phases[0].sweep.matrix_lr[1]: "},
      {"  - {kind: sweep, sweep: {matrix_lr: [0.03]}}\n  - {kind: ablation}\n"
       "  - {kind: sweep, sweep: {matrix_lr: [0.03, 0.04, x]}}\n",
       "phases[2].sweep.matrix_lr[2]: "},
      {"  - {kind: sweep, sweep: {matrx_lr: [0.03]}}\n",
       "phases[0].sweep.matrx_lr[0]: unknown knob"},
      {"  - {kind: sweep, sweep: {matrix_lr: [-1]}}\n", "phases[0].sweep.matrix_lr[0]: matrix_lr"},
      {"  - {kind: sweep, sweep: {matrix_lr: [0.03, 0.03]}}\n", "phases[0].sweep.matrix_lr[1]: "},
      {"  - {kind: sweep, sweep: {}}\n", "phases[0].sweep: "},
      {"  - {kind: sweep, sweep: {matrix_lr: [0.03]}, colour: red}\n",
       "phases[0].colour: unknown key"},
      {"  - {kind: tune}\n", "phases[0].kind: "},
      {"  - {name: x}\n", "phases[0].kind: missing"},
      {"  - {kind: candidates, candidates: [{depth: 2.5}]}\n", "phases[0].candidates[0].depth: "},
      {"  - {kind: candidates, candidates: [{}]}\n", "phases[0].candidates[0]: "},
      {"  - {kind: confirm}\n", "phases[0].seeds: missing"},
      {"  - {kind: confirm, seeds: 0}\n", "phases[0].seeds: "},
      {"  - {kind: confirm, seeds: three}\n", "phases[0].seeds: "},
      {"  - {kind: ablation, sweep: {matrix_lr: [1]}}\n", "phases[0].sweep: not a key of"},
      {"  - {kind: failure_map, failure_map: {knob: matrix_lr, values: [0.08, 0.04]}}\n",
       "phases[0].failure_map.values[1]: not ascending"},
      {"  - {kind: failure_map, failure_map: {knob: window_pattern, values: [SL, SSSL]}}\n",
       "phases[0].failure_map.knob: "},
      {"  - {kind: failure_map, failure_map: {knob: matrix_lr, values: [0.1, 0.2]}, "
       "replicates: 2}\n",
       "phases[0].replicates: "},
      {"  - {kind: sweep, sweep: {matrix_lr: [0.1]}, stop_if: never}\n", "phases[0].stop_if: "},
      {"  - {kind: sweep, sweep: {seed: [1, 2]}}\n", "phases[0].sweep.seed[0]: "},
      {"  - {kind: ablation, name: a}\n  - {kind: ablation, name: a}\n", "phases[1].name: "},
  };
  for (const auto& [phases, want] : cases) {
    PlanSpec spec;
    Status s = ParsePlanYaml(head + phases, &spec);
    ASSERT_FALSE(s.ok()) << phases;
    EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
    EXPECT_EQ(s.message().rfind(want, 0), 0u)
        << "got: " << s.message() << "\nwant prefix: " << want;
  }
  PlanSpec spec;
  EXPECT_EQ(ParsePlanYaml("campaign: c\nphases: [{kind: ablation}]\n", &spec).message(),
            "name: missing");
  EXPECT_EQ(ParsePlanYaml("name: p\nphases: [{kind: ablation}]\n", &spec)
                .message()
                .rfind("campaign: ", 0),
            0u);
  EXPECT_EQ(
      ParsePlanYaml("name: p\ncampaign: c\nphases: []\n", &spec).message().rfind("phases: ", 0),
      0u);
  EXPECT_EQ(ParsePlanYaml("name: p\ncampaign: c\nextra: 1\nphases: [{kind: ablation}]\n", &spec)
                .message()
                .rfind("extra: unknown key", 0),
            0u);
  EXPECT_EQ(ParsePlanYaml("name: p\ncampaign: c\ncreate: {policy: x.yaml}\nphases: [{kind: "
                          "ablation}]\n",
                          &spec)
                .message()
                .rfind("create.recipe: missing", 0),
            0u);
  EXPECT_EQ(ParsePlanYaml("name: [p\n", &spec).message().rfind("plan: YAML: ", 0), 0u);
}

// Every example shipped in recipes/plans/ parses, and there are examples for both recipes.
TEST(PlanSpec, EveryShippedPlanParses) {
  const char* src = std::getenv("XV_SOURCE_DIR");
  ASSERT_NE(src, nullptr);
  const std::filesystem::path dir = std::filesystem::path(src) / "recipes" / "plans";
  int files = 0, tiny = 0, upstream = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".yaml") continue;
    std::ifstream f(entry.path());
    std::stringstream ss;
    ss << f.rdbuf();
    PlanSpec spec;
    Status s = ParsePlanYaml(ss.str(), &spec);
    EXPECT_TRUE(s.ok()) << entry.path() << ": " << s.ToString();
    if (!s.ok()) continue;
    ++files;
    EXPECT_FALSE(spec.phases.empty());
    if (spec.create.set) {
      EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(src) / spec.create.recipe_path))
          << entry.path() << ": create.recipe " << spec.create.recipe_path;
      if (!spec.create.policy_path.empty()) {
        EXPECT_TRUE(std::filesystem::exists(std::filesystem::path(src) / spec.create.policy_path))
            << entry.path() << ": create.policy " << spec.create.policy_path;
      }
      tiny += spec.create.recipe_path == "recipes/cpu-tiny.yaml";
      upstream += spec.create.recipe_path == "recipes/upstream-default.yaml";
    }
  }
  std::printf("recipes/plans: %d plans parsed (%d cpu-tiny, %d upstream-default)\n", files, tiny,
              upstream);
  EXPECT_GE(files, 4);
  EXPECT_GE(tiny, 1);
  EXPECT_GE(upstream, 1);
}

}  // namespace
}  // namespace xv::sched
