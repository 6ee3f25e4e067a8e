// Tests of the campaign budget contract parser (daemon/engine/budget_contract.h) and of its use by
// the submission builder: deadlines and the fixed time budget.
#include "daemon/engine/budget_contract.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/recipe.h"
#include "daemon/engine/submission_builder.h"

namespace xv::daemon {
namespace {

TEST(BudgetContract, EmptyIsTheDefaultContract) {
  BudgetContract c;
  ASSERT_TRUE(ParseBudgetContract("", &c).ok());
  EXPECT_FALSE(c.time_budget_s.has_value());
  EXPECT_DOUBLE_EQ(c.startup_allowance_s, 300.0);
  EXPECT_FALSE(c.eval_allowance_s.has_value());
  ASSERT_TRUE(ParseBudgetContract("{}", &c).ok());
  EXPECT_DOUBLE_EQ(ContractHardDeadlineSeconds(c, 25.0), 2 * 25.0 + 300.0);
  EXPECT_DOUBLE_EQ(HardDeadlineSeconds(25.0), 2 * 25.0 + 300.0);
  EXPECT_TRUE(CheckContractTimeBudget(c, 25.0).ok());
}

TEST(BudgetContract, GoodContractIsParsedAndNormalised) {
  BudgetContract c;
  Status s = ParseBudgetContract(R"({"time_budget_s": 2})", &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(c.time_budget_s.has_value());
  EXPECT_DOUBLE_EQ(*c.time_budget_s, 2.0);
  EXPECT_DOUBLE_EQ(ContractHardDeadlineSeconds(c, 2.0), 2.0 + 300.0 + 2.0);
  EXPECT_EQ(nlohmann::json::parse(BudgetContractToJson(c)),
            nlohmann::json::parse(R"({"time_budget_s": 2, "startup_allowance_s": 300})"));

  s = ParseBudgetContract(
      R"({"time_budget_s": 60, "startup_allowance_s": 30.5, "eval_allowance_s": 0})", &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_DOUBLE_EQ(ContractHardDeadlineSeconds(c, 60.0), 90.5);
  BudgetContract again;
  ASSERT_TRUE(ParseBudgetContract(BudgetContractToJson(c), &again).ok());
  EXPECT_EQ(BudgetContractToJson(again), BudgetContractToJson(c));
  EXPECT_DOUBLE_EQ(*again.eval_allowance_s, 0.0);
  EXPECT_DOUBLE_EQ(again.startup_allowance_s, 30.5);
}

TEST(BudgetContract, UnknownKeyIsRefusedListingTheKnownOnes) {
  BudgetContract c;
  Status s = ParseBudgetContract(R"({"time_budjet_s": 2})", &c);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.message(),
            "budget.time_budjet_s: unknown field (known: time_budget_s, startup_allowance_s, "
            "eval_allowance_s, max_concurrent, sequence_len, eval_tokens)");
}

// The metric contract (issue 16): pinned from the base recipe when not given, given values
// replace the recipe's, round trip through the stored JSON, and a recipe that differs is refused
// naming the knob.
TEST(BudgetContract, MetricContractPinsSequenceLenAndEvalTokens) {
  BudgetContract c;
  ASSERT_TRUE(ParseBudgetContract(R"({"eval_tokens": 4096})", &c).ok());
  int sequence_len = 256;
  int64_t eval_tokens = 16384;
  PinContractMetric(&c, &sequence_len, &eval_tokens);
  EXPECT_EQ(sequence_len, 256);
  EXPECT_EQ(eval_tokens, 4096);
  ASSERT_TRUE(c.sequence_len && c.eval_tokens);
  EXPECT_EQ(*c.sequence_len, 256);
  EXPECT_EQ(*c.eval_tokens, 4096);
  BudgetContract again;
  ASSERT_TRUE(ParseBudgetContract(BudgetContractToJson(c), &again).ok());
  EXPECT_EQ(BudgetContractToJson(again), BudgetContractToJson(c));
  EXPECT_TRUE(CheckContractMetric(c, 256, 4096).ok());
  Status s = CheckContractMetric(c, 512, 4096);
  EXPECT_EQ(s.message(),
            "sequence_len: fixed at 256 by the campaign's metric contract (val_bpb is measured at "
            "this context length; got 512)");
  s = CheckContractMetric(c, 256, 8192);
  EXPECT_EQ(s.message().rfind("eval_tokens: fixed at 4096 by the campaign's metric contract", 0),
            0u)
      << s.message();
  // A contract stored before issue 16 pins neither.
  EXPECT_TRUE(CheckContractMetric(BudgetContract{}, 512, 8192).ok());
  for (const char* bad :
       {R"({"sequence_len": 0})", R"({"eval_tokens": 2.5})", R"({"sequence_len": "64"})"}) {
    BudgetContract b;
    s = ParseBudgetContract(bad, &b);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message().rfind("budget.", 0), 0u) << s.message();
  }
}

TEST(BudgetContract, NonNumbersAndNonObjectsAreRefusedNamingTheField) {
  BudgetContract c;
  Status s = ParseBudgetContract(R"({"time_budget_s": "2"})", &c);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(s.message().find("budget.time_budget_s: must be a number"), std::string::npos)
      << s.message();
  s = ParseBudgetContract(R"({"eval_allowance_s": null})", &c);
  EXPECT_NE(s.message().find("budget.eval_allowance_s"), std::string::npos) << s.message();
  s = ParseBudgetContract(R"({"startup_allowance_s": true})", &c);
  EXPECT_NE(s.message().find("budget.startup_allowance_s"), std::string::npos) << s.message();
  s = ParseBudgetContract("[2]", &c);
  EXPECT_NE(s.message().find("budget: expected a JSON object"), std::string::npos) << s.message();
  s = ParseBudgetContract("{\"time_budget_s\": ", &c);
  EXPECT_NE(s.message().find("budget: expected a JSON object"), std::string::npos) << s.message();
}

TEST(BudgetContract, DeepOrHugeValuesAreRefusedNamingTheFieldWithoutQuotingThem) {
  BudgetContract c;
  // 100,000 levels (200 KB): the dump() in the old error message recursed once per level (SIGSEGV).
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  Status s = ParseBudgetContract(deep, &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("budget_json: nested deeper than 64 levels"), std::string::npos)
      << s.message().substr(0, 300);
  EXPECT_LT(s.message().size(), 300u);
  // The same depth under a known field.
  s = ParseBudgetContract(R"({"time_budget_s": )" + deep + "}", &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("budget_json: nested deeper"), std::string::npos) << s.message();
  // A shallow container is described by its type and size, not dumped.
  s = ParseBudgetContract(R"({"time_budget_s": [1, 2, 3]})", &c);
  EXPECT_EQ(s.message(),
            "budget.time_budget_s: must be a number of seconds in 1..86400, got an array of 3");
  s = ParseBudgetContract(R"({"max_concurrent": {"a": [[1]]}})", &c);
  EXPECT_NE(s.message().find("got an object of 1 keys"), std::string::npos) << s.message();
  // A 1 MiB string value and a 1 MiB key: neither comes back whole.
  const std::string big(1 << 20, 'x');
  s = ParseBudgetContract(R"({"startup_allowance_s": ")" + big + "\"}", &c);
  EXPECT_NE(s.message().find("got a string of 1048576 bytes"), std::string::npos) << s.message();
  s = ParseBudgetContract("{\"" + big + "\": 1}", &c);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("(1048576 bytes)"), std::string::npos) << s.message().substr(0, 300);
  EXPECT_LT(s.message().size(), 400u);
  // Not JSON: the position, not the text.
  s = ParseBudgetContract("{\"time_budget_s\": secret-words", &c);
  EXPECT_NE(s.message().find("budget_json: not JSON (syntax error at byte"), std::string::npos)
      << s.message();
  EXPECT_EQ(s.message().find("secret"), std::string::npos) << s.message();
}

