// The drift figures, the drift guard and the throughput-adjusted estimate of a round
// (daemon/sched/round_drift.h), and how the round's verdict uses them (round_verdict.h).
#include "daemon/sched/round_drift.h"

#include <gtest/gtest.h>

#include <cmath>

#include "daemon/sched/acceptance_policy.h"
#include "daemon/sched/round_verdict.h"
#include "daemon/sched/step_work_knobs.h"

namespace xv::sched {
namespace {

DriftRun MakeRun(int64_t id, const std::string& arm, double bpb, double tok, double steps,
                 double t) {
  DriftRun r;
  r.experiment_id = id;
  r.arm = arm;
  r.control = arm == "head";
  r.val_bpb = bpb;
  r.tok_per_sec = tok;
  r.steps = steps;
  r.started_s = t;
  return r;
}

TEST(RoundDriftTest, MeasuresArmsTrendAndCorrelation) {
  const std::vector<DriftRun> runs = {
      MakeRun(1, "head", 1.00, 1000, 100, 0), MakeRun(2, "a", 1.00, 1000, 100, 1),
      MakeRun(3, "head", 1.01, 900, 90, 2),   MakeRun(4, "a", 1.01, 900, 90, 3),
      MakeRun(5, "head", 1.02, 800, 80, 4),   MakeRun(6, "a", 1.02, 800, 80, 5),
  };
  const RoundDrift d = MeasureRoundDrift(runs, {});
  ASSERT_EQ(d.arms.size(), 2u);
  EXPECT_EQ(d.arms[0].arm, "head");
  EXPECT_NEAR(*d.arms[0].tok_per_sec_mean, 900, 1e-9);
  EXPECT_NEAR(*d.arms[0].tok_per_sec_sd, 100, 1e-9);
  EXPECT_NEAR(*d.arms[0].steps_mean, 90, 1e-9);
  EXPECT_NEAR(*d.arms[1].vs_controls, 0.0, 1e-12);
  EXPECT_NEAR(*d.span_s, 5, 1e-12);
  // Slope -50 tok/s per s over a 5 s span, relative to 900.
  EXPECT_NEAR(*d.controls_trend, -250.0 / 900.0, 1e-9);
  EXPECT_NEAR(*d.corr_val_bpb_tok_per_sec, -1.0, 1e-9);
  EXPECT_NEAR(*d.controls_spread, 100.0 / 900.0, 1e-9);
  const DriftVerdict v = CheckThroughputDrift(d, 0.10);
  EXPECT_TRUE(v.confounded);
  EXPECT_NE(v.reason.find("controls' tok/s moved -27.8%"), std::string::npos) << v.reason;
  EXPECT_FALSE(CheckThroughputDrift(d, 0.5).confounded);
  const nlohmann::json j = d.ToJson();
  EXPECT_EQ(j["arms"][1]["arm"], "a");
  EXPECT_TRUE(j["max_arm_gap"].is_number());
  EXPECT_NE(DescribeDrift(d).find("corr(val_bpb, tok/s) -1.00"), std::string::npos)
      << DescribeDrift(d);
}

TEST(RoundDriftTest, AnArmOffTheControlsConfoundsUnlessItChangesStepWorkByDesign) {
  const std::vector<DriftRun> runs = {
      MakeRun(1, "head", 1.0, 1000, 100, 0),
      MakeRun(2, "slow", 1.0, 800, 80, 1),
      MakeRun(3, "head", 1.0, 1000, 100, 2),
      MakeRun(4, "slow", 1.0, 800, 80, 3),
  };
  const RoundDrift d = MeasureRoundDrift(runs, {});
  EXPECT_NEAR(*d.arms[1].vs_controls, -0.2, 1e-12);
  EXPECT_NEAR(*d.max_arm_gap, 0.2, 1e-12);
  const DriftVerdict v = CheckThroughputDrift(d, 0.10);
  EXPECT_TRUE(v.confounded);
  EXPECT_NE(v.reason.find("slow's mean tok/s is -20.0% off the controls'"), std::string::npos)
      << v.reason;
  const RoundDrift by_design = MeasureRoundDrift(runs, {"slow"});
  EXPECT_TRUE(by_design.arms[1].step_work_by_design);
  EXPECT_FALSE(by_design.max_arm_gap.has_value());
  EXPECT_FALSE(CheckThroughputDrift(by_design, 0.10).confounded);
}

TEST(RoundDriftTest, ALoadThatComesAndGoesSpreadsTheControlsAndConfounds) {
  // No trend (fast, slow, slow, fast) and the arms alike, but the controls' tok/s spread is 38 %.
  const std::vector<DriftRun> runs = {
      MakeRun(1, "head", 1.0, 1000, 100, 0), MakeRun(2, "a", 1.0, 1000, 100, 0),
      MakeRun(3, "head", 1.0, 500, 50, 1),   MakeRun(4, "a", 1.0, 500, 50, 1),
      MakeRun(5, "head", 1.0, 500, 50, 2),   MakeRun(6, "a", 1.0, 500, 50, 2),
      MakeRun(7, "head", 1.0, 1000, 100, 3), MakeRun(8, "a", 1.0, 1000, 100, 3),
  };
  const RoundDrift d = MeasureRoundDrift(runs, {});
  EXPECT_NEAR(*d.controls_trend, 0.0, 1e-12);
  EXPECT_NEAR(*d.arms[1].vs_controls, 0.0, 1e-12);
  EXPECT_NEAR(*d.controls_spread, std::sqrt(250000.0 / 3) / 750.0, 1e-9);
  const DriftVerdict v = CheckThroughputDrift(d, 0.10);
  EXPECT_TRUE(v.confounded);
  EXPECT_NE(v.reason.find("the controls' tok/s spread (sd) is 38.5% of their mean"),
            std::string::npos)
      << v.reason;
}

TEST(RoundDriftTest, MissingFiguresAreNullAndNeverConfound) {
  const std::vector<DriftRun> runs = {MakeRun(1, "head", 1.0, NAN, NAN, NAN),
                                      MakeRun(2, "a", 1.0, NAN, NAN, NAN)};
  const RoundDrift d = MeasureRoundDrift(runs, {});
  EXPECT_FALSE(d.arms[0].tok_per_sec_mean.has_value());
  EXPECT_FALSE(d.controls_trend.has_value());
  EXPECT_FALSE(d.corr_val_bpb_tok_per_sec.has_value());
  EXPECT_FALSE(CheckThroughputDrift(d, 0.10).confounded);
  EXPECT_TRUE(d.ToJson()["controls_trend"].is_null());
}

TEST(RoundDriftTest, StepsSlopeComesFromTheControlsAndAdjustsToTheirMeanSteps) {
  // val_bpb = 2 - 0.1 log(steps) exactly.
  std::vector<DriftRun> runs;
  for (int i = 0; i < 4; ++i) {
    const double steps = 50 + 10 * i;
    runs.push_back(MakeRun(i + 1, "head", 2 - 0.1 * std::log(steps), 10 * steps, steps, i));
  }
  runs.push_back(MakeRun(9, "a", 2.5, 1, 1, 0));  // a candidate does not move the slope
  const std::optional<StepsSlope> fit = FitStepsSlope(runs);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->slope, -0.1, 1e-9);
  EXPECT_EQ(fit->n, 4);
  const double at_mean = std::exp(fit->mean_log_steps);
  EXPECT_NEAR(ThroughputAdjustedValBpb(*fit, 2 - 0.1 * std::log(50.0), 50),
              2 - 0.1 * std::log(at_mean), 1e-9);
  EXPECT_EQ(ThroughputAdjustedValBpb(*fit, 1.5, 0), 1.5);
  // Equal steps give no slope.
  for (DriftRun& r : runs) r.steps = 70;
  EXPECT_FALSE(FitStepsSlope(runs).has_value());
}

TEST(RoundDriftTest, StepWorkKnobsAreOneList) {
  EXPECT_TRUE(IsStepWorkKnob("depth"));
  EXPECT_TRUE(IsStepWorkKnob("device_batch_size"));
  EXPECT_TRUE(IsStepWorkKnob("sequence_len"));
  EXPECT_TRUE(IsStepWorkKnob("train_sequence_len"));  // the attention span of a training row
  EXPECT_TRUE(IsStepWorkKnob("attention_backend"));
  EXPECT_FALSE(IsStepWorkKnob("matrix_lr"));
  EXPECT_FALSE(IsStepWorkKnob("warmdown_ratio"));
}

TEST(RoundDriftTest, PolicyFieldsParseValidateAndRoundTrip) {
  AcceptancePolicy p;
  EXPECT_DOUBLE_EQ(p.max_throughput_drift, 0.10);
  EXPECT_FALSE(p.adjust_for_throughput);
  ASSERT_TRUE(
      ParseAcceptancePolicyYaml("max_throughput_drift: 0.2\nadjust_for_throughput: true\n", &p)
          .ok());
  EXPECT_DOUBLE_EQ(p.max_throughput_drift, 0.2);
  EXPECT_TRUE(p.adjust_for_throughput);
  AcceptancePolicy again;
  ASSERT_TRUE(ParseAcceptancePolicyJson(AcceptancePolicyToJson(p), &again).ok());
  EXPECT_DOUBLE_EQ(again.max_throughput_drift, 0.2);
  EXPECT_TRUE(again.adjust_for_throughput);
  Status s = ParseAcceptancePolicyYaml("max_throughput_drift: 0\n", &p);
  EXPECT_EQ(s.message().rfind("max_throughput_drift: must be a fraction in (0, 10]", 0), 0u)
      << s.message();
  s = ParseAcceptancePolicyYaml("max_throughput_drift: fast\n", &p);
  EXPECT_EQ(s.message().rfind("max_throughput_drift: must be a number", 0), 0u) << s.message();
  s = ParseAcceptancePolicyYaml("adjust_for_throughput: 3\n", &p);
  EXPECT_EQ(s.message().rfind("adjust_for_throughput: must be true or false", 0), 0u)
      << s.message();
}

// A round input of 4 controls and 4 runs of candidate "a" with the given figures.
RoundInput Input(const std::vector<double>& head_bpb, const std::vector<double>& head_tok,
                 const std::vector<double>& a_bpb, const std::vector<double>& a_tok) {
  RoundInput in;
  in.candidates.push_back({"a", {}});
  for (size_t i = 0; i < head_bpb.size(); ++i) {
    RunOutcome h{static_cast<int64_t>(10 + i), head_bpb[i], false, ""};
    in.head_runs.push_back(h);
    in.fresh_head_runs.push_back(h);
    in.drift_runs.push_back(
        MakeRun(h.experiment_id, "head", head_bpb[i], head_tok[i], head_tok[i] / 10, 2.0 * i));
    RunOutcome c{static_cast<int64_t>(20 + i), a_bpb[i], false, ""};
    in.candidates[0].runs.push_back(c);
    in.drift_runs.push_back(
        MakeRun(c.experiment_id, "a", a_bpb[i], a_tok[i], a_tok[i] / 10, 2.0 * i + 1));
  }
  return in;
}

TEST(RoundDriftTest, AConfoundedRoundKeepsNothingAndSaysWhy) {
  // The candidate is much better, but ran 30 % faster than the controls.
  RoundInput in = Input({1.10, 1.101, 1.099, 1.10}, {1000, 1000, 1000, 1000},
                        {1.00, 1.001, 0.999, 1.00}, {1300, 1300, 1300, 1300});
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_TRUE(v.confounded);
  EXPECT_FALSE(v.kept.has_value());
  EXPECT_EQ(v.candidates["a"].decision, Decision::kDiscard);
  EXPECT_EQ(v.candidates["a"].reason.rfind("confounded: ", 0), 0u) << v.candidates["a"].reason;
  EXPECT_NE(v.candidates["a"].reason.find("kept"), std::string::npos) << "the test's own word";
  EXPECT_EQ(v.summary.rfind("confounded: ", 0), 0u) << v.summary;
  EXPECT_TRUE(v.json["kept"].is_null());
  EXPECT_TRUE(v.json["confounded"].is_string());
  EXPECT_TRUE(v.json["drift"]["arms"].is_array());

  // The same figures without the speed difference: kept.
  in = Input({1.10, 1.101, 1.099, 1.10}, {1000, 1000, 1000, 1000}, {1.00, 1.001, 0.999, 1.00},
             {1000, 1000, 1000, 1000});
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_FALSE(v.confounded);
  ASSERT_TRUE(v.kept.has_value());
  EXPECT_FALSE(v.json.contains("confounded"));
}

TEST(RoundDriftTest, AStepWorkCandidateIsComparedAtTheBudgetAndTheReasonSaysSpeed) {
  RoundInput in = Input({1.10, 1.101, 1.099, 1.10}, {1000, 1000, 1000, 1000},
                        {1.00, 1.001, 0.999, 1.00}, {1300, 1300, 1300, 1300});
  in.step_work_knobs["a"] = "device_batch_size";
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_FALSE(v.confounded);
  ASSERT_TRUE(v.kept.has_value());
  EXPECT_NE(v.candidates["a"].reason.find("the difference includes speed (device_batch_size"),
            std::string::npos)
      << v.candidates["a"].reason;
  // The controls' own drift still confounds it.
  in = Input({1.10, 1.101, 1.099, 1.10}, {1000, 950, 800, 700}, {1.00, 1.001, 0.999, 1.00},
             {1300, 1300, 1300, 1300});
  in.step_work_knobs["a"] = "device_batch_size";
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_TRUE(v.confounded) << v.summary;
}

TEST(RoundDriftTest, TheAdjustedEstimateIsReportedAndDecidesOnlyWhenAsked) {
  // Controls: val_bpb follows log steps (slope -0.2); the candidate ran at the same mean speed,
  // a zero effect, but its figures are where the controls' line puts them.
  const std::vector<double> tok = {1000, 960, 1040, 1000};
  std::vector<double> head, cand;
  for (double t : tok) head.push_back(1.5 - 0.2 * std::log(t / 10));
  for (double t : tok) cand.push_back(1.5 - 0.2 * std::log(t / 10) + 1e-4);
  RoundInput in = Input(head, tok, cand, tok);
  RoundVerdict v;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_EQ(v.json["decided_on"], "raw");
  ASSERT_TRUE(v.json["throughput_adjusted"]["slope"].is_number())
      << v.json["throughput_adjusted"].dump();
  EXPECT_NEAR(v.json["throughput_adjusted"]["slope"].get<double>(), -0.2, 1e-6);
  EXPECT_EQ(v.json["throughput_adjusted"]["candidates"][0]["name"], "a");
  in.policy.adjust_for_throughput = true;
  ASSERT_TRUE(DecideRound(in, &v).ok());
  EXPECT_EQ(v.json["decided_on"], "throughput_adjusted");
  EXPECT_FALSE(v.kept.has_value());
}

}  // namespace
}  // namespace xv::sched
