// The submit tool's JSON arguments into `xvctl submit`'s flags and on into a SubmitRequest.
#include "client/mcp/mcp_arguments.h"

#include <fstream>
#include <memory>

#include "client/daemon_client.h"
#include "client/mcp/mcp_tools.h"

#include <gtest/gtest.h>

namespace xv::client {
namespace {

using nlohmann::json;

// The candidates of the request built from `arguments`, each as "k=v;k2=v2".
std::vector<std::string> CandidatesOf(const json& arguments, v1::SubmitRequest* req) {
  SubmitArgs args;
  Status st = SubmitArgsFromJson(arguments, &args);
  EXPECT_TRUE(st.ok()) << st.message();
  st = BuildSubmitRequest(args, req);
  EXPECT_TRUE(st.ok()) << st.message();
  std::vector<std::string> out;
  for (const auto& c : req->candidates()) {
    std::string s;
    for (const auto& o : c.overrides()) s += (s.empty() ? "" : ";") + o.key() + "=" + o.value();
    out.push_back(s);
  }
  return out;
}

TEST(OverrideValueText, JsonValuesBecomeTheirJsonTextAndStringsStayYamlText) {
  std::string t;
  ASSERT_TRUE(OverrideValueText(json(0.03), "f", &t).ok());
  EXPECT_EQ(t, "0.03");
  ASSERT_TRUE(OverrideValueText(json(8), "f", &t).ok());
  EXPECT_EQ(t, "8");
  ASSERT_TRUE(OverrideValueText(json(true), "f", &t).ok());
  EXPECT_EQ(t, "true");
  ASSERT_TRUE(OverrideValueText(json::array({0.8, 0.95}), "f", &t).ok());
  EXPECT_EQ(t, "[0.8,0.95]");
  ASSERT_TRUE(OverrideValueText(json("[0.8, 0.95]"), "f", &t).ok());
  EXPECT_EQ(t, "[0.8, 0.95]");
  Status null = OverrideValueText(json(nullptr), "arguments.set.matrix_lr", &t);
  EXPECT_EQ(null.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(null.message().find("arguments.set.matrix_lr: null"), std::string::npos);
}

TEST(SubmitArgsFromJson, ObjectAndStringCandidatesBuildTheSameOverridesAsTheCli) {
  v1::SubmitRequest req;
  auto c =
      CandidatesOf({{"campaign", "lr"},
                    {"candidates", json::array({{{"matrix_lr", 0.03}, {"adam_betas", {0.8, 0.95}}},
                                                "matrix_lr=0.05,warmdown_ratio=0.4"})}},
                   &req);
  // Keys of an object come in sorted order.
  EXPECT_EQ(c, (std::vector<std::string>{"adam_betas=[0.8,0.95];matrix_lr=0.03",
                                         "matrix_lr=0.05;warmdown_ratio=0.4"}));
  EXPECT_EQ(req.campaign(), "lr");
  EXPECT_EQ(req.recipe_yaml(), "");
  EXPECT_EQ(req.replicates(), 1);
}

TEST(SubmitArgsFromJson, SweepObjectIsTheCartesianProductAndASweepRound) {
  v1::SubmitRequest req;
  auto c = CandidatesOf({{"campaign", "lr"},
                         {"sweep", {{"matrix_lr", {0.02, 0.04}}, {"warmdown_ratio", {0.3, 0.5}}}},
                         {"set", {{"time_budget_s", 8}}},
                         {"replicates", 2}},
                        &req);
  EXPECT_EQ(c, (std::vector<std::string>{
                   "time_budget_s=8;matrix_lr=0.02;warmdown_ratio=0.3",
                   "time_budget_s=8;matrix_lr=0.02;warmdown_ratio=0.5",
                   "time_budget_s=8;matrix_lr=0.04;warmdown_ratio=0.3",
                   "time_budget_s=8;matrix_lr=0.04;warmdown_ratio=0.5",
               }));
  EXPECT_EQ(req.kind(), "sweep");
  EXPECT_EQ(req.replicates(), 2);
  EXPECT_EQ(req.candidates(0).name(), "matrix_lr=0.02,warmdown_ratio=0.3");
}

TEST(SubmitArgsFromJson, StringListsAreTheCliSyntax) {
  v1::SubmitRequest req;
  auto c = CandidatesOf({{"campaign", "lr"},
                         {"sweep", json::array({"matrix_lr=0.02,0.04"})},
                         {"set", json::array({"time_budget_s=8"})},
                         {"round_kind", "candidates"}},
                        &req);
  EXPECT_EQ(c, (std::vector<std::string>{"time_budget_s=8;matrix_lr=0.02",
                                         "time_budget_s=8;matrix_lr=0.04"}));
  EXPECT_EQ(req.kind(), "candidates");
}

TEST(SubmitArgsFromJson, BadInputNamesTheArgument) {
  struct Case {
    json args;
    std::string expect;
  };
  const std::vector<Case> cases = {
      {{{"candidates", json::array({"matrix_lr=0.03"})}}, "arguments.recipe_path: give a recipe"},
      {{{"campaign", "c"}, {"candidates", json::array({{{"matrix_lr", nullptr}}})}},
       "arguments.candidates[0].matrix_lr: null"},
      {{{"campaign", "c"}, {"candidates", json::array({json::object()})}},
       "arguments.candidates[0]: expected a non-empty object"},
      {{{"campaign", "c"}, {"candidates", json::array({{{"name", "a,b"}}})}},
       "arguments.candidates[0].name: the value has a comma"},
      {{{"campaign", "c"}, {"candidates", json::array({"matrix_lr"})}},
       "arguments.candidates[0]: --candidate 'matrix_lr': expected key=value"},
      {{{"campaign", "c"}, {"candidates", json::array({7})}},
       "arguments.candidates[0]: expected an object of overrides"},
      {{{"campaign", "c"}, {"sweep", {{"matrix_lr", 0.02}}}},
       "arguments.sweep.matrix_lr: expected a non-empty array"},
      {{{"campaign", "c"}, {"sweep", {{"matrix_lr", {0.02, 0.02}}}}}, "repeats"},
      {{{"campaign", "c"}, {"set", json::array({"x"})}}, "arguments.set[0]: "},
      {{{"campaign", "c"}, {"set", {{" k", 1}}}}, "arguments.set. k: "},
  };
  for (const auto& c : cases) {
    SubmitArgs args;
    Status st = SubmitArgsFromJson(c.args, &args);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << c.args.dump();
    EXPECT_NE(st.message().find(c.expect), std::string::npos)
        << c.args.dump() << " -> " << st.message();
  }
}

}  // namespace
}  // namespace xv::client

namespace xv::client {
namespace {

// Code candidates (issue 16): texts and files become Candidate.source / Candidate.patch, each
// with the `set` overrides, and `set` alone adds no candidate beside them.
TEST(SubmitArgsFromJson, CodeCandidatesCarryTheTextWithTheSetOverrides) {
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/xv_mcp_code_candidate_train.py";
  {
    std::ofstream f(path);
    f << "DEPTH = 2\n";
  }
  v1::SubmitRequest req;
  const std::vector<std::string> overrides =
      CandidatesOf({{"campaign", "fork"},
                    {"set", {{"matrix_lr", 0.03}}},
                    {"sources", {"DEPTH = 4\n"}},
                    {"patches", {"--- a\n+++ b\n@@ -1 +1 @@\n-DEPTH = 2\n+DEPTH = 3\n"}},
                    {"source_paths", {path}}},
                   &req);
  ASSERT_EQ(req.candidates_size(), 3);
  EXPECT_EQ(overrides, std::vector<std::string>(3, "matrix_lr=0.03"));
  EXPECT_EQ(req.candidates(0).source(), "DEPTH = 2\n");  // the files first, then the texts
  EXPECT_EQ(req.candidates(1).source(), "DEPTH = 4\n");
  EXPECT_TRUE(req.candidates(2).source().empty());
  EXPECT_NE(req.candidates(2).patch().find("+DEPTH = 3"), std::string::npos);

  SubmitArgs args;
  Status st = SubmitArgsFromJson({{"campaign", "fork"}, {"sources", {1}}}, &args);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("arguments.sources[0]"), std::string::npos) << st.message();
  ASSERT_TRUE(
      SubmitArgsFromJson({{"campaign", "fork"}, {"patch_paths", {dir + "/no-such.diff"}}}, &args)
          .ok());
  st = BuildSubmitRequest(args, &req);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("--patch"), std::string::npos) << st.message();
}

// The campaign_create tool's budget lists the metric contract beside time_budget_s.
TEST(McpToolSchemas, CampaignCreateBudgetListsTheMetricContract) {
  ClientOptions options;
  const std::vector<McpTool> tools = XvMcpTools(std::make_shared<DaemonClient>(options), options);
  bool found = false;
  for (const McpTool& t : tools) {
    if (t.name == "submit") {
      for (const char* key : {"sources", "patches", "source_paths", "patch_paths"}) {
        EXPECT_TRUE(t.input_schema["properties"].contains(key)) << key;
      }
    }
    if (t.name != "campaign_create") continue;
    found = true;
    const json& budget = t.input_schema["properties"]["budget"];
    for (const char* key : {"time_budget_s", "sequence_len", "eval_tokens"}) {
      EXPECT_TRUE(budget["properties"].contains(key)) << key << " in " << budget.dump();
    }
    EXPECT_EQ(budget["properties"]["sequence_len"]["type"], "integer");
  }
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace xv::client
