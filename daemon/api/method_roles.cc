#include "daemon/api/method_roles.h"

#include "xv/v1/auth.pb.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon {
namespace {

using xv::TokenRole;

// A name or an id, as the Get*Request messages carry them.
template <typename Request>
std::string NameOrId(const char* what, const void* request) {
  const auto& r = *static_cast<const Request*>(request);
  if (r.id() != 0) return std::string(what) + " " + std::to_string(r.id());
  return std::string(what) + " " + r.name();
}

std::string SubmitTarget(const void* request) {
  const auto& r = *static_cast<const xv::v1::SubmitRequest*>(request);
  return "campaign " + (r.campaign().empty() ? std::string("default") : r.campaign());
}

std::string CancelTarget(const void* request) {
  return "experiment " +
         std::to_string(static_cast<const xv::v1::CancelRequest*>(request)->experiment_id());
}

std::string DrainTarget(const void* request) {
  const auto& r = *static_cast<const xv::v1::DrainWorkerRequest*>(request);
  return r.all() ? std::string("every worker") : "worker " + r.worker();
}

std::string CreateCampaignTarget(const void* request) {
  return "campaign " + static_cast<const xv::v1::CreateCampaignRequest*>(request)->name();
}

std::string CampaignTarget(const void* request) {
  return NameOrId<xv::v1::GetCampaignRequest>("campaign", request);
}

std::string DecideTarget(const void* request) {
  const auto& r = *static_cast<const xv::v1::DecideRequest*>(request);
  return "round " + std::to_string(r.round_id()) +
         (r.keep_experiment_id() != 0 ? " keep experiment " + std::to_string(r.keep_experiment_id())
                                      : std::string(" keep none"));
}

std::string SubmitPlanTarget(const void*) { return "plan"; }

std::string PlanTarget(const void* request) {
  return NameOrId<xv::v1::GetPlanRequest>("plan", request);
}

std::string CreateTokenTarget(const void* request) {
  const auto& r = *static_cast<const xv::v1::CreateTokenRequest*>(request);
  std::string t = "token role " + r.role();
  if (!r.name().empty()) t += " name " + r.name();
  if (!r.worker_name().empty()) t += " worker " + r.worker_name();
  return t;
}

std::string RevokeTokenTarget(const void* request) {
  return "token " + std::to_string(static_cast<const xv::v1::RevokeTokenRequest*>(request)->id());
}

}  // namespace

const std::vector<MethodRule>& MethodRules() {
  static const std::vector<MethodRule>* kRules = new std::vector<MethodRule>{
      {"/xv.v1.Experiments/Submit", TokenRole::kSubmit, true, &SubmitTarget},
      {"/xv.v1.Experiments/ListExperiments", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Experiments/GetExperiment", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Experiments/Status", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Experiments/Cancel", TokenRole::kSubmit, true, &CancelTarget},
      {"/xv.v1.Experiments/Watch", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Experiments/DrainWorker", TokenRole::kAdmin, true, &DrainTarget},
      {"/xv.v1.Campaigns/CreateCampaign", TokenRole::kSubmit, true, &CreateCampaignTarget},
      {"/xv.v1.Campaigns/GetCampaign", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Campaigns/ListCampaigns", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Campaigns/PauseCampaign", TokenRole::kSubmit, true, &CampaignTarget},
      {"/xv.v1.Campaigns/ResumeCampaign", TokenRole::kSubmit, true, &CampaignTarget},
      {"/xv.v1.Campaigns/Decide", TokenRole::kAdmin, true, &DecideTarget},
      {"/xv.v1.Campaigns/FailureSummary", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Plans/SubmitPlan", TokenRole::kSubmit, true, &SubmitPlanTarget},
      {"/xv.v1.Plans/GetPlan", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Plans/ListPlans", TokenRole::kRead, false, nullptr},
      {"/xv.v1.Plans/CancelPlan", TokenRole::kSubmit, true, &PlanTarget},
      {"/xv.v1.Plans/PausePlan", TokenRole::kSubmit, true, &PlanTarget},
      {"/xv.v1.Plans/ResumePlan", TokenRole::kSubmit, true, &PlanTarget},
      // The session's registration is audited by the Workers service itself (a bidi stream has no
      // single request or outcome for the interceptor to record).
      {"/xv.v1.Workers/Session", TokenRole::kWorker, false, nullptr},
      {"/xv.v1.Tokens/CreateToken", TokenRole::kAdmin, true, &CreateTokenTarget},
      {"/xv.v1.Tokens/ListTokens", TokenRole::kAdmin, false, nullptr},
      {"/xv.v1.Tokens/RevokeToken", TokenRole::kAdmin, true, &RevokeTokenTarget},
      {"/xv.v1.Audit/ListAudit", TokenRole::kAdmin, false, nullptr},
  };
  return *kRules;
}

const MethodRule* FindMethodRule(std::string_view method) {
  for (const MethodRule& rule : MethodRules()) {
    if (method == rule.method) return &rule;
  }
  return nullptr;
}

}  // namespace xv::daemon