TEST(BudgetContract, OutOfRangeValuesAreRefused) {
  BudgetContract c;
  EXPECT_NE(ParseBudgetContract(R"({"time_budget_s": 0})", &c)
                .message()
                .find("budget.time_budget_s: must be a number of seconds in 1..86400, got 0"),
            std::string::npos);
  EXPECT_FALSE(ParseBudgetContract(R"({"time_budget_s": 86401})", &c).ok());
  EXPECT_FALSE(ParseBudgetContract(R"({"startup_allowance_s": -1})", &c).ok());
  EXPECT_FALSE(ParseBudgetContract(R"({"eval_allowance_s": 1e9})", &c).ok());
  EXPECT_TRUE(ParseBudgetContract(R"({"time_budget_s": 86400, "eval_allowance_s": 0})", &c).ok());
  EXPECT_TRUE(ParseBudgetContract(R"({"time_budget_s": 1, "startup_allowance_s": 0})", &c).ok());
}

TEST(BudgetContract, MaxConcurrentIsAnIntegerIn1To4096KeptInTheStoredForm) {
  BudgetContract c;
  ASSERT_TRUE(ParseBudgetContract("{}", &c).ok());
  EXPECT_FALSE(c.max_concurrent.has_value());
  EXPECT_EQ(nlohmann::json::parse(BudgetContractToJson(c)).count("max_concurrent"), 0u);

  Status s = ParseBudgetContract(R"({"max_concurrent": 2, "time_budget_s": 5})", &c);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_TRUE(c.max_concurrent.has_value());
  EXPECT_EQ(*c.max_concurrent, 2);
  EXPECT_EQ(nlohmann::json::parse(BudgetContractToJson(c)),
            nlohmann::json::parse(
                R"({"max_concurrent": 2, "time_budget_s": 5, "startup_allowance_s": 300})"));
  BudgetContract again;
  ASSERT_TRUE(ParseBudgetContract(BudgetContractToJson(c), &again).ok());
  EXPECT_EQ(again.max_concurrent, c.max_concurrent);

  // The range ends are accepted; a whole number written as 3.0 too.
  ASSERT_TRUE(ParseBudgetContract(R"({"max_concurrent": 1})", &c).ok());
  EXPECT_EQ(*c.max_concurrent, 1);
  ASSERT_TRUE(ParseBudgetContract(R"({"max_concurrent": 4096})", &c).ok());
  EXPECT_EQ(*c.max_concurrent, 4096);
  ASSERT_TRUE(ParseBudgetContract(R"({"max_concurrent": 3.0})", &c).ok());
  EXPECT_EQ(*c.max_concurrent, 3);

  const std::string want =
      "budget.max_concurrent: must be an integer number of experiments in 1..4096, got ";
  for (const char* bad : {"0", "-1", "4097", "1e12", "2.5", "\"2\"", "true", "null", "[1]"}) {
    s = ParseBudgetContract(std::string(R"({"max_concurrent": )") + bad + "}", &c);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_EQ(s.message().rfind(want, 0), 0u) << bad << ": " << s.message();
  }
  s = ParseBudgetContract(R"({"max_concurrent": 0})", &c);
  EXPECT_EQ(s.message(), want + "0");
}

