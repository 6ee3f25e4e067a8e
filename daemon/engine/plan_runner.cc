#include "daemon/engine/plan_runner.h"

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
RoundKind RoundKindOf(PlanPhaseKind kind) {
  switch (kind) {
    case PlanPhaseKind::kSweep:
    case PlanPhaseKind::kFailureMap:
      return RoundKind::kSweep;
    case PlanPhaseKind::kCandidates:
      return RoundKind::kCandidates;
    case PlanPhaseKind::kAblation:
      return RoundKind::kAblation;
    case PlanPhaseKind::kConfirm:
      return RoundKind::kConfirm;
  }
  return RoundKind::kCandidates;
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
  req.set_kind(std::string(ToString(RoundKindOf(phase.kind))));
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
    const bool succeeded = r.state == ExperimentState::kSucceeded;
    if (succeeded && (!r.has_val_bpb || !std::isfinite(r.val_bpb))) how = "nan";
    by_value[value] = how;
  }
  std::string last_ok, first_bad, first_bad_how, after;
  json values = json::array();
  for (const auto& v : phase.failure_values) {
    auto it = by_value.find(v);
    const std::string how = it == by_value.end() ? "not run (no-op)" : it->second;
    values.push_back({{"value", v}, {"ended", how}});
    const bool ok = how == ToString(ExperimentState::kSucceeded) || how == "not run (no-op)";
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

std::string Name(PlanState state) { return std::string(ToString(state)); }

bool PlanIs(const store::StoredPlan& plan, PlanState state) { return plan.state == state; }

bool RoundIs(const store::PlanRound& round, RoundState state) { return round.state == state; }

}  // namespace

// What one AdvanceLocked call works on: the plan, its parsed phases, the phase outcomes written
// back (a JSON array, one object per phase) and the phase it is at.
struct PlanRunner::PlanProgress {
  store::StoredPlan plan;
  sched::PlanSpec spec;
  json outcomes;
  int phase = 0;

  // "phases[1] (ablate, ablation)": the phase as messages name it.
  std::string Where() const {
    const PlanPhase& ph = spec.phases[phase];
    return "phases[" + std::to_string(phase) + "] (" + ph.name + ", " + PlanPhaseKindName(ph.kind) +
           ")";
  }
};

PlanRunner::PlanRunner(store::Store* store, Dispatcher* dispatcher, RoundCloser* closer,
                       SubmissionLimits limits)
    : store_(store), dispatcher_(dispatcher), closer_(closer), limits_(limits) {}

Status PlanRunner::AdvanceAll() {
  std::vector<store::StoredPlan> running;
  XV_RETURN_IF_ERROR(store_->plans().ListPlans(Name(PlanState::kRunning), &running));
  for (const auto& p : running) {
    Status s = Advance(p.id);
    if (!s.ok()) spdlog::error("plan {} ({}): {}", p.id, p.name, s.ToString());
  }
  return Status::Ok();
}

Status PlanRunner::Advance(int64_t plan_id) {
  MutexLock lock(&mu_);
  return AdvanceLocked(plan_id);
}

Status PlanRunner::Pause(int64_t plan_id) {
  MutexLock lock(&mu_);
  return SetStateLocked(plan_id, PlanState::kRunning, PlanState::kPaused, "paused by request");
}

Status PlanRunner::Resume(int64_t plan_id) {
  MutexLock lock(&mu_);
  XV_RETURN_IF_ERROR(SetStateLocked(plan_id, PlanState::kPaused, PlanState::kRunning, ""));
  return AdvanceLocked(plan_id);
}

