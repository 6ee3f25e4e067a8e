#include "daemon/engine/submission_builder.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/bounded_json_or_discarded.h"
#include "common/recipe.h"
#include "common/recipe_knobs.h"
#include "common/run_states.h"
#include "common/sha256.h"
#include "common/unified_diff.h"
#include "common/untrusted_text.h"
#include "daemon/engine/campaign_policy.h"
#include "daemon/sched/run_order.h"
#include "daemon/store/source_table.h"

namespace xv::daemon {
namespace {

std::string JoinOverrides(const xv::v1::Candidate& c) {
  std::string s;
  for (const auto& o : c.overrides()) {
    if (!s.empty()) s += ",";
    s += o.key() + "=" + o.value();
  }
  return s;
}

// The fields of one run that follow from its seeded recipe and its source (`source_sha256`, ""
// for the configured file): identity hashes, recipe JSON, device requirement, time budget and
// the budget contract's hard deadline. `label` prefixes errors.
Status FillExperimentRun(const Recipe& rr, const BudgetContract& budget, const std::string& label,
                         const std::string& source_sha256, store::NewExperiment* e) {
  ResolvedSizes rs;
  XV_RETURN_IF_ERROR(ResolveSizes(rr, &rs).WithContext(label));
  e->seed = rr.seed;
  e->recipe_hash = CodeIdentityHash(CanonicalHash(rr), source_sha256);
  e->config_hash = CodeIdentityHash(ConfigHashWithoutSeed(rr), source_sha256);
  e->source_sha256 = source_sha256;
  e->recipe_json = RecipeToJson(rr).dump();
  e->resolved_json = ResolvedConfigJson(rr, rs).dump();
  e->device_requirement = rr.device == "cuda" ? "gpu" : "any";
  e->time_budget_s = rr.time_budget_s;
  e->hard_deadline_s = ContractHardDeadlineSeconds(budget, rr.time_budget_s);
  return Status::Ok();
}

// The request's round kind: "" is candidates; a Submit may ask for candidates, sweep, ablation or
// confirm (plan-phase rounds are the daemon's).
Status ParseSubmitKind(const std::string& text, RoundKind* out) {
  if (text.empty()) {
    *out = RoundKind::kCandidates;
    return Status::Ok();
  }
  if (!ParseRoundKind(text, out) || *out == RoundKind::kPlanPhase) {
    return Status::InvalidArgument("kind: " + QuoteExcerpt(text) +
                                   " is not candidates, sweep, ablation or confirm");
  }
  return Status::Ok();
}

// The request's own bounds: candidates, replicates, names and the trainer.
Status CheckSubmitRequest(const xv::v1::SubmitRequest& req, const SubmissionLimits& limits) {
  if (req.candidates_size() > limits.max_candidates) {
    return Status::InvalidArgument("candidates: " + std::to_string(req.candidates_size()) +
                                   " given, at most " + std::to_string(limits.max_candidates));
  }
  if (req.replicates() < 0 || req.replicates() > limits.max_replicates) {
    return Status::InvalidArgument("replicates: must be 0..." +
                                   std::to_string(limits.max_replicates) + ", got " +
                                   std::to_string(req.replicates()));
  }
  if (req.campaign().size() > 200) return Status::InvalidArgument("campaign: name longer than 200");
  if (req.submitter().size() > 200) return Status::InvalidArgument("submitter: longer than 200");
  // A trainer is a name the workers configured, never a command line.
  for (char c : req.trainer()) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return Status::InvalidArgument("trainer: " + QuoteExcerpt(req.trainer()) +
                                     " is not a trainer name (letters, digits, - _ . only)");
    }
  }
  if (req.trainer().size() > 64) return Status::InvalidArgument("trainer: name longer than 64");
  return Status::Ok();
}

// Every run is a row stored (and later a GPU slot): bounded before anything is resolved.
Status CheckRunCount(const xv::v1::SubmitRequest& req, const RoundPlan& plan, int replicates,
                     const SubmissionLimits& limits) {
  const int64_t candidates =
      req.candidates_size() > 0 ? req.candidates_size() : (plan.controls_only ? 0 : 1);
  const int64_t runs = candidates * replicates + plan.head_controls;
  if (runs <= limits.max_runs) return Status::Ok();
  return Status::InvalidArgument(
      "candidates x replicates: " + std::to_string(candidates) + " candidate(s) x " +
      std::to_string(replicates) + " replicate(s)" +
      (plan.head_controls > 0 ? " + " + std::to_string(plan.head_controls) + " head controls"
                              : std::string()) +
      " = " + std::to_string(runs) + " runs in one submission, at most " +
      std::to_string(limits.max_runs) + " (split it into several submissions)");
}

