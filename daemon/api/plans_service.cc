#include "daemon/api/plans_service.h"

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json_or_discarded.h"
#include "common/recipe.h"
#include "common/run_states.h"
#include "daemon/api/grpc_status.h"
#include "daemon/api/reply_caps.h"
#include "daemon/api/request_limits.h"
#include "daemon/engine/campaign_policy.h"
#include "daemon/sched/plan_spec.h"

namespace xv::daemon {
namespace {

// Every candidate of every phase applied to `head`: a combination that cannot work (a batch that
// does not divide, heads that do not fit) is refused now rather than in the middle of the night.
// The head may move before a later phase runs; those phases are checked again when built.
Status CheckPhasesAgainstHead(const sched::PlanSpec& spec, const Recipe& head) {
  for (size_t i = 0; i < spec.phases.size(); ++i) {
    const auto candidates = sched::ExpandPhaseCandidates(spec.phases[i]);
    for (size_t c = 0; c < candidates.size(); ++c) {
      Recipe r = head;
      Status s = ApplyOverrides(candidates[c], &r);
      ResolvedSizes sizes;
      if (s.ok()) s = ResolveSizes(r, &sizes);
      if (!s.ok()) {
        // At most ~200 bytes of the overrides: the cause comes after them.
        const std::string joined = sched::JoinPlanOverrides(candidates[c]);
        const std::string shown = joined.size() <= kMaxQuoteBytes
                                      ? joined
                                      : std::string(Utf8Prefix(joined, kMaxQuoteBytes)) + "…";
        return Status::InvalidArgument("phases[" + std::to_string(i) + "] (" + spec.phases[i].name +
                                       "): candidate " + std::to_string(c + 1) + " (" + shown +
                                       ") on the campaign head: " + s.message());
      }
    }
  }
  return Status::Ok();
}

}  // namespace

PlansService::PlansService(store::Store* store, Dispatcher* dispatcher, CampaignsService* campaigns,
                           PlanRunner* runner)
    : store_(store), dispatcher_(dispatcher), campaigns_(campaigns), runner_(runner) {}

grpc::Status PlansService::SubmitPlan(grpc::ServerContext* ctx,
                                      const xv::v1::SubmitPlanRequest* req, xv::v1::Plan* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Plans/SubmitPlan");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "SubmitPlan"); !limited.ok()) {
    return limited;
  }
  sched::PlanSpec spec;
  Status s = CheckRequestLimits(*req);
  if (s.ok()) s = sched::ParsePlanYaml(req->yaml(), &spec);
  if (!s.ok()) {
    spdlog::info("plan submit refused ({}): {}", ctx->peer(), BoundedStatusMessage(s.message()));
    return ToGrpcStatus(s);
  }
  bool found = false;
  store::CampaignHead head;
  s = store_->campaigns().FindCampaignHead(spec.campaign, &found, &head);
  if (!s.ok()) return ToGrpcStatus(s);
  Recipe head_recipe;
  if (found) {
    s = ParseRecipeJson(ParseBoundedJsonOrDiscarded(head.head_recipe_json), &head_recipe);
  } else if (!spec.create.set) {
    s = Status::InvalidArgument("campaign: '" + spec.campaign +
                                "' does not exist (create it with xvctl campaign create, or add "
                                "a create: section with its recipe and policy)");
  } else if (req->base_recipe_yaml().empty()) {
    s = Status::InvalidArgument("create.recipe: send the text of " + spec.create.recipe_path +
                                " as base_recipe_yaml (xvctl plan submit does)");
  } else if (!spec.create.policy_path.empty() && req->policy().empty()) {
    s = Status::InvalidArgument("create.policy: send the text of " + spec.create.policy_path +
                                " as policy (xvctl plan submit does)");
  } else {
    s = ParseRecipeYaml(req->base_recipe_yaml(), &head_recipe).WithContext("create.recipe: ");
  }
  if (s.ok()) s = CheckPhasesAgainstHead(spec, head_recipe);
  if (!s.ok()) return ToGrpcStatus(s);
  if (!found) {
    xv::v1::CreateCampaignRequest create;
    create.set_name(spec.campaign);
    create.set_base_recipe_yaml(req->base_recipe_yaml());
    create.set_recipe_name(spec.create.recipe_path);
    create.set_policy(spec.create.policy_yaml.empty() ? req->policy() : spec.create.policy_yaml);
    create.set_device_filter(spec.create.device_filter);
    create.set_trainer(spec.create.trainer);
    xv::v1::Campaign created;
    grpc::Status gs = campaigns_->CreateCampaign(ctx, &create, &created);
    if (!gs.ok()) {
      return grpc::Status(gs.error_code(), "create: " + gs.error_message());
    }
    s = store_->campaigns().FindCampaignHead(spec.campaign, &found, &head);
    if (!s.ok()) return ToGrpcStatus(s);
  }
  CampaignPolicy policy;
  s = ParseStoredCampaignPolicy(head.policy_json, &policy);
  if (s.ok() && (!policy.set || policy.manual)) {
    s = Status::FailedPrecondition(
        "campaign: '" + spec.campaign +
        "' has no acceptance policy that decides automatically (decide: auto); a plan's phases "
        "wait for decisions");
  }
  if (!s.ok()) return ToGrpcStatus(s);
  store::StoredPlan plan;
  plan.campaign_id = head.id;
  plan.name = spec.name;
  plan.yaml = req->yaml();
  plan.submitter = req->submitter().empty() ? ctx->peer() : req->submitter();
  int64_t id = 0;
  s = store_->plans().InsertPlan(plan, &id);
  if (!s.ok()) return ToGrpcStatus(s);
  spdlog::info("plan '{}' (id {}) submitted for campaign '{}': {} phase(s)", spec.name, id,
               spec.campaign, spec.phases.size());
  s = runner_->Advance(id);
  if (!s.ok()) spdlog::error("plan {}: {}", id, s.ToString());
  s = store_->plans().GetPlan(id, "", &plan);
  if (s.ok()) s = runner_->Describe(plan, true, resp);
  return ToGrpcStatus(s);
}

