// RoundDrift: how much a round's throughput moved while it ran, and whether that confounds its
// comparison (issue 14). Under a fixed time budget fewer tok/s means fewer steps and a worse
// val_bpb, so a load that comes and goes on the machine (another job, clocks, heat) can make a
// zero-effect candidate look better or worse than the controls. The round's arms run interleaved
// (run_order.h), which makes drift fall on every arm alike in expectation; these figures say how
// much there was and the guard refuses to keep anything when it was too much:
//  - per arm (the controls "head", then each candidate): tok/s and steps, mean and sd, and the
//    arm's mean tok/s relative to the controls' ((arm - controls) / controls);
//  - the controls' tok/s trend: the least-squares line of their tok/s over their start times,
//    its change across the round's span (first to last start of any run) relative to their mean;
//  - the controls' tok/s spread: their sd relative to their mean (a load that comes and goes
//    several times within the round moves no trend but spreads the controls);
//  - corr(val_bpb, tok/s) within the controls (Pearson; needs 3 runs with spread in both).
// The guard (CheckThroughputDrift): a round is confounded when an arm that does not change a
// step's work by design (step_work_knobs.h) differs from the controls' mean tok/s by more than
// max_throughput_drift, or when the controls' trend or their spread is more than that. Missing
// figures (runs without tok/s, a single control) are reported as null and never confound.
//
// The throughput-adjusted estimate (FitStepsSlope): val_bpb regressed on log(steps) within the
// controls gives the slope b; a run's adjusted val_bpb is val_bpb - b * (log(steps) - the
// controls' mean log(steps)). It needs >= 3 controls whose steps differ.
// Thread-safety: stateless; pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace xv::sched {

// One finished run of the round with what it measured (NaN: not measured).
struct DriftRun {
  int64_t experiment_id = 0;
  std::string arm;  // the candidate's name, or "head" for a control
  bool control = false;
  double val_bpb = std::numeric_limits<double>::quiet_NaN();  // NaN when none or not finite
  double tok_per_sec = std::numeric_limits<double>::quiet_NaN();
  double steps = std::numeric_limits<double>::quiet_NaN();
  double started_s = std::numeric_limits<double>::quiet_NaN();  // one clock for the round
};

struct ArmDrift {
  std::string arm;
  bool control = false;
  bool step_work_by_design = false;  // changes a step's work (not compared by the guard)
  int n = 0;                         // runs with a tok/s
  std::optional<double> tok_per_sec_mean, tok_per_sec_sd, steps_mean, steps_sd;
  std::optional<double> vs_controls;  // (arm mean tok/s - controls mean) / controls mean
};

struct RoundDrift {
  std::vector<ArmDrift> arms;                      // the controls first, then candidates as given
  std::optional<double> span_s;                    // first to last start of the round's runs
  std::optional<double> controls_trend;            // fitted change over the span / controls' mean
  std::optional<double> controls_spread;           // the controls' tok/s sd / their mean
  std::optional<double> corr_val_bpb_tok_per_sec;  // within the controls
  std::optional<double> max_arm_gap;  // largest |vs_controls| of arms not changed by design

  // {"arms": [{arm, control, step_work_by_design, n, tok_per_sec_mean, tok_per_sec_sd,
  //  steps_mean, steps_sd, vs_controls}], "span_s", "controls_trend", "controls_spread",
  //  "corr_val_bpb_tok_per_sec", "max_arm_gap"}; a figure that cannot be computed is null.
  nlohmann::json ToJson() const;
};

// Measures the drift of `runs`; `step_work_arms` names the candidates that change a step's work.
RoundDrift MeasureRoundDrift(const std::vector<DriftRun>& runs,
                             const std::set<std::string>& step_work_arms);

struct DriftVerdict {
  bool confounded = false;
  std::string reason;  // why, with the figures ("controls' tok/s moved -23.1% within the round...")
};

// The guard above, at `max_drift` (a fraction, e.g. 0.10).
DriftVerdict CheckThroughputDrift(const RoundDrift& drift, double max_drift);

// One line for people: "tok/s head 1200 sd 10, a 1180 sd 12 (-1.7%); controls' trend -0.4% over
// 12 s; corr(val_bpb, tok/s) -0.97".
std::string DescribeDrift(const RoundDrift& drift);

struct StepsSlope {
  double slope = 0.0;           // d val_bpb / d log(steps), from the controls
  double mean_log_steps = 0.0;  // the controls' mean log(steps)
  int n = 0;                    // controls used
};

// The slope above; empty with fewer than 3 controls with finite val_bpb and steps > 0, or when
// their steps do not differ.
std::optional<StepsSlope> FitStepsSlope(const std::vector<DriftRun>& runs);

// val_bpb - slope * (log(steps) - mean_log_steps); val_bpb unchanged when steps is not > 0.
double ThroughputAdjustedValBpb(const StepsSlope& fit, double val_bpb, double steps);

}  // namespace xv::sched
