// CampaignsService: the xv.v1.Campaigns gRPC service (CreateCampaign, GetCampaign, ListCampaigns,
// PauseCampaign, ResumeCampaign, Decide, FailureSummary), a thin layer over the store and the
// round closer. Thread-safety: gRPC calls the methods concurrently; all state lives in the store.
#pragma once

#include "common/run_states.h"
#include "daemon/api/authorizer.h"
#include "daemon/api/caller_rate_limiter.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/round_closer.h"
#include "daemon/engine/submission_builder.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::daemon {

class CampaignsService final : public xv::v1::Campaigns::Service {
 public:
  // `store`, `dispatcher` and `closer` must outlive the service.
  CampaignsService(store::Store* store, Dispatcher* dispatcher, RoundCloser* closer,
                   SubmissionLimits limits);

  grpc::Status CreateCampaign(grpc::ServerContext* ctx, const xv::v1::CreateCampaignRequest* req,
                              xv::v1::Campaign* resp) override;
  grpc::Status GetCampaign(grpc::ServerContext* ctx, const xv::v1::GetCampaignRequest* req,
                           xv::v1::Campaign* resp) override;
  grpc::Status ListCampaigns(grpc::ServerContext* ctx, const xv::v1::ListCampaignsRequest* req,
                             xv::v1::ListCampaignsResponse* resp) override;
  grpc::Status PauseCampaign(grpc::ServerContext* ctx, const xv::v1::GetCampaignRequest* req,
                             xv::v1::Campaign* resp) override;
  grpc::Status ResumeCampaign(grpc::ServerContext* ctx, const xv::v1::GetCampaignRequest* req,
                              xv::v1::Campaign* resp) override;
  grpc::Status Decide(grpc::ServerContext* ctx, const xv::v1::DecideRequest* req,
                      xv::v1::RoundInfo* resp) override;
  grpc::Status FailureSummary(grpc::ServerContext* ctx, const xv::v1::FailureSummaryRequest* req,
                              xv::v1::FailureSummaryResponse* resp) override;

  // Per-caller rate limit of the state-changing calls (null: none); call before the server
  // starts. Must outlive the service.
  void SetRateLimiter(CallerRateLimiter* limiter) { rate_limiter_ = limiter; }
  // Every method asks `authorizer` first (daemon/api/authorizer.h); null admits every call.
  void SetAuthorizer(const Authorizer* authorizer) { authorizer_ = authorizer; }

 private:
  // Pause/Resume: stores `state`; resuming schedules at once.
  grpc::Status SetState(const xv::v1::GetCampaignRequest& req, CampaignState state,
                        xv::v1::Campaign* resp);

  store::Store* const store_;
  Dispatcher* const dispatcher_;
  RoundCloser* const closer_;
  const SubmissionLimits limits_;
  CallerRateLimiter* rate_limiter_ = nullptr;
  const Authorizer* authorizer_ = nullptr;
};

}  // namespace xv::daemon