// The submission's own fields (no experiments yet); `sources` names the base's source.
store::NewSubmission SubmissionOf(const xv::v1::SubmitRequest& req, const Recipe& base,
                                  const ResolvedSizes& base_sizes, RoundKind kind,
                                  const RoundSources& sources) {
  store::NewSubmission sub;
  sub.campaign = req.campaign().empty() ? "default" : req.campaign();
  sub.recipe_name = req.recipe_name();
  sub.recipe_yaml = req.recipe_yaml();
  sub.trainer = req.trainer().empty() ? "libtorch" : req.trainer();
  sub.priority = req.priority();
  sub.submitter = req.submitter();
  sub.base_hash = CodeIdentityHash(CanonicalHash(base), sources.base_sha256);
  sub.base_recipe_json = RecipeToJson(base).dump();
  sub.base_resolved_json = ResolvedConfigJson(base, base_sizes).dump();
  sub.base_config_hash = CodeIdentityHash(ConfigHashWithoutSeed(base), sources.base_sha256);
  sub.base_source_sha256 = sources.base_sha256;
  if (!sources.base_sha256.empty()) sub.sources[sources.base_sha256] = sources.base_text;
  sub.kind = kind;
  return sub;
}

// What every candidate of one submission is checked against.
struct CandidateRunContext {
  const Recipe& base;
  const RoundPlan& plan;
  const SubmissionLimits& limits;
  int replicates = 1;
  std::string base_hash;
  bool base_is_candidate = false;   // a candidate without overrides: the base runs as one
  std::map<std::string, int> seen;  // candidate hash -> 1-based candidate index
  size_t source_bytes = 0;          // of the candidates' own sources so far
};

bool HasOwnCode(const xv::v1::Candidate& c) { return !c.source().empty() || !c.patch().empty(); }

// The text of a patch candidate: its diff applied to the round's patch base.
Status ApplyCandidatePatch(const xv::v1::Candidate& cand, const std::string& label,
                           const std::string& trainer, const RoundSources& sources,
                           std::string* text) {
  if (cand.patch().size() > store::kMaxSourceBytes) {
    return Status::InvalidArgument(label + "patch: " + std::to_string(cand.patch().size()) +
                                   " bytes, at most " + std::to_string(store::kMaxSourceBytes));
  }
  if (sources.patch_base_sha256.empty()) {
    return Status::FailedPrecondition(
        label + "patch: nothing to apply it to: no worker of trainer '" + trainer +
        "' that allows code candidates has registered its source (start one with "
        "allow_code_candidates: true, or send the whole file as the candidate's source)");
  }
  Status s = ApplyUnifiedDiff(sources.patch_base_text, cand.patch(), "the base source",
                              store::kMaxSourceBytes, text);
  if (!s.ok()) {
    return Status::InvalidArgument(label + s.message() + " (the base: " + sources.patch_base_label +
                                   ", sha256 " + sources.patch_base_sha256.substr(0, 12) + ")");
  }
  return Status::Ok();
}

// The candidate's source: its own (`source`, or `patch` applied), else the base's. *sha256 is ""
// when it runs the trainer's configured file. Its own text goes into sub->sources.
Status ResolveCandidateSource(const xv::v1::Candidate& cand, const std::string& label,
                              CandidateRunContext* context, store::NewSubmission* sub,
                              std::string* sha256) {
  const RoundSources& sources = context->plan.sources;
  if (!HasOwnCode(cand)) {
    *sha256 = sources.base_sha256;
    return Status::Ok();
  }
  if (!cand.source().empty() && !cand.patch().empty()) {
    return Status::InvalidArgument(label + "source and patch: give one of them, not both");
  }
  if (sub->trainer == "libtorch") {
    return Status::InvalidArgument(
        label + (cand.source().empty() ? "patch" : "source") +
        ": trainer libtorch runs xv-train, not a train.py; a code candidate needs an "
        "autoresearch trainer whose workers allow code candidates (docs/autoresearch.md)");
  }
  std::string text;
  if (!cand.patch().empty()) {
    XV_RETURN_IF_ERROR(ApplyCandidatePatch(cand, label, sub->trainer, sources, &text));
  } else {
    text = cand.source();
  }
  XV_RETURN_IF_ERROR(store::CheckSourceText(label + "source", text));
  context->source_bytes += text.size();
  if (context->source_bytes > kMaxSubmissionSourceBytes) {
    return Status::InvalidArgument(label + "source: the submission's sources exceed " +
                                   std::to_string(kMaxSubmissionSourceBytes) +
                                   " bytes in all (split it into several submissions)");
  }
  *sha256 = Sha256Hex(text);
  sub->sources.emplace(*sha256, std::move(text));
  return Status::Ok();
}

