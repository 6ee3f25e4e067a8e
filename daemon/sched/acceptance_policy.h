// AcceptancePolicy: how a campaign decides whether a candidate beats its head (DESIGN.md
// § Keep/discard semantics). Stored as JSON in campaigns.policy_json; written by people and agents
// as YAML or JSON. Fields, defaults and meaning:
//
//   mode: welch | noise_band                                             (default welch)
//     welch: `replicates` runs of each candidate and `head_controls` runs of the head; keep when
//       a one-sided Welch t-test (candidate mean lower) has p < alpha and the observed
//       improvement (head mean - candidate mean) is >= min_effect. 4 + 4 runs find a 3-sigma
//       improvement in ~97% of rounds (3 + 3: ~86%, 2 + 2: ~40%; tests/unit/daemon/sched).
//     noise_band: single runs of each candidate against the spread of the head's runs on the
//       same device class: keep when candidate < head_mean - max(min_effect, k * head_sd).
//   confidence: in (0.5, 1); alpha = 1 - confidence                      (default 0.95)
//   min_effect: bpb, >= 0; the smallest improvement worth a keep          (default 0.0005)
//   replicates: runs per candidate; welch >= 2, noise_band >= 1           (default welch 4, band 1)
//   head_controls: runs of the head per round, >= 2                       (default welch 4, band 5)
//   max_keeps_per_round: only 1 (the head is one recipe)                  (default 1)
//   correction: bonferroni | none                                         (default bonferroni)
//     bonferroni tests each of the m candidates of a round at alpha / m, so that a round of m
//     zero-effect candidates moves the head with probability <= alpha; none tests each at alpha.
//   band_k: noise_band only; a fixed k > 0. When absent, k is the one-sided prediction bound
//     k = t_{1 - alpha', n_h - 1} * sqrt(1/n_c + 1/n_h)   (alpha' = alpha after correction,
//     n_h head runs, n_c candidate runs), which makes a zero-effect candidate pass with
//     probability alpha' under Gaussian noise (e.g. n_h = 5, n_c = 1, 0.95: k = 2.34).
//   max_throughput_drift: a fraction in (0, 10]                         (default 0.10)
//     the drift guard (round_drift.h): a round whose arms' mean tok/s differ from the controls'
//     by more, or whose controls' tok/s moves by more within the round, is confounded: nothing
//     is kept. Arms that change a step's work by design (step_work_knobs.h) are compared at the
//     budget as always; for them the guard looks at the controls' own drift only.
//   adjust_for_throughput: bool                                         (default false)
//     false: the keep rule uses the raw Welch test (the throughput-adjusted estimate, val_bpb
//     regressed on log steps within the round, is reported beside it); true: it uses the
//     adjusted one.
//
// Parse errors name the field ("confidence: must be in (0.5, 1), got 1.5"); YAML errors add
// "(line N, column M)". Thread-safety: plain values and pure functions.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace xv::sched {

enum class AcceptanceMode { kWelch, kNoiseBand };
enum class MultipleComparisonCorrection { kBonferroni, kNone };

struct AcceptancePolicy {
  AcceptanceMode mode = AcceptanceMode::kWelch;
  double confidence = 0.95;
  double min_effect = 0.0005;
  int replicates = 4;
  int head_controls = 4;
  int max_keeps_per_round = 1;
  MultipleComparisonCorrection correction = MultipleComparisonCorrection::kBonferroni;
  std::optional<double> band_k;  // noise_band only
  double max_throughput_drift = 0.10;
  bool adjust_for_throughput = false;
};

// The defaults of `mode` (replicates and head_controls depend on it).
AcceptancePolicy DefaultAcceptancePolicy(AcceptanceMode mode);

// "welch" / "noise_band"; "bonferroni" / "none".
const char* AcceptanceModeName(AcceptanceMode mode);
const char* CorrectionName(MultipleComparisonCorrection correction);

// Checks every range above; the message starts with the field name.
Status ValidateAcceptancePolicy(const AcceptancePolicy& policy);

// Parses a JSON object (null or {} gives the defaults). Unknown fields, wrong types and
// out-of-range values are errors naming the field. On error *policy is unchanged.
Status ParseAcceptancePolicyJson(const nlohmann::json& json, AcceptancePolicy* policy);
// Same, from JSON text (syntax errors name the byte offset).
Status ParseAcceptancePolicyJsonText(const std::string& text, AcceptancePolicy* policy);
// Same, from a YAML mapping (an empty document gives the defaults).
Status ParseAcceptancePolicyYaml(const std::string& yaml_text, AcceptancePolicy* policy);

// Every field, band_k only when set; ParseAcceptancePolicyJson(ToJson(p)) == p.
nlohmann::json AcceptancePolicyToJson(const AcceptancePolicy& policy);

}  // namespace xv::sched