grpc::Status PlansService::GetPlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                                   xv::v1::Plan* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Plans/GetPlan");
      !denied.ok()) {
    return denied;
  }
  if (Status s = CheckRequestLimits(*req); !s.ok()) return ToGrpcStatus(s);
  if (req->id() == 0 && req->name().empty()) {
    return ToGrpcStatus(Status::InvalidArgument("id/name: give a plan id or name"));
  }
  store::StoredPlan plan;
  Status s = store_->plans().GetPlan(req->id(), req->name(), &plan);
  if (s.ok()) s = runner_->Describe(plan, true, resp);
  return ToGrpcStatus(s);
}

grpc::Status PlansService::ListPlans(grpc::ServerContext* ctx, const xv::v1::ListPlansRequest* req,
                                     xv::v1::ListPlansResponse* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Plans/ListPlans");
      !denied.ok()) {
    return denied;
  }
  std::vector<store::StoredPlan> plans;
  Status s = CheckRequestLimits(*req);
  if (s.ok()) s = store_->plans().ListPlans(req->state(), &plans);
  for (size_t i = 0; s.ok() && i < plans.size(); ++i) {
    s = runner_->Describe(plans[i], false, resp->add_plans());
  }
  if (!s.ok()) return ToGrpcStatus(s);
  NoteRowsOmitted(ctx, TrimRowsToReplyCap(*resp, resp->mutable_plans(), KeepRows::kLast));
  return grpc::Status::OK;
}

grpc::Status PlansService::CancelPlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                                      xv::v1::Plan* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Plans/CancelPlan");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "CancelPlan"); !limited.ok()) {
    return limited;
  }
  if (Status s = CheckRequestLimits(*req); !s.ok()) return ToGrpcStatus(s);
  if (req->id() == 0 && req->name().empty()) {
    return ToGrpcStatus(Status::InvalidArgument("id/name: give a plan id or name"));
  }
  store::StoredPlan plan;
  Status s = store_->plans().GetPlan(req->id(), req->name(), &plan);
  if (!s.ok()) return ToGrpcStatus(s);
  // Under the runner's lock: a plan step in between would otherwise have its phase and outcomes
  // overwritten by the ones read here.
  s = runner_->Cancel(plan.id);
  if (!s.ok()) return ToGrpcStatus(s);
  // The current phase's unfinished experiments would only spend device time now.
  std::vector<store::PlanRound> rounds;
  s = store_->plans().ListPlanRounds(plan.id, &rounds);
  for (const auto& r : rounds) {
    if (!s.ok() || r.state != RoundState::kOpen) continue;
    xv::v1::ListExperimentsRequest lr;
    lr.set_round_id(r.round_id);
    lr.set_limit(1000);
    std::vector<xv::v1::Experiment> exps;
    s = store_->experiments().ListExperiments(lr, &exps);
    for (const auto& e : exps) {
      if (!s.ok()) break;
      ExperimentState state = ExperimentState::kCancelled;
      if (!ParseExperimentState(e.state(), &state) || IsTerminal(state)) continue;
      ExperimentState previous_state = ExperimentState::kCancelled;
      int64_t worker_id = 0;
      int attempt = 0;
      s = store_->attempts().CancelExperiment(e.id(), &previous_state, &worker_id, &attempt);
      if (s.ok() && worker_id != 0 && dispatcher_ != nullptr) {
        dispatcher_->SendCancel(worker_id, e.id(), attempt, "plan cancelled");
      }
    }
  }
  if (!s.ok()) return ToGrpcStatus(s);
  spdlog::info("plan {} ({}) cancelled", plan.id, plan.name);
  s = store_->plans().GetPlan(plan.id, "", &plan);
  if (s.ok()) s = runner_->Describe(plan, true, resp);
  return ToGrpcStatus(s);
}

grpc::Status PlansService::PausePlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                                     xv::v1::Plan* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Plans/PausePlan");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "PausePlan"); !limited.ok()) {
    return limited;
  }
  return SetPaused(*req, true, resp);
}

grpc::Status PlansService::ResumePlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                                      xv::v1::Plan* resp) {
  if (grpc::Status denied = AuthorizeCall(authorizer_, *ctx, "/xv.v1.Plans/ResumePlan");
      !denied.ok()) {
    return denied;
  }
  if (grpc::Status limited = AdmitCaller(rate_limiter_, *ctx, "ResumePlan"); !limited.ok()) {
    return limited;
  }
  return SetPaused(*req, false, resp);
}

grpc::Status PlansService::SetPaused(const xv::v1::GetPlanRequest& req, bool pause,
                                     xv::v1::Plan* resp) {
  if (Status s = CheckRequestLimits(req); !s.ok()) return ToGrpcStatus(s);
  if (req.id() == 0 && req.name().empty()) {
    return ToGrpcStatus(Status::InvalidArgument("id/name: give a plan id or name"));
  }
  store::StoredPlan plan;
  Status s = store_->plans().GetPlan(req.id(), req.name(), &plan);
  if (s.ok()) s = pause ? runner_->Pause(plan.id) : runner_->Resume(plan.id);
  if (s.ok()) s = store_->plans().GetPlan(plan.id, "", &plan);
  if (s.ok()) s = runner_->Describe(plan, true, resp);
  return ToGrpcStatus(s);
}

}  // namespace xv::daemon