TEST(BudgetContract, BuilderUsesTheContractForDeadlinesAndRefusesAnotherBudget) {
  Recipe base;
  base.time_budget_s = 3;
  RoundPlan plan;
  plan.head_controls = 1;
  ASSERT_TRUE(
      ParseBudgetContract(R"({"time_budget_s": 3, "eval_allowance_s": 10})", &plan.budget).ok());
  xv::v1::SubmitRequest req;
  auto* o = req.add_candidates()->add_overrides();
  o->set_key("matrix_lr");
  o->set_value("0.05");
  store::NewSubmission sub;
  Status s = BuildSubmissionFromBase(req, base, plan, SubmissionLimits(), &sub);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_EQ(sub.experiments.size(), 2u);  // the candidate and one head control
  for (const auto& e : sub.experiments) {
    EXPECT_DOUBLE_EQ(e.time_budget_s, 3.0);
    EXPECT_DOUBLE_EQ(e.hard_deadline_s, 3.0 + 300.0 + 10.0);
  }

  o = req.add_candidates()->add_overrides();
  o->set_key("time_budget_s");
  o->set_value("5");
  s = BuildSubmissionFromBase(req, base, plan, SubmissionLimits(), &sub);
  EXPECT_EQ(s.message(),
            "candidate 2 (time_budget_s=5): time_budget_s: fixed at 3 s by the campaign's budget "
            "contract (got 5)");

  base.time_budget_s = 25;
  req.clear_candidates();
  s = BuildSubmissionFromBase(req, base, plan, SubmissionLimits(), &sub);
  EXPECT_NE(s.message().find("recipe: time_budget_s: fixed at 3 s"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace xv::daemon
