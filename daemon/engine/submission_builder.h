// SubmissionBuilder: turns a Submit request into the rows to store, validating everything first.
//
// The base recipe YAML is parsed with common/recipe.h; each candidate applies its overrides in
// order; every candidate is validated, resolved and hashed before anything is stored. Errors are
// InvalidArgument and name the field and the candidate ("candidate 2 (matrix_lr=-1): matrix_lr:
// ..."). Rules:
//  - no candidates: one candidate, the base recipe itself (named "base");
//  - replicates r = 0..N-1 of a candidate get seeds seed, seed+1, ... (seed = the candidate's
//  seed);
//  - a candidate whose resolved config equals the base's is a no-op and refused, unless the base is
//    itself a candidate (a candidate without overrides); two candidates with one resolved config
//    are refused as duplicates;
//  - bounds: recipe text <= 64 KiB, <= 256 candidates, <= 64 replicates, <= 64 overrides each,
//    <= 4096 runs (candidates x replicates + head controls);
//  - a recipe with device "cuda" requires a GPU worker; cpu/auto recipes run anywhere;
//  - hard deadline = time budget + startup allowance + eval allowance of the campaign's budget
//    contract (daemon/engine/budget_contract.h; default 2 x time budget + 300 s); a contract that
//    fixes time_budget_s refuses a recipe or candidate with another time budget.
// Thread-safety: stateless.
#pragma once

#include "common/recipe.h"
#include "common/status.h"
#include "daemon/engine/budget_contract.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon {

struct SubmissionLimits {
  size_t max_recipe_bytes = 64 * 1024;
  int max_candidates = 256;
  int max_replicates = 64;
  int max_overrides = 64;
  // Runs (experiment rows) of one submission: candidates x replicates + head controls. 4096 is
  // e.g. 256 candidates x 16 replicates; the rows are made visible in one transaction
  // (Store::InsertSubmission), so this also bounds how long that holds the store.
  int max_runs = 4096;
};

// The candidates' own sources of one submission, in all (issue 16): each is at most
// store::kMaxSourceBytes; a submission of many distinct files is split by the caller.
inline constexpr size_t kMaxSubmissionSourceBytes = 8 * 1024 * 1024;

// The train.py sources of a round (code candidates, issue 16; docs/autoresearch.md § Code
// candidates). A candidate's `source` (the whole file) or `patch` (a unified diff applied to
// patch_base_text, common/unified_diff.h) becomes its source; a candidate with neither runs the
// base's. A run with a source is another config than the same recipe without one: its
// recipe_hash and config_hash are CodeIdentityHash of the recipe's hashes and the source's
// sha256, so two identical sources are one config (replicates, duplicates, no-ops and reuse work
// as for knobs). Only trainers other than libtorch take a source.
struct RoundSources {
  std::string base_sha256, base_text;  // the round's base recipe's source ("": configured file)
  // What a patch applies to: the base's source when it has one (a kept code candidate is the
  // head), else the trainer's registered source (SourceTable::FindTrainerSource). "" sha256:
  // none is known, and a patch is refused with FAILED_PRECONDITION.
  std::string patch_base_sha256, patch_base_text;
  std::string patch_base_label;  // for errors: "trainer my-fork's registered source"
};

// The identity of a recipe hash combined with a source: `recipe_hash` itself when
// `source_sha256` is empty, else the hex SHA-256 of "<recipe_hash>+source:<source_sha256>".
std::string CodeIdentityHash(const std::string& recipe_hash, const std::string& source_sha256);

// What the campaign's acceptance policy adds to a round (0 = nothing).
struct RoundPlan {
  int replicates = 0;          // > 0 overrides req.replicates
  int head_controls = 0;       // runs of the base (the head) config, seeds seed, seed+1, ...
  int64_t seed_offset = 0;     // added to every seed (confirm rounds: fresh seeds)
  bool controls_only = false;  // no candidates in the request: only the head controls run
  BudgetContract budget;       // the campaign's budget contract (deadlines, fixed time budget)
  RoundSources sources;        // code candidates: the base's source and a patch's base
};