// The replicate runs of candidate `ci` (0-based): its overrides applied to the base, validated,
// resolved and checked against the base and the earlier candidates.
Status AddCandidateRuns(const xv::v1::Candidate& cand, size_t ci, CandidateRunContext* context,
                        store::NewSubmission* sub) {
  const RoundPlan& plan = context->plan;
  const std::string joined = JoinOverrides(cand);
  // At most ~200 bytes of the overrides in every error of this candidate.
  const std::string shown = joined.size() <= kMaxQuoteBytes
                                ? joined
                                : std::string(Utf8Prefix(joined, kMaxQuoteBytes)) + "…";
  const std::string code =
      !cand.source().empty() ? "source" : (!cand.patch().empty() ? "patch" : "");
  const std::string described = joined.empty() ? (code.empty() ? std::string("base") : code)
                                               : (code.empty() ? shown : shown + "," + code);
  const std::string label = "candidate " + std::to_string(ci + 1) + " (" + described + "): ";
  if (cand.overrides_size() > context->limits.max_overrides) {
    return Status::InvalidArgument(label + "more than " +
                                   std::to_string(context->limits.max_overrides) + " overrides");
  }
  Recipe r = context->base;
  nlohmann::json overrides = nlohmann::json::object();
  std::vector<std::pair<std::string, std::string>> pairs;
  for (const auto& o : cand.overrides()) {
    if (o.key().empty()) return Status::InvalidArgument(label + "override with an empty key");
    pairs.emplace_back(o.key(), o.value());
  }
  // All overrides at once: knobs that move together are validated together.
  XV_RETURN_IF_ERROR(ApplyOverrides(pairs, &r).WithContext(label));
  XV_RETURN_IF_ERROR(ValidateRecipe(r).WithContext(label));
  XV_RETURN_IF_ERROR(CheckContractTimeBudget(plan.budget, r.time_budget_s).WithContext(label));
  XV_RETURN_IF_ERROR(
      CheckContractMetric(plan.budget, r.sequence_len, r.eval_tokens).WithContext(label));
  ResolvedSizes sizes;
  XV_RETURN_IF_ERROR(ResolveSizes(r, &sizes).WithContext(label));
  std::string source_sha256;
  XV_RETURN_IF_ERROR(ResolveCandidateSource(cand, label, context, sub, &source_sha256));
  const nlohmann::json knobs = RecipeToJson(r);
  for (const auto& o : cand.overrides()) {
    if (knobs.contains(o.key())) overrides[o.key()] = knobs[o.key()];
  }
  const std::string hash = CodeIdentityHash(CanonicalHash(r), source_sha256);
  if (hash == context->base_hash && (cand.overrides_size() > 0 || HasOwnCode(cand)) &&
      !context->base_is_candidate) {
    return Status::InvalidArgument(label + "no-op " + (joined.empty() ? "source" : "override") +
                                   ": " + described + " equals the base" +
                                   (code.empty() ? "" : " (the same source text)"));
  }
  auto [it, inserted] = context->seen.emplace(hash, static_cast<int>(ci + 1));
  if (!inserted) {
    return Status::InvalidArgument(label + "same resolved config as candidate " +
                                   std::to_string(it->second));
  }
  // A code candidate's default name carries its source's short hash ("source:3f2a9c1b7d4e").
  const std::string own_code =
      HasOwnCode(cand) ? "source:" + source_sha256.substr(0, 12) : std::string();
  const std::string name =
      !cand.name().empty()
          ? cand.name()
          : (joined.empty() ? (own_code.empty() ? std::string("base") : own_code)
                            : (own_code.empty() ? joined : joined + "," + own_code));
  if (plan.head_controls > 0 && name == "head") {
    return Status::InvalidArgument(label + "name: 'head' is reserved for the head controls");
  }
  const int64_t seed0 = r.seed + plan.seed_offset;
  for (int rep = 0; rep < context->replicates; ++rep) {
    Recipe rr = r;
    rr.seed = seed0 + rep;
    store::NewExperiment e;
    XV_RETURN_IF_ERROR(FillExperimentRun(rr, plan.budget, label, source_sha256, &e));
    e.name = name;
    e.candidate_index = static_cast<int>(ci);
    e.replicate = rep;
    e.overrides_json = overrides.dump();
    sub->experiments.push_back(std::move(e));
  }
  return Status::Ok();
}

