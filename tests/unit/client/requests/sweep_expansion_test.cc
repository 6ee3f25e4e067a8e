#include "client/requests/sweep_expansion.h"

#include <gtest/gtest.h>

#include "client/requests/submit_request.h"

namespace xv::client {
namespace {

std::vector<std::string> Flatten(const std::vector<std::vector<v1::Override>>& cands) {
  std::vector<std::string> out;
  for (const auto& c : cands) {
    std::string s;
    for (const auto& o : c) s += (s.empty() ? "" : ",") + o.key() + "=" + o.value();
    out.push_back(s);
  }
  return out;
}

TEST(ExpandSweeps, OneFlagGivesOneCandidatePerValue) {
  std::vector<std::vector<v1::Override>> out;
  ASSERT_TRUE(ExpandSweeps({"matrix_lr=0.03,0.04, 0.05"}, &out).ok());
  EXPECT_EQ(Flatten(out),
            (std::vector<std::string>{"matrix_lr=0.03", "matrix_lr=0.04", "matrix_lr=0.05"}));
}

TEST(ExpandSweeps, SeveralFlagsGiveTheCartesianProductFirstFlagSlowest) {
  std::vector<std::vector<v1::Override>> out;
  ASSERT_TRUE(
      ExpandSweeps({"matrix_lr=0.03,0.05", "weight_decay=0,0.1,0.2", "depth=4"}, &out).ok());
  EXPECT_EQ(Flatten(out), (std::vector<std::string>{
                              "matrix_lr=0.03,weight_decay=0,depth=4",
                              "matrix_lr=0.03,weight_decay=0.1,depth=4",
                              "matrix_lr=0.03,weight_decay=0.2,depth=4",
                              "matrix_lr=0.05,weight_decay=0,depth=4",
                              "matrix_lr=0.05,weight_decay=0.1,depth=4",
                              "matrix_lr=0.05,weight_decay=0.2,depth=4",
                          }));
}

TEST(ExpandSweeps, CommasInsideBracketsAndQuotesDoNotSplitValues) {
  std::vector<std::vector<v1::Override>> out;
  ASSERT_TRUE(
      ExpandSweeps({"adam_betas=[0.8, 0.95],[0.9, 0.99]", "window_pattern='S,L',SSSL"}, &out).ok());
  EXPECT_EQ(Flatten(out), (std::vector<std::string>{
                              "adam_betas=[0.8, 0.95],window_pattern='S,L'",
                              "adam_betas=[0.8, 0.95],window_pattern=SSSL",
                              "adam_betas=[0.9, 0.99],window_pattern='S,L'",
                              "adam_betas=[0.9, 0.99],window_pattern=SSSL",
                          }));
}

TEST(ExpandSweeps, NoFlagsGiveNoCandidates) {
  std::vector<std::vector<v1::Override>> out = {{}};
  ASSERT_TRUE(ExpandSweeps({}, &out).ok());
  EXPECT_TRUE(out.empty());
}

TEST(ExpandSweeps, BadSyntaxIsAnErrorNamingTheFlagAndText) {
  struct Case {
    std::string text;
    std::string message;
  } cases[] = {
      {"matrix_lr", "--sweep 'matrix_lr': expected key=value1,value2,..."},
      {"=0.1,0.2", "--sweep '=0.1,0.2': empty key"},
      {"matrix_lr=0.03,,0.05", "--sweep 'matrix_lr=0.03,,0.05': value 2 of matrix_lr is empty"},
      {"matrix_lr=", "--sweep 'matrix_lr=': value 1 of matrix_lr is empty"},
      {"matrix_lr=0.03,0.03", "--sweep 'matrix_lr=0.03,0.03': value 0.03 of matrix_lr repeats"},
      {"adam_betas=[0.8, 0.95", "--sweep 'adam_betas=[0.8, 0.95': unbalanced brackets or quotes"},
      {"adam_betas=0.8]", "--sweep 'adam_betas=0.8]': unbalanced brackets or quotes"},
  };
  for (const auto& c : cases) {
    std::vector<std::vector<v1::Override>> out = {{}};
    Status st = ExpandSweeps({c.text}, &out);
    EXPECT_EQ(st.code(), Status::Code::kInvalidArgument) << c.text;
    EXPECT_EQ(st.message(), c.message);
    EXPECT_EQ(out.size(), 1u) << "output changed on error: " << c.text;
  }
}

TEST(ExpandSweeps, AKnobSweptTwiceIsRefused) {
  std::vector<std::vector<v1::Override>> out;
  Status st = ExpandSweeps({"matrix_lr=0.03", "matrix_lr=0.05"}, &out);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(),
            "--sweep 'matrix_lr=0.05': matrix_lr is already swept by another --sweep flag");
}

// Found while writing tests/fuzz: a few flags of many values asked for their whole product up front
// (three flags of 2000 values: 8e9 candidates, the memory of the machine).
TEST(ExpandSweeps, AProductBeyondTheLimitIsRefusedBeforeItIsBuilt) {
  auto values = [](const std::string& key, int n) {
    std::string flag = key + "=";
    for (int i = 1; i <= n; ++i) flag += (i > 1 ? "," : "") + std::to_string(i);
    return flag;
  };
  std::vector<std::vector<v1::Override>> out;
  Status st =
      ExpandSweeps({values("depth", 2000), values("head_dim", 2000), values("seed", 2000)}, &out);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("--sweep: 2000 x 2000 x 2000 values make more than 4096"),
            std::string::npos)
      << st.message();
  EXPECT_TRUE(out.empty());
  // Exactly the limit is expanded.
  ASSERT_TRUE(ExpandSweeps({values("depth", 64), values("head_dim", 64)}, &out).ok());
  EXPECT_EQ(out.size(), kMaxSweepCandidates);
}

