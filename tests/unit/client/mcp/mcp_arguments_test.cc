// The submit tool's JSON arguments into `xvctl submit`'s flags and on into a SubmitRequest.
#include "client/mcp/mcp_arguments.h"

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
