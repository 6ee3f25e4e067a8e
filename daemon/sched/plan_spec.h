// PlanSpec: a plan is a YAML list of phases that xvd runs as successive rounds of one campaign,
// each phase built from the head the previous phase left (docs/plans.md). This file parses and
// validates the YAML and expands a phase into its candidates; the daemon's PlanRunner runs it.
//
//   name: lr-night                     # required: letters, digits, - _ . (at most 100)
//   campaign: tiny-lr                  # required: the campaign the rounds belong to
//   create:                            # optional: used when the campaign does not exist yet
//     recipe: recipes/cpu-tiny.yaml    #   required in create: a recipe file (xvctl sends its text)
//     policy: recipes/policies/welch-95.yaml  # a policy file, or an inline mapping; default:
//     defaults device_filter: cpu               #   optional trainer: libtorch                #
//     optional
//   phases:                            # required, 1..64 phases
//     - name: matrix-lr                # optional; default "phase-N" (1-based)
//       kind: sweep                    # sweep | candidates | ablation | confirm | failure_map
//       sweep: {matrix_lr: [0.03, 0.05]}        # sweep: knob -> values; several knobs: cartesian
//       candidates: [{matrix_lr: 0.05, embedding_lr: 0.4}]  # candidates: override sets
//       seeds: 3                       # confirm: fresh seeds for the head (required, 1..64)
//       candidate: {matrix_lr: 0.05}   # confirm: optional override set re-run beside the head
//       failure_map: {knob: matrix_lr, values: [0.04, 0.08, 0.16]}  # ascending; one run each
//       replicates: 4                  # optional: runs per candidate (the policy's are a minimum)
//       stop_if: no_keep               # optional: end the plan when this phase keeps nothing
//
// Every error names its YAML path: "phases[2].sweep.matrix_lr[1]: matrix_lr: expected a number,
// got 'abc'". Unknown keys are errors. Knob names and values are checked against the recipe knob
// table (common/recipe_knobs.h), one knob at a time (combinations depend on the head and are
// checked when the phase's round is built). Thread-safety: plain values and pure functions.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "common/status.h"

namespace xv::sched {

// (knob, YAML value text) pairs, e.g. {"matrix_lr", "0.05"}, {"adam_betas", "[0.8, 0.95]"}.
using PlanOverrides = std::vector<std::pair<std::string, std::string>>;

enum class PlanPhaseKind { kSweep, kCandidates, kAblation, kConfirm, kFailureMap };

// "sweep", "candidates", "ablation", "confirm", "failure_map".
const char* PlanPhaseKindName(PlanPhaseKind kind);

struct PlanPhase {
  std::string name;
  PlanPhaseKind kind = PlanPhaseKind::kSweep;
  // sweep: knob -> values, in the YAML's order.
  std::vector<std::pair<std::string, std::vector<std::string>>> sweep;
  // candidates: one override set each. confirm: at most one (the optional `candidate`).
  std::vector<PlanOverrides> candidates;
  int seeds = 0;  // confirm
  // failure_map: the knob and its values, ascending.
  std::string failure_knob;
  std::vector<std::string> failure_values;
  int replicates = 0;  // 0: the policy's
  bool stop_if_no_keep = false;
};

struct PlanCreate {
  bool set = false;
  std::string recipe_path;  // as written in the YAML
  std::string policy_path;  // a file name ("" when inline or absent)
  std::string policy_yaml;  // the inline mapping as YAML text ("" when a path or absent)
  std::string device_filter;
  std::string trainer;
};

struct PlanSpec {
  std::string name;
  std::string campaign;
  PlanCreate create;
  std::vector<PlanPhase> phases;
};

// Parses and validates plan YAML text. On error *out is unchanged.
Status ParsePlanYaml(const std::string& yaml_text, PlanSpec* out);

// The candidates of a sweep (cartesian product, first knob varying slowest), candidates or
// failure_map phase (one per value, ascending), or a confirm phase's optional candidate. Empty
// for ablation and for confirm without a candidate (the daemon builds those from the campaign).
std::vector<PlanOverrides> ExpandPhaseCandidates(const PlanPhase& phase);

// "matrix_lr=0.05,embedding_lr=0.4": the default candidate name, as Submit names candidates.
std::string JoinPlanOverrides(const PlanOverrides& overrides);

}  // namespace xv::sched