// Head controls: the base config itself, measured beside the candidates in the same round.
Status AddHeadControls(const Recipe& base, const RoundPlan& plan, store::NewSubmission* sub) {
  for (int rep = 0; rep < plan.head_controls; ++rep) {
    Recipe rr = base;
    rr.seed = base.seed + plan.seed_offset + rep;
    store::NewExperiment e;
    XV_RETURN_IF_ERROR(
        FillExperimentRun(rr, plan.budget, "head control: ", plan.sources.base_sha256, &e));
    e.name = "head";
    e.candidate_index = -1;
    e.replicate = rep;
    e.role = RunRole::kControl;
    sub->experiments.push_back(std::move(e));
  }
  return Status::Ok();
}

}  // namespace

void AssignRunOrder(uint64_t seed, store::NewSubmission* sub) {
  std::vector<sched::ArmRuns> arms;
  std::vector<std::vector<size_t>> rows;  // per arm, its rows in the order added
  std::map<std::string, size_t> arm_index;
  for (size_t i = 0; i < sub->experiments.size(); ++i) {
    const store::NewExperiment& e = sub->experiments[i];
    const auto [it, added] = arm_index.emplace(e.name, arms.size());
    if (added) {
      arms.push_back({e.name, 0});
      rows.emplace_back();
    }
    ++arms[it->second].runs;
    rows[it->second].push_back(i);
  }
  for (const sched::RunSlot& slot : sched::PlanRunOrder(arms, seed)) {
    store::NewExperiment& e = sub->experiments[rows[slot.arm_index][slot.run]];
    e.run_order = slot.position;
    e.run_block = slot.block;
  }
  sub->order_seed = static_cast<int64_t>(seed);
}

double HardDeadlineSeconds(double time_budget_s) {
  return ContractHardDeadlineSeconds(BudgetContract{}, time_budget_s);
}

std::string CodeIdentityHash(const std::string& recipe_hash, const std::string& source_sha256) {
  if (source_sha256.empty()) return recipe_hash;
  return Sha256Hex(recipe_hash + "+source:" + source_sha256);
}

std::string ConfigHashWithoutSeed(const Recipe& r) {
  Recipe unseeded = r;
  unseeded.seed = 0;
  return CanonicalHash(unseeded);
}

Status BuildSubmission(const xv::v1::SubmitRequest& req, const SubmissionLimits& limits,
                       store::NewSubmission* out) {
  if (req.recipe_yaml().empty()) {
    return Status::InvalidArgument("recipe_yaml: empty (send the recipe file's text)");
  }
  if (req.recipe_yaml().size() > limits.max_recipe_bytes) {
    return Status::InvalidArgument("recipe_yaml: " + std::to_string(req.recipe_yaml().size()) +
                                   " bytes, more than the limit of " +
                                   std::to_string(limits.max_recipe_bytes));
  }
  Recipe base;
  XV_RETURN_IF_ERROR(ParseRecipeYaml(req.recipe_yaml(), &base).WithContext("recipe: "));
  return BuildSubmissionFromBase(req, base, RoundPlan{}, limits, out);
}

