// The final verdict of a campaign round as pure functions (daemon/sched/round_verdict.h): the
// decider's keep/discard, the keep rule, the confirm and ablation summaries with their Welch tests,
// and the false-positive rate and power of the whole verdict over 200 rounds each (the numbers
// round_closer_test checks through the store).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "daemon/sched/round_verdict.h"

namespace xv::sched {
namespace {

RunOutcome Measured(double val_bpb) {
  RunOutcome r;
  r.val_bpb = val_bpb;
  return r;
}

RunOutcome Diverged() {
  RunOutcome r;
  r.diverged = true;
  return r;
}

std::vector<RunOutcome> Runs(std::initializer_list<double> values) {
  std::vector<RunOutcome> out;
  for (double v : values) out.push_back(Measured(v));
  return out;
}

AcceptancePolicy Welch95() {
  AcceptancePolicy p;
  p.min_effect = 0.0;
  return p;
}

// A head near 2.00 and one candidate near 1.90: the candidate passes clearly.
RoundInput ClearWin() {
  RoundInput in;
  in.policy = Welch95();
  in.head_runs = Runs({2.000, 2.001, 1.999, 2.002});
  in.fresh_head_runs = in.head_runs;
  in.candidates.push_back({"matrix_lr=0.05", Runs({1.900, 1.901, 1.899, 1.902})});
  return in;
}

TEST(RoundVerdict, KeepsTheDecidersChoiceUnderKeepRuleBest) {
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(ClearWin(), &v).ok());
  ASSERT_TRUE(v.kept.has_value());
  EXPECT_EQ(*v.kept, "matrix_lr=0.05");
  EXPECT_EQ(v.candidates.at("matrix_lr=0.05").decision, Decision::kKeep);
  const std::string& reason = v.candidates.at("matrix_lr=0.05").reason;
  EXPECT_EQ(reason.rfind("kept: ", 0), 0u) << reason;
  EXPECT_EQ(reason.find("kept: kept"), std::string::npos) << reason;
  EXPECT_EQ(v.summary, v.decision.summary);
  EXPECT_EQ(v.json.at("mode"), "auto");
  EXPECT_EQ(v.json.at("head_runs"), 4);
  EXPECT_EQ(v.json.at("kept"), "matrix_lr=0.05");
  EXPECT_EQ(v.json.at("candidates")[0].at("decision"), "keep");
}

TEST(RoundVerdict, KeepRuleNoneRecordsButKeepsNothing) {
  RoundInput in = ClearWin();
  in.keep_rule = KeepRule::kNone;
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_FALSE(v.kept.has_value());
  EXPECT_EQ(v.candidates.at("matrix_lr=0.05").decision, Decision::kDiscard);
  EXPECT_EQ(v.candidates.at("matrix_lr=0.05").reason,
            "record_only: passed, but this round keeps nothing");
  EXPECT_TRUE(v.json.at("kept").is_null());
  EXPECT_EQ(v.json.at("candidates")[0].at("decision"), "discard");
  EXPECT_EQ(v.json.at("candidates")[0].at("reason"), "record_only");
  EXPECT_EQ(v.summary, "record only: " + v.decision.summary);
  // The decider's statistics stay as they were: the candidate passed.
  EXPECT_TRUE(v.decision.candidates[0].passed);
}

TEST(RoundVerdict, KeepRuleNoneWithoutAPassChangesNothing) {
  RoundInput in = ClearWin();
  in.candidates[0].runs = Runs({2.0, 2.001, 1.999, 2.002});
  in.keep_rule = KeepRule::kNone;
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_FALSE(v.kept.has_value());
  EXPECT_EQ(v.summary, v.decision.summary);
  EXPECT_EQ(v.candidates.at("matrix_lr=0.05").reason.rfind("not_significant: ", 0), 0u);
}

TEST(RoundVerdict, ConfirmSummarisesTheFreshRunsAlone) {
  RoundInput in = ClearWin();
  in.kind = RoundKind::kConfirm;
  // Pooled head runs include earlier rounds; the confirm line counts this round's controls only.
  in.fresh_head_runs = Runs({1.98, 1.99, 2.00});
  in.candidates[0].runs.push_back(Diverged());
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  const nlohmann::json& c = v.json.at("confirm");
  EXPECT_EQ(c.at("head").at("n"), 3);
  EXPECT_EQ(c.at("head").at("non_finite"), 0);
  EXPECT_NEAR(c.at("head").at("mean").get<double>(), 1.99, 1e-12);
  EXPECT_NEAR(c.at("head").at("sd").get<double>(), 0.01, 1e-12);
  EXPECT_EQ(c.at("candidates").at("matrix_lr=0.05").at("n"), 4);
  EXPECT_EQ(c.at("candidates").at("matrix_lr=0.05").at("non_finite"), 1);
  EXPECT_EQ(v.summary.rfind("confirm: head 1.99000 sd 0.01000 (n=3 fresh seeds); matrix_lr=0.05 "
                            "1.90050 sd 0.00129 (n=4); ",
                            0),
            0u)
      << v.summary;
  // The diverged replicate is never kept (the decider's rule 1).
  EXPECT_FALSE(v.kept.has_value());
}

TEST(RoundVerdict, ConfirmWithoutRunsShowsADash) {
  RoundVerdict v;
  AddConfirmSummary({Diverged()}, {}, &v);
  EXPECT_EQ(v.summary, "confirm: head - (n=0 fresh seeds, 1 not finite)");
  EXPECT_TRUE(v.json.at("confirm").at("head").at("mean").is_null());
  EXPECT_TRUE(v.json.at("confirm").at("head").at("sd").is_null());
}

TEST(RoundVerdict, AblationSaysWhichChangesMatter) {
  RoundInput in;
  in.kind = RoundKind::kAblation;
  in.policy = Welch95();
  in.policy.min_effect = 0.01;
  in.head_runs = Runs({2.000, 2.001, 1.999, 2.002});
  in.fresh_head_runs = in.head_runs;
  in.candidates.push_back({"-matrix_lr", Runs({2.100, 2.101, 2.099, 2.102})});  // much worse
  in.candidates.push_back({"-warmup", Runs({2.001, 2.000, 2.002, 1.999})});     // the same
  in.candidates.push_back({"-depth", Runs({2.5})});                             // too few runs
  in.candidates.push_back({"-lr", {Measured(2.0), Diverged()}});                // non-finite
  in.candidates.push_back({"-small", Runs({2.006, 2.007, 2.005, 2.008})});  // worse < min_effect
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_EQ(v.summary.rfind("ablation: matters: matrix_lr, lr; no effect (may be dropped): warmup, "
                            "small; unknown: depth; ",
                            0),
            0u)
      << v.summary;
  const nlohmann::json& a = v.json.at("ablation");
  ASSERT_EQ(a.size(), 5u);
  EXPECT_EQ(a[0].at("knob"), "matrix_lr");
  EXPECT_EQ(a[0].at("effect"), "matters");
  EXPECT_NEAR(a[0].at("worse_by").get<double>(), 0.1, 1e-9);
  EXPECT_LT(a[0].at("p").get<double>(), 0.05);
  EXPECT_EQ(a[1].at("effect"), "no_effect");
  EXPECT_GT(a[1].at("p").get<double>(), 0.05);
  EXPECT_EQ(a[2].at("effect"), "unknown");
  EXPECT_FALSE(a[2].contains("p"));
  EXPECT_EQ(a[3].at("effect"), "matters");
  EXPECT_FALSE(a[3].contains("worse_by"));
  EXPECT_EQ(a[4].at("effect"), "no_effect");  // significant, but below min_effect
  EXPECT_LT(a[4].at("p").get<double>(), 0.05);
  const std::string& reason = v.candidates.at("-matrix_lr").reason;
  EXPECT_NE(reason.find("; ablation: matters: dropping it is worse by 0.10000 (p="),
            std::string::npos)
      << reason;
  EXPECT_NE(v.candidates.at("-lr").reason.find("; ablation: matters: dropping it gave 1 "
                                               "non-finite run(s)"),
            std::string::npos);
  EXPECT_NE(v.candidates.at("-depth").reason.find("; ablation: unknown: fewer than 2 finite runs"),
            std::string::npos);
  EXPECT_NE(v.candidates.at("-warmup").reason.find(": may be dropped"), std::string::npos);
  // Dropping a knob that makes things worse never moves the head.
  EXPECT_FALSE(v.kept.has_value());
}

TEST(RoundVerdict, AblationOfANameWithoutADashUsesTheNameAsTheKnob) {
  FiniteSummary head = SummarizeFinite(Runs({2.0, 2.0}));
  AblationFinding f = AssessDroppedKnob(Welch95(), head, {"-", Runs({2.0, 2.0})});
  EXPECT_EQ(f.knob, "-");
  f = AssessDroppedKnob(Welch95(), head, {"x", Runs({2.0, 2.0})});
  EXPECT_EQ(f.knob, "x");
  EXPECT_EQ(f.effect, KnobEffect::kNoEffect);
}

TEST(RoundVerdict, DeciderErrorsPassThrough) {
  RoundInput in = ClearWin();
  in.candidates.push_back({"", {}});
  RoundVerdict v;
  const Status s = DecideRound(in, &v);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("candidates[1].name"), std::string::npos) << s.message();
}

