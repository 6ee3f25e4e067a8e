// PlansService: the xv.v1.Plans gRPC service (SubmitPlan, GetPlan, ListPlans, CancelPlan,
// PausePlan, ResumePlan), a thin layer over the store, the campaigns service (a plan's `create:`
// section) and the PlanRunner.
// Thread-safety: gRPC calls the methods concurrently; all state lives in the store.
#pragma once

#include "daemon/api/authorizer.h"
#include "daemon/api/caller_rate_limiter.h"
#include "daemon/api/campaigns_service.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/plan_runner.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::daemon {

class PlansService final : public xv::v1::Plans::Service {
 public:
  // Every pointer must outlive the service.
  PlansService(store::Store* store, Dispatcher* dispatcher, CampaignsService* campaigns,
               PlanRunner* runner);

  // Validates the YAML (errors name the YAML path), checks every candidate of every phase against
  // the campaign's current head (the combination rules), creates the campaign from `create:` when
  // it does not exist, stores the plan and starts its first phase. The campaign needs a policy
  // that decides automatically.
  grpc::Status SubmitPlan(grpc::ServerContext* ctx, const xv::v1::SubmitPlanRequest* req,
                          xv::v1::Plan* resp) override;
  grpc::Status GetPlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                       xv::v1::Plan* resp) override;
  grpc::Status ListPlans(grpc::ServerContext* ctx, const xv::v1::ListPlansRequest* req,
                         xv::v1::ListPlansResponse* resp) override;
  grpc::Status CancelPlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                          xv::v1::Plan* resp) override;
  // Through PlanRunner::Pause/Resume; the plan as GetPlan returns it. NOT_FOUND naming an unknown
  // plan, FAILED_PRECONDITION naming the plan and its state.
  grpc::Status PausePlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                         xv::v1::Plan* resp) override;
  grpc::Status ResumePlan(grpc::ServerContext* ctx, const xv::v1::GetPlanRequest* req,
                          xv::v1::Plan* resp) override;

  // Per-caller rate limit of the state-changing calls (null: none); call before the server
  // starts. Must outlive the service.
  void SetRateLimiter(CallerRateLimiter* limiter) { rate_limiter_ = limiter; }
  // Every method asks `authorizer` first (daemon/api/authorizer.h); null admits every call.
  void SetAuthorizer(const Authorizer* authorizer) { authorizer_ = authorizer; }

 private:
  // Pause (true) or resume (false) the plan of `req`, then describe it into `resp`.
  grpc::Status SetPaused(const xv::v1::GetPlanRequest& req, bool pause, xv::v1::Plan* resp);

  store::Store* const store_;
  Dispatcher* const dispatcher_;
  CampaignsService* const campaigns_;
  PlanRunner* const runner_;
  CallerRateLimiter* rate_limiter_ = nullptr;
  const Authorizer* authorizer_ = nullptr;
};

}  // namespace xv::daemon
