// RoundDecider's rules on hand-built rounds: the statistics it reports, non-finite replicates,
// insufficient replicates, min_effect, one keep per round, the noise band per device class, the
// JSON form and the input errors.
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "daemon/sched/round_decider.h"
#include "tests/unit/daemon/sched/t_closed_forms.h"

namespace xv::sched {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<RunOutcome> Runs(const std::vector<double>& values, const std::string& device = "") {
  std::vector<RunOutcome> runs;
  for (double v : values) {
    RunOutcome run;
    run.val_bpb = v;
    run.device_class = device;
    runs.push_back(run);
  }
  return runs;
}

AcceptancePolicy Welch(
    MultipleComparisonCorrection correction = MultipleComparisonCorrection::kBonferroni) {
  AcceptancePolicy policy = DefaultAcceptancePolicy(AcceptanceMode::kWelch);
  policy.correction = correction;
  return policy;
}

RoundDecision DecideOk(const AcceptancePolicy& policy, const std::vector<RunOutcome>& head,
                       const std::vector<CandidateRuns>& candidates) {
  RoundDecision decision;
  const Status status = RoundDecider().Decide(policy, head, candidates, &decision);
  EXPECT_TRUE(status.ok()) << status.ToString();
  return decision;
}

// Head around 1.000 with sd 0.001.
const std::vector<double> kHead = {0.999, 1.000, 1.001, 1.000};

TEST(RoundDeciderTest, ClearImprovementIsKeptWithItsStatistics) {
  const RoundDecision d =
      DecideOk(Welch(), Runs(kHead), {{"lr", Runs({0.994, 0.995, 0.996, 0.995})}});
  ASSERT_TRUE(d.kept_index.has_value());
  const CandidateDecision& c = d.candidates[0];
  EXPECT_TRUE(c.keep);
  EXPECT_EQ(c.reason, DecisionReason::kKept);
  EXPECT_EQ(c.stats.n, 4);
  EXPECT_NEAR(*c.stats.mean, 0.995, 1e-12);
  // Both samples: deviations -1, 0, 1, 0 (x 0.001): sd = sqrt(2e-6 / 3).
  EXPECT_NEAR(*c.stats.sd, std::sqrt(2e-6 / 3.0), 1e-12);
  EXPECT_NEAR(*c.head.mean, 1.000, 1e-12);
  EXPECT_NEAR(*c.improvement, 0.005, 1e-12);
  // se = sqrt(2 * (2e-6 / 3) / 4) = sqrt(1e-6 / 3); equal variances and n: df = 2 (n - 1) = 6.
  EXPECT_NEAR(*c.t, 0.005 / std::sqrt(1e-6 / 3.0), 1e-6);
  EXPECT_NEAR(*c.df, 6.0, 1e-9);
  EXPECT_NEAR(*c.p, testing::EvenDfUpperTail(*c.t, 6), 1e-12);
  EXPECT_NEAR(*c.alpha, 0.05, 1e-15);
  EXPECT_NE(c.reason_text.find("kept"), std::string::npos) << c.reason_text;
  EXPECT_NE(d.summary.find("kept lr"), std::string::npos) << d.summary;
}

TEST(RoundDeciderTest, NoiseSizedDifferenceIsNotSignificant) {
  const RoundDecision d =
      DecideOk(Welch(), Runs(kHead), {{"seed-change", Runs({0.9995, 1.0005, 0.9985, 1.0})}});
  EXPECT_FALSE(d.kept_index.has_value());
  EXPECT_EQ(d.candidates[0].reason, DecisionReason::kNotSignificant);
  EXPECT_GT(*d.candidates[0].p, 0.05);
  EXPECT_NE(d.summary.find("no keep"), std::string::npos);
}

TEST(RoundDeciderTest, SignificantButBelowMinEffectIsDiscarded) {
  AcceptancePolicy policy = Welch();
  policy.min_effect = 0.01;
  const RoundDecision d =
      DecideOk(policy, Runs(kHead), {{"lr", Runs({0.994, 0.995, 0.996, 0.995})}});
  EXPECT_FALSE(d.kept_index.has_value());
  EXPECT_EQ(d.candidates[0].reason, DecisionReason::kBelowMinEffect);
  EXPECT_LT(*d.candidates[0].p, 0.05);
  EXPECT_EQ(*d.candidates[0].band, 0.01);
}

TEST(RoundDeciderTest, NonFiniteReplicateIsNeverKeptEvenWhenBest) {
  std::vector<RunOutcome> nan_runs = Runs({0.980, 0.981, kNaN, 0.979});
  std::vector<RunOutcome> diverged_runs = Runs({0.970, 0.971, 0.972, 0.970});
  diverged_runs[1].diverged = true;
  const RoundDecision d = DecideOk(Welch(), Runs(kHead),
                                   {{"nan", nan_runs},
                                    {"diverged", diverged_runs},
                                    {"good", Runs({0.990, 0.991, 0.989, 0.990})}});
  ASSERT_TRUE(d.kept_index.has_value());
  EXPECT_EQ(d.candidates[*d.kept_index].name, "good");
  EXPECT_EQ(d.candidates[0].reason, DecisionReason::kNonFiniteReplicate);
  EXPECT_EQ(d.candidates[0].stats.n_runs, 4);
  EXPECT_EQ(d.candidates[0].stats.n, 3);
  EXPECT_DOUBLE_EQ(d.candidates[0].stats.nan_rate, 0.25);
  EXPECT_EQ(d.candidates[1].reason, DecisionReason::kNonFiniteReplicate);
  EXPECT_DOUBLE_EQ(d.candidates[1].stats.nan_rate, 0.25);
  EXPECT_FALSE(d.candidates[1].p.has_value());
  // Only "good" reached the test: bonferroni over m = 1.
  EXPECT_EQ(d.tested, 1);
  EXPECT_NEAR(*d.candidates[2].alpha, 0.05, 1e-15);
}

TEST(RoundDeciderTest, InsufficientReplicatesUnderWelch) {
  const RoundDecision d = DecideOk(Welch(), Runs(kHead), {{"single", Runs({0.90})}, {"none", {}}});
  EXPECT_EQ(d.candidates[0].reason, DecisionReason::kInsufficientReplicates);
  EXPECT_NE(d.candidates[0].reason_text.find("needs >= 2"), std::string::npos);
  EXPECT_EQ(d.candidates[1].reason, DecisionReason::kInsufficientReplicates);
  EXPECT_FALSE(d.kept_index.has_value());

  std::vector<RunOutcome> head = Runs({1.0, kNaN});
  const RoundDecision h = DecideOk(Welch(), head, {{"lr", Runs({0.9, 0.91})}});
  EXPECT_EQ(h.candidates[0].reason, DecisionReason::kInsufficientHeadReplicates);
  EXPECT_EQ(h.head.n, 1);
  EXPECT_DOUBLE_EQ(h.head.nan_rate, 0.5);
  EXPECT_FALSE(h.kept_index.has_value());
}

TEST(RoundDeciderTest, AtMostOneKeepTheLowestMean) {
  const RoundDecision d = DecideOk(Welch(), Runs(kHead),
                                   {{"a", Runs({0.990, 0.991, 0.989, 0.990})},
                                    {"b", Runs({0.985, 0.986, 0.984, 0.985})},
                                    {"c", Runs({0.992, 0.991, 0.993, 0.992})}});
  ASSERT_TRUE(d.kept_index.has_value());
  EXPECT_EQ(*d.kept_index, 1u);
  int keeps = 0;
  for (const CandidateDecision& c : d.candidates) {
    keeps += c.keep ? 1 : 0;
    EXPECT_TRUE(c.passed) << c.name;
  }
  EXPECT_EQ(keeps, 1);
  EXPECT_EQ(d.candidates[0].reason, DecisionReason::kBeatenByBetterCandidate);
  EXPECT_EQ(d.candidates[2].reason, DecisionReason::kBeatenByBetterCandidate);
  EXPECT_NE(d.candidates[0].reason_text.find("b has the lower mean"), std::string::npos)
      << d.candidates[0].reason_text;
  // Bonferroni over the three tested candidates.
  EXPECT_NEAR(*d.candidates[0].alpha, 0.05 / 3.0, 1e-15);
  EXPECT_NE(d.summary.find("2 beaten_by_better_candidate"), std::string::npos) << d.summary;
}

TEST(RoundDeciderTest, BonferroniCanTurnAMarginalPassIntoADiscard) {
  // One candidate with p between 0.05 / 3 and 0.05, plus two clearly worse ones.
  const std::vector<double> marginal = {0.9990, 0.9995, 0.9980, 0.9990};
  const std::vector<CandidateRuns> round = {{"m", Runs(marginal)},
                                            {"w1", Runs({1.01, 1.011, 1.012, 1.01})},
                                            {"w2", Runs({1.02, 1.021, 1.022, 1.02})}};
  const RoundDecision none =
      DecideOk(Welch(MultipleComparisonCorrection::kNone), Runs(kHead), round);
  ASSERT_TRUE(none.candidates[0].p.has_value());
  const double p = *none.candidates[0].p;
  ASSERT_GT(p, 0.05 / 3.0);
  ASSERT_LT(p, 0.05);
  EXPECT_TRUE(none.kept_index.has_value());
  const RoundDecision bonferroni = DecideOk(Welch(), Runs(kHead), round);
  EXPECT_FALSE(bonferroni.kept_index.has_value());
  EXPECT_EQ(bonferroni.candidates[0].reason, DecisionReason::kNotSignificant);
}

TEST(RoundDeciderTest, NoiseBandUsesTheHeadSpreadOnTheCandidatesDeviceClass) {
  AcceptancePolicy policy = DefaultAcceptancePolicy(AcceptanceMode::kNoiseBand);
  policy.band_k = 2.0;
  policy.min_effect = 0.0;
  // Class "a": tight head runs (sd 0.001 around 1.000); class "b": wide (sd 0.01 around 1.000).
  std::vector<RunOutcome> head = Runs({0.999, 1.000, 1.001}, "a");
  for (const RunOutcome& run : Runs({0.99, 1.00, 1.01}, "b")) head.push_back(run);
  const RoundDecision d =
      DecideOk(policy, head, {{"on-a", Runs({0.997}, "a")}, {"on-b", Runs({0.997}, "b")}});
  const CandidateDecision& a = d.candidates[0];
  const CandidateDecision& b = d.candidates[1];
  EXPECT_EQ(a.head.n, 3);
  EXPECT_NEAR(*a.head.sd, 0.001, 1e-12);
  EXPECT_NEAR(*a.band, 0.002, 1e-12);
  EXPECT_TRUE(a.keep) << a.reason_text;  // 0.997 < 1.000 - 0.002
  EXPECT_NEAR(*b.band, 0.02, 1e-12);
  EXPECT_EQ(b.reason, DecisionReason::kOutsideNoiseBand) << b.reason_text;
  EXPECT_EQ(d.head.n, 6);
}

TEST(RoundDeciderTest, NoiseBandDerivedKIsThePredictionBound) {
  AcceptancePolicy policy = DefaultAcceptancePolicy(AcceptanceMode::kNoiseBand);
  policy.min_effect = 0.0;
  // Five head runs, one candidate run, 0.95, m = 1: k = t_{0.95, 4} * sqrt(1 + 1/5), with
  // t_{0.95, 4} = 2.1318468 (tables).
  const RoundDecision d =
      DecideOk(policy, Runs({0.998, 0.999, 1.000, 1.001, 1.002}), {{"c", Runs({0.990})}});
  const CandidateDecision& c = d.candidates[0];
  EXPECT_NEAR(*c.band_k, 2.1318468 * std::sqrt(1.2), 1e-6);
  EXPECT_NEAR(*c.band, *c.band_k * std::sqrt(10e-6 / 4.0), 1e-9);
  EXPECT_TRUE(c.keep);
  // The band decision and the prediction-bound p agree.
  EXPECT_LT(*c.p, 0.05);
  EXPECT_EQ(*c.df, 4.0);
  // A single head run has no spread.
  const RoundDecision thin = DecideOk(policy, Runs({1.0}), {{"c", Runs({0.9})}});
  EXPECT_EQ(thin.candidates[0].reason, DecisionReason::kInsufficientHeadReplicates);
}

TEST(RoundDeciderTest, JsonForm) {
  const RoundDecision d =
      DecideOk(Welch(), Runs(kHead),
               {{"lr", Runs({0.994, 0.995, 0.996, 0.995})}, {"nan", Runs({kNaN, kNaN})}});
  const nlohmann::json j = d.ToJson();
  EXPECT_EQ(j["mode"], "welch");
  EXPECT_EQ(j["policy"]["replicates"], 4);
  EXPECT_EQ(j["kept"], "lr");
  EXPECT_EQ(j["tested"], 1);
  EXPECT_EQ(j["head"]["n"], 4);
  EXPECT_EQ(j["summary"], d.summary);
  ASSERT_EQ(j["candidates"].size(), 2u);
  const nlohmann::json& lr = j["candidates"][0];
  EXPECT_EQ(lr["decision"], "keep");
  EXPECT_EQ(lr["reason"], "kept");
  EXPECT_NEAR(lr["stats"]["mean"].get<double>(), 0.995, 1e-12);
  EXPECT_NEAR(lr["p"].get<double>(), *d.candidates[0].p, 0.0);
  const nlohmann::json& nan = j["candidates"][1];
  EXPECT_EQ(nan["decision"], "discard");
  EXPECT_EQ(nan["reason"], "non_finite_replicate");
  EXPECT_EQ(nan["stats"]["nan_rate"], 1.0);
  EXPECT_TRUE(nan["stats"]["mean"].is_null());
  EXPECT_TRUE(nan["p"].is_null());
  // Serialisable (no NaN/inf leaks into the stored text).
  EXPECT_TRUE(nlohmann::json::accept(j.dump()));  // only that it parses
}

TEST(RoundDeciderTest, InputErrorsNameTheField) {
  RoundDecision decision;
  Status status = RoundDecider().Decide(Welch(), Runs(kHead), {{"", Runs({1.0, 1.0})}}, &decision);
  EXPECT_EQ(status.code(), Status::Code::kInvalidArgument);
  EXPECT_EQ(status.message(), "candidates[0].name: is empty");
  status = RoundDecider().Decide(Welch(), Runs(kHead), {{"a", {}}, {"a", {}}}, &decision);
  EXPECT_EQ(status.message(), "candidates[1].name: \"a\" is given twice");
  AcceptancePolicy bad = Welch();
  bad.confidence = 2.0;
  status = RoundDecider().Decide(bad, Runs(kHead), {}, &decision);
  EXPECT_EQ(status.message().rfind("acceptance policy: confidence:", 0), 0u) << status.message();
  // No candidates: nothing kept, not an error.
  EXPECT_FALSE(DecideOk(Welch(), Runs(kHead), {}).kept_index.has_value());
}

}  // namespace
}  // namespace xv::sched