// The whole verdict on the runs of a scripted trainer: head 4 runs and one candidate of 4
// replicates, every run 2 + effect + N(0, sigma); welch at 0.95, min_effect 0.
bool RoundKept(double effect, double sigma, std::mt19937* rng) {
  std::normal_distribution<double> noise(0.0, sigma);
  RoundInput in;
  in.policy = Welch95();
  for (int i = 0; i < 4; ++i) in.head_runs.push_back(Measured(2.0 + noise(*rng)));
  in.fresh_head_runs = in.head_runs;
  CandidateRuns c{"matrix_lr=0.05", {}};
  for (int i = 0; i < 4; ++i) c.runs.push_back(Measured(2.0 + effect + noise(*rng)));
  in.candidates.push_back(c);
  RoundVerdict v;
  EXPECT_TRUE(DecideRound(in, &v).ok());
  return v.kept.has_value();
}

TEST(RoundVerdict, FalsePositiveRateAndPowerOver200RoundsEach) {
  constexpr int kRounds = 200;
  constexpr double kSigma = 0.001;
  std::mt19937 rng(20261130);
  int zero_kept = 0, better_kept = 0;
  for (int i = 0; i < kRounds; ++i) zero_kept += RoundKept(0.0, kSigma, &rng);
  for (int i = 0; i < kRounds; ++i) better_kept += RoundKept(-3 * kSigma, kSigma, &rng);
  const double fp = static_cast<double>(zero_kept) / kRounds;
  const double power = static_cast<double>(better_kept) / kRounds;
  std::printf("zero-effect candidate kept in %d/%d rounds (%.3f; policy alpha 0.05)\n", zero_kept,
              kRounds, fp);
  std::printf("3-sigma better candidate kept in %d/%d rounds (%.3f)\n", better_kept, kRounds,
              power);
  // alpha + 3 binomial standard deviations at n = 200.
  EXPECT_LE(fp, 0.05 + 3 * std::sqrt(0.05 * 0.95 / kRounds));
  EXPECT_GE(power, 0.90);
}

}  // namespace
}  // namespace xv::sched