Status PlanRunner::Cancel(int64_t plan_id) {
  MutexLock lock(&mu_);
  store::StoredPlan plan;
  XV_RETURN_IF_ERROR(store_->plans().GetPlan(plan_id, "", &plan));
  bool updated = false;
  if (PlanIs(plan, PlanState::kRunning) || PlanIs(plan, PlanState::kPaused)) {
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
  if (PlanIs(plan, from)) {
    XV_RETURN_IF_ERROR(store_->plans().UpdatePlan(plan.id, from, to, plan.current_phase,
                                                  plan.outcomes_json, reason, &updated));
  }
  if (!updated) {
    return Status::FailedPrecondition("plan " + std::to_string(plan.id) + " (" + plan.name +
                                      ") is " + Name(plan.state) + ", not " + Name(from));
  }
  spdlog::info("plan {} ({}): {}", plan.id, plan.name,
               to == PlanState::kPaused ? "paused" : "resumed");
  return Status::Ok();
}

Status PlanRunner::AdvanceLocked(int64_t plan_id) {
  PlanProgress p;
  XV_RETURN_IF_ERROR(store_->plans().GetPlan(plan_id, "", &p.plan));
  if (!PlanIs(p.plan, PlanState::kRunning)) return Status::Ok();
  p.outcomes = ParseBoundedJsonOrDiscarded(p.plan.outcomes_json);
  if (!p.outcomes.is_array()) p.outcomes = json::array();
  p.phase = p.plan.current_phase;
  Status parsed = sched::ParsePlanYaml(p.plan.yaml, &p.spec);
  if (!parsed.ok()) {
    bool updated = false;
    return SavePlan(p, PlanState::kFailed, "plan: " + parsed.message(), &updated);
  }
  while (p.outcomes.size() < p.spec.phases.size()) p.outcomes.push_back({{"state", "pending"}});
  // Each pass either waits (returns) or moves one phase on; bounded by the number of phases.
  for (size_t pass = 0; pass <= p.spec.phases.size() + 1; ++pass) {
    bool moved_on = false;
    XV_RETURN_IF_ERROR(AdvancePhaseLocked(&p, &moved_on));
    if (!moved_on) return Status::Ok();
  }
  return Status::Ok();
}

Status PlanRunner::SavePlan(const PlanProgress& p, PlanState state, const std::string& reason,
                            bool* updated) {
  return store_->plans().UpdatePlan(p.plan.id, PlanState::kRunning, state, p.phase,
                                    DumpJsonLossless(p.outcomes), reason, updated);
}

Status PlanRunner::AdvancePhaseLocked(PlanProgress* p, bool* moved_on) {
  *moved_on = false;
  if (p->phase >= static_cast<int>(p->spec.phases.size())) return FinishPlanLocked(p);
  std::vector<store::PlanRound> rounds;
  XV_RETURN_IF_ERROR(store_->plans().ListPlanRounds(p->plan.id, &rounds));
  const store::PlanRound* round = nullptr;
  for (const auto& r : rounds) {
    if (r.phase == p->phase) round = &r;
  }
  if (round == nullptr) return StartPhaseRoundLocked(p, moved_on);
  if (RoundIs(*round, RoundState::kOpen)) return AwaitRoundLocked(p, *round);
  return RecordRoundOutcomeLocked(p, *round, moved_on);
}

Status PlanRunner::FinishPlanLocked(PlanProgress* p) {
  bool updated = false;
  XV_RETURN_IF_ERROR(SavePlan(*p, PlanState::kDone,
                              "all " + std::to_string(p->spec.phases.size()) + " phases finished",
                              &updated));
  if (updated) spdlog::info("plan {} ({}): done", p->plan.id, p->plan.name);
  return Status::Ok();
}

Status PlanRunner::StartPhaseRoundLocked(PlanProgress* p, bool* moved_on) {
  const PlanPhase& ph = p->spec.phases[p->phase];
  json& out = p->outcomes[p->phase];
  const std::string where = p->Where();
  bool updated = false;
  store::NewSubmission sub;
  std::string skip;
  Status s = BuildPhaseRound(store_, limits_, p->plan, ph, p->phase, &sub, &skip);
  if (!s.ok()) {
    out = {{"state", "failed"}, {"outcome", s.message()}};
    XV_RETURN_IF_ERROR(SavePlan(*p, PlanState::kFailed, where + ": " + s.message(), &updated));
    spdlog::warn("plan {} ({}): failed at {}: {}", p->plan.id, p->plan.name, where, s.message());
    return Status::Ok();
  }
  if (!skip.empty()) {
    out = {{"state", "skipped"}, {"outcome", skip}};
    ++p->phase;
    XV_RETURN_IF_ERROR(SavePlan(*p, PlanState::kRunning, "", &updated));
    if (!updated) return Status::Ok();
    spdlog::info("plan {} ({}): {} {}", p->plan.id, p->plan.name, where, skip);
    *moved_on = true;
    return Status::Ok();
  }
  store::SubmissionIds ids;
  s = store_->submissions().InsertSubmission(sub, &ids);
  if (s.code() == Status::Code::kAlreadyExists) {  // built meanwhile: look again
    *moved_on = true;
    return Status::Ok();
  }
  XV_RETURN_IF_ERROR(s);
  out = {{"state", "running"}, {"round_id", ids.round_id}};
  XV_RETURN_IF_ERROR(SavePlan(*p, PlanState::kRunning, "", &updated));
  spdlog::info("plan {} ({}): {} round {} with {} experiment(s)", p->plan.id, p->plan.name, where,
               ids.round_id, ids.experiment_ids.size());
  if (closer_ != nullptr) {
    // All reused: decided now. On failure the daemon loop decides it on its next tick.
    const Status decided = closer_->DecideReadyRounds(nullptr);
    if (!decided.ok())
      spdlog::error("plan {}: deciding rounds: {}", p->plan.id, decided.ToString());
  }
  if (dispatcher_ != nullptr) dispatcher_->RequestSchedule();
  *moved_on = true;  // a round decided at once moves on in the next pass
  return Status::Ok();
}

Status PlanRunner::AwaitRoundLocked(PlanProgress* p, const store::PlanRound& round) {
  json& out = p->outcomes[p->phase];
  if (out.value("round_id", int64_t{0}) == round.round_id) return Status::Ok();
  // Stored before a restart, not yet recorded in the plan.
  out = {{"state", "running"}, {"round_id", round.round_id}};
  bool updated = false;
  return SavePlan(*p, PlanState::kRunning, "", &updated);
}

Status PlanRunner::RecordRoundOutcomeLocked(PlanProgress* p, const store::PlanRound& round,
                                            bool* moved_on) {
  // Decided (or cancelled by hand): record the outcome and move on.
  const PlanPhase& ph = p->spec.phases[p->phase];
  const std::string where = p->Where();
  json& out = p->outcomes[p->phase];
  std::string line =
      RoundIs(round, RoundState::kCancelled) ? "round cancelled" : round.decision_summary;
  out = {{"state", "decided"},
         {"round_id", round.round_id},
         {"kept", round.kept_candidate.empty() ? json() : json(round.kept_candidate)}};
  if (ph.kind == PlanPhaseKind::kFailureMap) {
    json detail;
    XV_RETURN_IF_ERROR(FailureBoundary(store_, ph, round.round_id, &line, &detail));
    out["failure_map"] = detail;
  }
  out["outcome"] = line;
  ++p->phase;
  PlanState state = PlanState::kRunning;
  std::string reason;
  if (ph.stop_if_no_keep && round.kept_candidate.empty()) {
    state = PlanState::kDone;
    reason = "stopped after " + where + ": stop_if no_keep and nothing was kept";
    for (size_t i = p->phase; i < p->outcomes.size(); ++i) p->outcomes[i] = {{"state", "stopped"}};
  }
  bool updated = false;
  XV_RETURN_IF_ERROR(SavePlan(*p, state, reason, &updated));
  if (updated && state != PlanState::kRunning) {
    spdlog::info("plan {} ({}): {}", p->plan.id, p->plan.name, reason);
  }
  *moved_on = updated && state == PlanState::kRunning;
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
        if (RoundIs(r, RoundState::kOpen)) {
          p->set_state("running");
          p->set_outcome(std::to_string(r.unfinished) + " experiment(s) unfinished");
        } else {
          p->set_state(RoundIs(r, RoundState::kDecided) ? "decided" : "cancelled");
          p->set_outcome(r.decision_summary);
          p->set_kept_candidate(r.kept_candidate);
        }
      }
    }
  }
  return Status::Ok();
}

}  // namespace xv::daemon