Status BuildSubmissionFromBase(const xv::v1::SubmitRequest& req, const Recipe& base,
                               const RoundPlan& plan, const SubmissionLimits& limits,
                               store::NewSubmission* out) {
  RoundKind kind = RoundKind::kCandidates;
  XV_RETURN_IF_ERROR(ParseSubmitKind(req.kind(), &kind));
  XV_RETURN_IF_ERROR(CheckSubmitRequest(req, limits));
  const int replicates =
      plan.replicates > 0 ? plan.replicates : (req.replicates() == 0 ? 1 : req.replicates());
  XV_RETURN_IF_ERROR(CheckRunCount(req, plan, replicates, limits));

  XV_RETURN_IF_ERROR(ValidateRecipe(base).WithContext("recipe: "));
  XV_RETURN_IF_ERROR(
      CheckContractTimeBudget(plan.budget, base.time_budget_s).WithContext("recipe: "));
  XV_RETURN_IF_ERROR(CheckContractMetric(plan.budget, base.sequence_len, base.eval_tokens)
                         .WithContext("recipe: "));
  ResolvedSizes base_sizes;
  XV_RETURN_IF_ERROR(ResolveSizes(base, &base_sizes).WithContext("recipe: "));
  store::NewSubmission sub = SubmissionOf(req, base, base_sizes, kind, plan.sources);

  std::vector<xv::v1::Candidate> candidates(req.candidates().begin(), req.candidates().end());
  if (candidates.empty() && !plan.controls_only) candidates.emplace_back();
  CandidateRunContext context{base, plan, limits, replicates, sub.base_hash};
  for (const auto& c : candidates) {
    context.base_is_candidate |= c.overrides_size() == 0 && !HasOwnCode(c);
  }
  for (size_t ci = 0; ci < candidates.size(); ++ci) {
    XV_RETURN_IF_ERROR(AddCandidateRuns(candidates[ci], ci, &context, &sub));
  }
  XV_RETURN_IF_ERROR(AddHeadControls(base, plan, &sub));
  *out = std::move(sub);
  return Status::Ok();
}

}  // namespace xv::daemon