TEST(BuildSubmitRequest, SweepWithoutRecipeBuildsFromTheCampaignHead) {
  SubmitArgs a;
  a.campaign = "lr";
  a.sets = {"depth=4"};
  a.sweeps = {"matrix_lr=0.03,0.05"};
  a.replicates = 2;
  v1::SubmitRequest req;
  ASSERT_TRUE(BuildSubmitRequest(a, &req).ok());
  EXPECT_EQ(req.recipe_yaml(), "");
  EXPECT_EQ(req.campaign(), "lr");
  EXPECT_EQ(req.kind(), "sweep");
  EXPECT_EQ(req.replicates(), 2);
  ASSERT_EQ(req.candidates_size(), 2);
  EXPECT_EQ(req.candidates(0).name(), "matrix_lr=0.03");
  ASSERT_EQ(req.candidates(1).overrides_size(), 2);
  EXPECT_EQ(req.candidates(1).overrides(0).key(), "depth");  // --set first
  EXPECT_EQ(req.candidates(1).overrides(1).value(), "0.05");
}

TEST(BuildSubmitRequest, CandidatesComeBeforeSweepsAndKindIsKept) {
  SubmitArgs a;
  a.campaign = "lr";
  a.candidates = {"warmup_ratio=0.1"};
  a.sweeps = {"matrix_lr=0.03"};
  a.kind = "confirm";
  v1::SubmitRequest req;
  ASSERT_TRUE(BuildSubmitRequest(a, &req).ok());
  EXPECT_EQ(req.kind(), "confirm");
  ASSERT_EQ(req.candidates_size(), 2);
  EXPECT_EQ(req.candidates(0).name(), "warmup_ratio=0.1");
  EXPECT_EQ(req.candidates(1).name(), "matrix_lr=0.03");
}

TEST(BuildSubmitRequest, NoRecipeAndNoCampaignIsRefused) {
  SubmitArgs a;
  a.sweeps = {"matrix_lr=0.03"};
  v1::SubmitRequest req;
  Status st = BuildSubmitRequest(a, &req);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(st.message().find("--campaign"), std::string::npos) << st.message();
}

TEST(BuildSubmitRequest, BadSweepFailsTheWholeRequest) {
  SubmitArgs a;
  a.campaign = "lr";
  a.sweeps = {"matrix_lr=0.03", "nonsense"};
  v1::SubmitRequest req;
  Status st = BuildSubmitRequest(a, &req);
  EXPECT_EQ(st.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(st.message(), "--sweep 'nonsense': expected key=value1,value2,...");
}

}  // namespace
}  // namespace xv::client
