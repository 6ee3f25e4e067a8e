#include "daemon/api/plan_runner.h"

#include <cmath>
#include <map>
#include <vector>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "common/recipe.h"
#include "common/run_states.h"
#include "daemon/sched/plan_spec.h"

namespace xv::daemon {
namespace {

using nlohmann::json;
using sched::PlanPhase;
using sched::PlanPhaseKind;

// The round kind a phase's round is stored as (failure maps are sweeps that keep nothing).
const char* RoundKind(PlanPhaseKind kind) {
  switch (kind) {
    case PlanPhaseKind::kSweep:
    case PlanPhaseKind::kFailureMap:
      return "sweep";
    case PlanPhaseKind::kCandidates:
      return "candidates";
    case PlanPhaseKind::kAblation:
      return "ablation";
    case PlanPhaseKind::kConfirm:
      return "confirm";
  }
  return "candidates";
}

Status LoadRecipe(const std::string& recipe_json, const std::string& what, Recipe* out) {
  const json j = ParseBoundedJsonOrDiscarded(recipe_json);
  return ParseRecipeJson(j, out).WithContext(what + ": ");
}

// Builds the phase's round; *skip receives a reason instead when there is nothing to run.
Status BuildPhaseRound(store::Store* store, const SubmissionLimits& limits,
                       const store::StoredPlan& plan, const PlanPhase& phase, int index,
                       store::NewSubmission* sub, std::string* skip) {
  bool found = false;
  store::CampaignHead head;
  XV_RETURN_IF_ERROR(store->campaigns().FindCampaignHead(plan.campaign, &found, &head));
  if (!found) return Status::NotFound("campaign '" + plan.campaign + "': no such campaign");
  Recipe head_recipe;
  XV_RETURN_IF_ERROR(LoadRecipe(head.head_recipe_json, "head recipe", &head_recipe));
  const std::string head_hash = CanonicalHash(head_recipe);

  xv::v1::SubmitRequest req;
  req.set_campaign(plan.campaign);
  req.set_kind(RoundKind(phase.kind));
  req.set_submitter("plan " + plan.name + " #" + std::to_string(plan.id) + " phase " +
                    std::to_string(index) + " (" + phase.name + ")");
  req.set_replicates(phase.kind == PlanPhaseKind::kConfirm ? phase.seeds : phase.replicates);

  std::string no_ops;
  for (const auto& overrides : sched::ExpandPhaseCandidates(phase)) {
    const std::string name = sched::JoinPlanOverrides(overrides);
    Recipe r = head_recipe;
    if (ApplyOverrides(overrides, &r).ok() && CanonicalHash(r) == head_hash) {
      no_ops += (no_ops.empty() ? "" : ", ") + name;
      continue;
    }
    auto* c = req.add_candidates();
    c->set_name(name);
    for (const auto& [k, v] : overrides) {
      auto* o = c->add_overrides();
      o->set_key(k);
      o->set_value(v);
    }
  }
  const bool needs_candidates = phase.kind == PlanPhaseKind::kSweep ||
                                phase.kind == PlanPhaseKind::kCandidates ||
                                phase.kind == PlanPhaseKind::kFailureMap;
  if (needs_candidates && req.candidates_size() == 0) {
    *skip = "skipped: every candidate equals the head (no-op): " + no_ops;
    return Status::Ok();
  }
  if (phase.kind == PlanPhaseKind::kAblation) {
    Recipe base;
    XV_RETURN_IF_ERROR(LoadRecipe(head.base_recipe_json, "base recipe", &base));
    std::vector<xv::v1::Candidate> drops;
    std::vector<std::string> skipped;
    BuildAblationCandidates(head_recipe, base, &drops, &skipped);
    if (drops.empty()) {
      *skip = skipped.empty() ? "skipped: the head equals the base recipe (nothing to ablate)"
                              : "skipped: no knob can be reset alone (" + skipped.front() + ")";
      return Status::Ok();
    }
  }
  CampaignRoundOptions options;
  options.plan_id = plan.id;
  options.plan_phase = index;
  options.failure_map = phase.kind == PlanPhaseKind::kFailureMap;
  XV_RETURN_IF_ERROR(BuildCampaignRound(store, req, limits, options, sub));
  if (!no_ops.empty()) sub->submitter += "; left out as no-ops: " + no_ops;
  return Status::Ok();
}

// A failure map's outcome: where the runs, in ascending knob order, start to fail.
Status FailureBoundary(store::Store* store, const PlanPhase& phase, int64_t round_id,
                       std::string* line, json* detail) {
  std::vector<store::RoundRun> runs;
  XV_RETURN_IF_ERROR(store->rounds().ListRoundRuns(round_id, &runs));
  std::map<std::string, std::string> by_value;  // value text -> how it ended
  for (const auto& r : runs) {
    if (r.role != RunRole::kCandidate) continue;
    const auto eq = r.name.find('=');
    const std::string value = eq == std::string::npos ? r.name : r.name.substr(eq + 1);
    std::string how(ToString(r.state));
    if (r.state == ExperimentState::kSucceeded && (!r.has_val_bpb || !std::isfinite(r.val_bpb)))
      how = "nan";
    by_value[value] = how;
  }
  std::string last_ok, first_bad, first_bad_how, after;
  json values = json::array();
  for (const auto& v : phase.failure_values) {
    auto it = by_value.find(v);
    const std::string how = it == by_value.end() ? "not run (no-op)" : it->second;
    values.push_back({{"value", v}, {"ended", how}});
    const bool ok = how == "succeeded" || how == "not run (no-op)";
    if (first_bad.empty()) {
      if (ok) {
        last_ok = v;
      } else {
        first_bad = v;
        first_bad_how = how;
      }
    } else {
      after += (after.empty() ? "" : ", ") + v + " " + how;
    }
  }
  (*detail)["values"] = values;
  (*detail)["boundary"] = first_bad.empty() ? json() : json(first_bad);
  if (first_bad.empty()) {
    *line = phase.failure_knob + ": every value ran (" + phase.failure_values.front() + " .. " +
            phase.failure_values.back() + "); no failure boundary in this range";
  } else {
    *line = phase.failure_knob + ": " +
            (last_ok.empty() ? std::string("fails from the first value ")
                             : "fine up to " + last_ok + "; fails from ") +
            first_bad + " (" + first_bad_how + ")" + (after.empty() ? "" : "; then " + after);
  }
  return Status::Ok();
}

}  // namespace

PlanRunner::PlanRunner(store::Store* store, Dispatcher* dispatcher, RoundCloser* closer,
                       SubmissionLimits limits)
    : store_(store), dispatcher_(dispatcher), closer_(closer), limits_(limits) {}

Status PlanRunner::AdvanceAll() {
  std::vector<store::StoredPlan> running;
  XV_RETURN_IF_ERROR(store_->plans().ListPlans("running", &running));
  for (const auto& p : running) {
    Status s = Advance(p.id);
    if (!s.ok()) spdlog::error("plan {} ({}): {}", p.id, p.name, s.ToString());
  }
  return Status::Ok();
}

Status PlanRunner::Advance(int64_t plan_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return AdvanceLocked(plan_id);
}

Status PlanRunner::Pause(int64_t plan_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return SetStateLocked(plan_id, PlanState::kRunning, PlanState::kPaused, "paused by request");
}

Status PlanRunner::Resume(int64_t plan_id) {
  std::lock_guard<std::mutex> lock(mu_);
  XV_RETURN_IF_ERROR(SetStateLocked(plan_id, PlanState::kPaused, PlanState::kRunning, ""));
  return AdvanceLocked(plan_id);
}

Status PlanRunner::Cancel(int64_t plan_id) {
  std::lock_guard<std::mutex> lock(mu_);
  store::StoredPlan plan;
  XV_RETURN_IF_ERROR(store_->plans().GetPlan(plan_id, "", &plan));
  bool updated = false;
  if (plan.state == PlanState::kRunning || plan.state == PlanState::kPaused) {
    XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(plan.id, plan.state, PlanState::kCancelled,
                                                  plan.current_phase, plan.outcomes_json,
                                                  "cancelled by request", &updated));
  }
  if (!updated) {
    return Status::FailedPrecondition("plan " + std::to_string(plan.id) + " (" + plan.name +
                                      ") has already ended: " + std::string(ToString(plan.state)));
  }
  return Status::Ok();
}