namespace xv::daemon {

void BuildAblationCandidates(const Recipe& head, const Recipe& base,
                             std::vector<xv::v1::Candidate>* out,
                             std::vector<std::string>* skipped) {
  for (const RecipeKnob& knob : RecipeKnobTable()) {
    if (std::string(knob.name) == "seed") continue;
    const nlohmann::json head_value = RecipeKnobToJson(knob, head);
    const nlohmann::json base_value = RecipeKnobToJson(knob, base);
    if (head_value == base_value) continue;
    const std::string name = std::string("-") + knob.name;
    Recipe r = head;
    Status s = ApplyOverrides({{knob.name, base_value.dump()}}, &r);
    ResolvedSizes sizes;
    if (s.ok()) s = ResolveSizes(r, &sizes);
    if (!s.ok()) {
      if (skipped) skipped->push_back(name + ": " + s.message());
      continue;
    }
    xv::v1::Candidate c;
    c.set_name(name);
    auto* o = c.add_overrides();
    o->set_key(knob.name);
    o->set_value(base_value.dump());
    out->push_back(std::move(c));
  }
}

namespace {

// The campaign named `name` (*found false when there is none), its policy and what its budget and
// policy add to a round.
Status LoadCampaignRoundPlan(store::Store* store, const std::string& name,
                             const xv::v1::SubmitRequest& req, bool* found,
                             store::CampaignHead* head, CampaignPolicy* policy, RoundPlan* plan) {
  XV_RETURN_IF_ERROR(store->campaigns().FindCampaignHead(name, found, head));
  if (!*found) return Status::Ok();
  XV_RETURN_IF_ERROR(ParseStoredCampaignPolicy(head->policy_json, policy));
  XV_RETURN_IF_ERROR(ParseBudgetContract(head->budget_json, &plan->budget)
                         .WithContext("campaign '" + name + "' stored "));
  if (policy->set) {
    // The policy's replicates are the minimum; asking for more runs more, and the seeds already
    // run in this campaign are reused.
    plan->replicates = std::max(policy->acceptance.replicates, req.replicates());
    plan->head_controls = policy->acceptance.head_controls;
  }
  return Status::Ok();
}

// The round's base recipe: the request's recipe, or the campaign's head.
Status LoadRoundBase(const xv::v1::SubmitRequest& req, const SubmissionLimits& limits,
                     const std::string& name, bool found, const store::CampaignHead& head,
                     bool daemon_built, Recipe* base) {
  if (!req.recipe_yaml().empty()) {
    if (req.recipe_yaml().size() > limits.max_recipe_bytes) {
      return Status::InvalidArgument("recipe_yaml: " + std::to_string(req.recipe_yaml().size()) +
                                     " bytes, more than the limit of " +
                                     std::to_string(limits.max_recipe_bytes));
    }
    return ParseRecipeYaml(req.recipe_yaml(), base).WithContext("recipe: ");
  }
  if (!found) {
    return Status::InvalidArgument(
        "recipe_yaml: empty and campaign '" + name +
        "' does not exist (create it with CreateCampaign, or send a recipe)");
  }
  nlohmann::json j = ParseBoundedJsonOrDiscarded(head.head_recipe_json);
  XV_RETURN_IF_ERROR(ParseRecipeJson(j, base).WithContext("campaign '" + name + "' head recipe: "));
  if (req.candidates_size() == 0 && !daemon_built) {
    return Status::InvalidArgument(
        "candidates: none given (a round built from the campaign head needs overrides)");
  }
  return Status::Ok();
}

// An ablation round's candidates: one per knob where the head differs from the campaign's base.
Status AddAblationCandidates(const xv::v1::SubmitRequest& req, const std::string& name,
                             const store::CampaignHead& head, const Recipe& base,
                             xv::v1::SubmitRequest* effective) {
  if (req.candidates_size() > 0) {
    return Status::InvalidArgument(
        "candidates: an ablation round is built by the daemon (one candidate per knob where "
        "the head differs from the base); send none");
  }
  Recipe campaign_base;
  nlohmann::json j = ParseBoundedJsonOrDiscarded(head.base_recipe_json);
  XV_RETURN_IF_ERROR(
      ParseRecipeJson(j, &campaign_base).WithContext("campaign '" + name + "' base recipe: "));
  std::vector<xv::v1::Candidate> drops;
  std::vector<std::string> skipped;
  BuildAblationCandidates(base, campaign_base, &drops, &skipped);
  if (drops.empty()) {
    std::string why = "kind: ablation: the head of campaign '" + name +
                      "' equals its base recipe in every knob (nothing to ablate; keep a "
                      "candidate first)";
    if (!skipped.empty()) {
      why = "kind: ablation: no knob of campaign '" + name + "' can be reset alone (" +
            skipped.front() + ")";
    }
    return Status::InvalidArgument(why);
  }
  for (auto& c : drops) *effective->add_candidates() = std::move(c);
  return Status::Ok();
}

// A confirm round: k fresh seeds (beyond any the campaign has run) for the head and each
// candidate.
Status PlanConfirmRound(store::Store* store, const xv::v1::SubmitRequest& req,
                        const store::CampaignHead& head, const Recipe& base, RoundPlan* plan) {
  if (req.replicates() < 1) {
    return Status::InvalidArgument(
        "replicates: a confirm round needs the number of fresh seeds (>= 1; xvctl confirm "
        "--seeds K)");
  }
  plan->replicates = req.replicates();
  plan->head_controls = req.replicates();
  plan->controls_only = req.candidates_size() == 0;
  bool any = false;
  int64_t max_seed = 0;
  XV_RETURN_IF_ERROR(store->campaigns().MaxCampaignSeed(head.id, &any, &max_seed));
  if (any && max_seed >= base.seed) plan->seed_offset = max_seed + 1 - base.seed;
  return Status::Ok();
}

// The round's sources (issue 16): the head's source when the round is built from a head that is a
// kept code candidate, and what a patch applies to (that source, else the trainer's registered
// one; looked up only when a candidate carries a patch).
Status LoadRoundSources(store::Store* store, const xv::v1::SubmitRequest& req,
                        const std::string& trainer, bool found, const store::CampaignHead& head,
                        RoundSources* out) {
  if (found && req.recipe_yaml().empty() && !head.head_source_sha256.empty()) {
    store::StoredSource source;
    bool stored = false;
    XV_RETURN_IF_ERROR(store->sources().FindSource(head.head_source_sha256, &stored, &source));
    if (!stored) {
      return Status::Internal("campaign '" + head.name + "' head source " +
                              head.head_source_sha256 + " is not stored");
    }
    out->base_sha256 = source.sha256;
    out->base_text = std::move(source.text);
  }
  bool any_patch = false;
  for (const auto& c : req.candidates()) any_patch |= !c.patch().empty();
  if (!any_patch) return Status::Ok();
  if (!out->base_sha256.empty()) {
    out->patch_base_sha256 = out->base_sha256;
    out->patch_base_text = out->base_text;
    out->patch_base_label = "campaign '" + head.name + "''s head source";
    return Status::Ok();
  }
  store::StoredSource registered;
  bool known = false;
  XV_RETURN_IF_ERROR(store->sources().FindTrainerSource(trainer, &known, &registered));
  if (known) {
    out->patch_base_sha256 = registered.sha256;
    out->patch_base_text = std::move(registered.text);
    out->patch_base_label = "trainer " + trainer + "'s registered source";
  }
  return Status::Ok();
}

// Issue 14: which rows may reuse an earlier result, and the run order of a round with controls.
void SetReuseAndOrder(const CampaignPolicy& policy, const CampaignRoundOptions& options,
                      store::NewSubmission* sub) {
  if (options.failure_map) {
    sub->reuse = store::ResultReuse::kAcrossRounds;
    sub->reuse_reason =
        "a failure map records whether this exact run (config and seed) fails, which the earlier "
        "run says";
  } else if (!policy.set) {
    sub->reuse = store::ResultReuse::kAcrossRounds;
    sub->reuse_reason =
        "the campaign has no acceptance policy: nothing compares this run with its round's other "
        "runs, and the identical run (config and seed) has a result";
  } else {
    sub->reuse = store::ResultReuse::kNone;
  }
  bool has_controls = false;
  for (const store::NewExperiment& e : sub->experiments)
    has_controls |= e.role == RunRole::kControl;
  if (has_controls) {
    AssignRunOrder(options.order_seed != 0 ? options.order_seed : sched::NewOrderSeed(), sub);
  }
}

}  // namespace

Status BuildCampaignRound(store::Store* store, const xv::v1::SubmitRequest& req,
                          const SubmissionLimits& limits, const CampaignRoundOptions& options,
                          store::NewSubmission* sub) {
  const std::string name = req.campaign().empty() ? "default" : req.campaign();
  bool found = false;
  store::CampaignHead head;
  CampaignPolicy policy;
  RoundPlan plan;
  XV_RETURN_IF_ERROR(LoadCampaignRoundPlan(store, name, req, &found, &head, &policy, &plan));
  xv::v1::SubmitRequest effective = req;
  if (found && req.trainer().empty()) effective.set_trainer(head.trainer);
  // An unknown kind is refused by BuildSubmissionFromBase, after the checks below.
  RoundKind kind = RoundKind::kCandidates;
  const bool known_kind = ParseSubmitKind(req.kind(), &kind).ok();
  const bool daemon_built =
      known_kind && (kind == RoundKind::kAblation || kind == RoundKind::kConfirm);
  if (daemon_built && !req.recipe_yaml().empty()) {
    return Status::InvalidArgument("recipe_yaml: a " + std::string(ToString(kind)) +
                                   " round is built from the campaign's head; send no recipe");
  }
  Recipe base;
  XV_RETURN_IF_ERROR(LoadRoundBase(req, limits, name, found, head, daemon_built, &base));
  XV_RETURN_IF_ERROR(LoadRoundSources(
      store, req, effective.trainer().empty() ? std::string("libtorch") : effective.trainer(),
      found, head, &plan.sources));
  if (known_kind && kind == RoundKind::kAblation) {
    XV_RETURN_IF_ERROR(AddAblationCandidates(req, name, head, base, &effective));
    if (!policy.set) plan.head_controls = std::max(1, req.replicates());
  }
  if (known_kind && kind == RoundKind::kConfirm) {
    XV_RETURN_IF_ERROR(PlanConfirmRound(store, req, head, base, &plan));
  }
  if (options.failure_map) {
    plan.replicates = 1;
    plan.head_controls = 0;
  }
  XV_RETURN_IF_ERROR(BuildSubmissionFromBase(effective, base, plan, limits, sub));
  sub->campaign = name;
  sub->plan_id = options.plan_id;
  sub->plan_phase = options.plan_phase;
  if (options.failure_map) sub->keep_rule = KeepRule::kNone;
  SetReuseAndOrder(policy, options, sub);
  return Status::Ok();
}

}  // namespace xv::daemon