// What a round built from a campaign needs beyond the request.
struct CampaignRoundOptions {
  int64_t plan_id = 0;  // the plan phase the round is built for (0: none)
  int plan_phase = 0;
  // A failure-map phase: one run per candidate, no head controls, nothing kept (keep_rule none).
  bool failure_map = false;
  // The seed of the round's run order; 0: a fresh one (sched::NewOrderSeed). Tests pin it.
  uint64_t order_seed = 0;
};

// Builds the rows of a Submit: candidates from req.recipe_yaml, or (when empty) from the named
// campaign's head; a campaign with a policy adds its replicates (a minimum) and head controls.
// Kinds built by the daemon from the campaign (recipe_yaml must be empty):
//  - ablation (req.candidates empty): one candidate per knob where the head differs from the
//    campaign's base recipe, the head with that knob reset to its base value, named "-knob";
//    head controls as the policy says. InvalidArgument when the head equals the base.
//  - confirm: req.replicates = k >= 1 fresh seeds (larger than any seed the campaign has run):
//    k head controls plus, when candidates are given, k runs of each. With no policy the round
//    is stored but not decided.
// Issue 14: a round with head controls gets a run order (sched/run_order.h: randomised blocks,
// seeded with options.order_seed or a fresh seed, recorded on the round), which the dispatcher
// follows. A round of a campaign with a policy (not a failure map) reuses no earlier result:
// its arms all run fresh. Rounds without a policy and failure maps reuse an identical earlier run
// of the campaign, and the reused rows say why (experiments.reuse_reason).
// Used by ExperimentsService::Submit and by plans (PlanRunner), so both validate, reuse results
// and refuse no-ops the same way. `store` is read only.
Status BuildCampaignRound(store::Store* store, const xv::v1::SubmitRequest& req,
                          const SubmissionLimits& limits, const CampaignRoundOptions& options,
                          store::NewSubmission* out);

// Drop-one ablation of `head` against `base`: for every knob but seed whose value differs, a
// candidate that resets it to the base value (name "-knob", one override knob=<base value>).
// A reset that makes the recipe invalid (knobs that must move together) is left out and
// described in *skipped ("-n_kv_head: ..."). Knob table order.
void BuildAblationCandidates(const Recipe& head, const Recipe& base,
                             std::vector<xv::v1::Candidate>* out,
                             std::vector<std::string>* skipped);

// Validates `req` against an already parsed base recipe (the campaign head, or the request's
// recipe) and fills `out` as BuildSubmission does, plus `plan.head_controls` control runs of the
// base config (name "head", role control). `base_label` prefixes base errors ("recipe: ").
// req.kind must be "" (candidates), candidates, sweep, ablation or confirm.
Status BuildSubmissionFromBase(const xv::v1::SubmitRequest& req, const Recipe& base,
                               const RoundPlan& plan, const SubmissionLimits& limits,
                               store::NewSubmission* out);

// Sets run_order and run_block of every row of `sub` (its arms: each candidate name and the
// controls "head", in the order their rows were added) and sub->order_seed = seed.
void AssignRunOrder(uint64_t seed, store::NewSubmission* sub);

// The hash that identifies a config regardless of its seed (experiments.config_hash).
std::string ConfigHashWithoutSeed(const Recipe& r);

// Validates `req` and fills `out` (campaign, trainer, base recipe, one NewExperiment per replicate
// of each candidate). `out` is untouched when the result is not ok.
Status BuildSubmission(const xv::v1::SubmitRequest& req, const SubmissionLimits& limits,
                       store::NewSubmission* out);

// The hard deadline the worker enforces for a time budget under the default contract.
double HardDeadlineSeconds(double time_budget_s);

}  // namespace xv::daemon