Status PlanRunner::SetStateLocked(int64_t plan_id, PlanState from, PlanState to,
                                  const std::string& reason) {
  store::StoredPlan plan;
  XV_RETURN_IF_ERROR(store_->plans().GetPlan(plan_id, "", &plan));
  bool updated = false;
  if (plan.state == from) {
    XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(plan.id, from, to, plan.current_phase,
                                                  plan.outcomes_json, reason, &updated));
  }
  if (!updated) {
    return Status::FailedPrecondition("plan " + std::to_string(plan.id) + " (" + plan.name +
                                      ") is " + std::string(ToString(plan.state)) + ", not " +
                                      std::string(ToString(from)));
  }
  spdlog::info("plan {} ({}): {}", plan.id, plan.name,
               to == PlanState::kPaused ? "paused" : "resumed");
  return Status::Ok();
}

Status PlanRunner::AdvanceLocked(int64_t plan_id) {
  store::StoredPlan plan;
  XV_RETURN_IF_ERROR(store_->plans().GetPlan(plan_id, "", &plan));
  if (plan.state != PlanState::kRunning) return Status::Ok();
  json outcomes = ParseBoundedJsonOrDiscarded(plan.outcomes_json);
  if (!outcomes.is_array()) outcomes = json::array();
  bool updated = false;
  sched::PlanSpec spec;
  Status parsed = sched::ParsePlanYaml(plan.yaml, &spec);
  if (!parsed.ok()) {
    return store_->plans().UpdatePlan(plan.id, PlanState::kRunning, PlanState::kFailed,
                                      plan.current_phase, DumpJsonLossless(outcomes),
                                      "plan: " + parsed.message(), &updated);
  }
  while (outcomes.size() < spec.phases.size()) outcomes.push_back({{"state", "pending"}});
  int phase = plan.current_phase;
  // Each pass either waits (returns) or moves one phase on; bounded by the number of phases.
  for (size_t pass = 0; pass <= spec.phases.size() + 1; ++pass) {
    if (phase >= static_cast<int>(spec.phases.size())) {
      XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(
          plan.id, PlanState::kRunning, PlanState::kDone, phase, DumpJsonLossless(outcomes),
          "all " + std::to_string(spec.phases.size()) + " phases finished", &updated));
      if (updated) spdlog::info("plan {} ({}): done", plan.id, plan.name);
      return Status::Ok();
    }
    const PlanPhase& ph = spec.phases[phase];
    const std::string where = "phases[" + std::to_string(phase) + "] (" + ph.name + ", " +
                              PlanPhaseKindName(ph.kind) + ")";
    std::vector<store::PlanRound> rounds;
    XV_RETURN_IF_ERROR(store_->plans().ListPlanRounds(plan.id, &rounds));
    const store::PlanRound* round = nullptr;
    for (const auto& r : rounds) {
      if (r.phase == phase) round = &r;
    }
    json& out = outcomes[phase];
    if (round == nullptr) {
      store::NewSubmission sub;
      std::string skip;
      Status s = BuildPhaseRound(store_, limits_, plan, ph, phase, &sub, &skip);
      if (!s.ok()) {
        out = {{"state", "failed"}, {"outcome", s.message()}};
        XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(
            plan.id, PlanState::kRunning, PlanState::kFailed, phase, DumpJsonLossless(outcomes),
            where + ": " + s.message(), &updated));
        spdlog::warn("plan {} ({}): failed at {}: {}", plan.id, plan.name, where, s.message());
        return Status::Ok();
      }
      if (!skip.empty()) {
        out = {{"state", "skipped"}, {"outcome", skip}};
        ++phase;
        XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(plan.id, PlanState::kRunning,
                                                      PlanState::kRunning, phase,
                                                      DumpJsonLossless(outcomes), "", &updated));
        if (!updated) return Status::Ok();
        spdlog::info("plan {} ({}): {} {}", plan.id, plan.name, where, skip);
        continue;
      }
      store::SubmissionIds ids;
      s = store_->submissions().InsertSubmission(sub, &ids);
      if (s.code() == Status::Code::kAlreadyExists) continue;  // built meanwhile: look again
      XV_RETURN_IF_ERROR(s);
      out = {{"state", "running"}, {"round_id", ids.round_id}};
      XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(plan.id, PlanState::kRunning,
                                                    PlanState::kRunning, phase,
                                                    DumpJsonLossless(outcomes), "", &updated));
      spdlog::info("plan {} ({}): {} round {} with {} experiment(s)", plan.id, plan.name, where,
                   ids.round_id, ids.experiment_ids.size());
      if (closer_ != nullptr) closer_->DecideReadyRounds(nullptr);  // all reused: decided now
      if (dispatcher_ != nullptr) dispatcher_->Schedule();
      continue;  // a round decided at once moves on in the next pass
    }
    if (round->state == RoundState::kOpen) {
      if (out.value("round_id", int64_t{0}) != round->round_id) {
        // Stored before a restart, not yet recorded in the plan.
        out = {{"state", "running"}, {"round_id", round->round_id}};
        XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(plan.id, PlanState::kRunning,
                                                      PlanState::kRunning, phase,
                                                      DumpJsonLossless(outcomes), "", &updated));
      }
      return Status::Ok();
    }
    // Decided (or cancelled by hand): record the outcome and move on.
    std::string line =
        round->state == RoundState::kCancelled ? "round cancelled" : round->decision_summary;
    out = {{"state", "decided"},
           {"round_id", round->round_id},
           {"kept", round->kept_candidate.empty() ? json() : json(round->kept_candidate)}};
    if (ph.kind == PlanPhaseKind::kFailureMap) {
      json detail;
      XV_RETURN_IF_ERROR(FailureBoundary(store_, ph, round->round_id, &line, &detail));
      out["failure_map"] = detail;
    }
    out["outcome"] = line;
    ++phase;
    PlanState state = PlanState::kRunning;
    std::string reason;
    if (ph.stop_if_no_keep && round->kept_candidate.empty()) {
      state = PlanState::kDone;
      reason = "stopped after " + where + ": stop_if no_keep and nothing was kept";
      for (size_t i = phase; i < outcomes.size(); ++i) outcomes[i] = {{"state", "stopped"}};
    }
    XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(plan.id, PlanState::kRunning, state, phase,
                                                  DumpJsonLossless(outcomes), reason, &updated));
    if (!updated || state != PlanState::kRunning) {
      if (updated) spdlog::info("plan {} ({}): {}", plan.id, plan.name, reason);
      return Status::Ok();
    }
  }
  return Status::Ok();
}

Status PlanRunner::Describe(const store::StoredPlan& plan, bool with_yaml, xv::v1::Plan* out) {
  out->set_id(plan.id);
  out->set_name(plan.name);
  out->set_campaign(plan.campaign);
  out->set_state(std::string(ToString(plan.state)));
  out->set_current_phase(plan.current_phase);
  out->set_reason(plan.reason);
  out->set_created_at(plan.created_at);
  out->set_updated_at(plan.updated_at);
  if (with_yaml) out->set_yaml(plan.yaml);
  const json outcomes = ParseBoundedJsonOrDiscarded(plan.outcomes_json);
  std::vector<store::PlanRound> rounds;
  XV_RETURN_IF_ERROR(store_->plans().ListPlanRounds(plan.id, &rounds));
  sched::PlanSpec spec;
  if (!sched::ParsePlanYaml(plan.yaml, &spec).ok()) return Status::Ok();
  for (size_t i = 0; i < spec.phases.size(); ++i) {
    xv::v1::PlanPhaseInfo* p = out->add_phases();
    p->set_index(static_cast<int32_t>(i));
    p->set_name(spec.phases[i].name);
    p->set_kind(PlanPhaseKindName(spec.phases[i].kind));
    p->set_state("pending");
    if (outcomes.is_array() && i < outcomes.size() && outcomes[i].is_object()) {
      const json& o = outcomes[i];
      p->set_state(o.value("state", "pending"));
      p->set_round_id(o.value("round_id", int64_t{0}));
      p->set_outcome(o.value("outcome", ""));
      if (o.contains("kept") && o["kept"].is_string()) p->set_kept_candidate(o["kept"]);
    }
    for (const auto& r : rounds) {
      if (r.phase != static_cast<int>(i)) continue;
      p->set_round_id(r.round_id);
      if (p->state() == "pending" || p->state() == "running") {
        // Not recorded by the plan yet (it ended, or the next step has not run).
        if (r.state == RoundState::kOpen) {
          p->set_state("running");
          p->set_outcome(std::to_string(r.unfinished) + " experiment(s) unfinished");
        } else {
          p->set_state(r.state == RoundState::kDecided ? "decided" : "cancelled");
          p->set_outcome(r.decision_summary);
          p->set_kept_candidate(r.kept_candidate);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace xv::daemon
