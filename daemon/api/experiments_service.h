// ExperimentsService: the xv.v1.Experiments gRPC service (Submit, ListExperiments, GetExperiment,
// Status, Cancel), a thin layer over the store, the submission builder and the dispatcher.
// Submit: with recipe_yaml, candidates are built from that recipe (the campaign is created on
// first use with it as base, no policy); without, from the named campaign's head. A campaign
// with a policy gets its replicates and head controls in every round.
// Thread-safety: gRPC calls the methods concurrently; all state lives in the store and dispatcher.
#pragma once

#include <string>

#include "daemon/api/authorizer.h"
#include "daemon/api/caller_rate_limiter.h"
#include "daemon/api/watch_hub.h"
#include "daemon/engine/dispatcher.h"
#include "daemon/engine/round_closer.h"
#include "daemon/engine/submission_builder.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::daemon {

// Watch runs on gRPC's callback API (no thread per stream); the other methods are synchronous.
class ExperimentsService final
    : public xv::v1::Experiments::WithCallbackMethod_Watch<xv::v1::Experiments::Service> {
 public:
  // `store`, `dispatcher` and `closer` (may be null: no decisions at submit) must outlive the
  // service.
  ExperimentsService(store::Store* store, Dispatcher* dispatcher, SubmissionLimits limits,
                     std::string version, RoundCloser* closer = nullptr);

  grpc::Status Submit(grpc::ServerContext* ctx, const xv::v1::SubmitRequest* req,
                      xv::v1::SubmitResponse* resp) override;
  grpc::Status ListExperiments(grpc::ServerContext* ctx, const xv::v1::ListExperimentsRequest* req,
                               xv::v1::ListExperimentsResponse* resp) override;
  grpc::Status GetExperiment(grpc::ServerContext* ctx, const xv::v1::GetExperimentRequest* req,
                             xv::v1::Experiment* resp) override;
  grpc::Status Status(grpc::ServerContext* ctx, const xv::v1::StatusRequest* req,
                      xv::v1::StatusResponse* resp) override;
  grpc::Status Cancel(grpc::ServerContext* ctx, const xv::v1::CancelRequest* req,
                      xv::v1::CancelResponse* resp) override;
  // daemon/api/watch_stream.h; UNAVAILABLE until SetWatchHub.
  grpc::ServerWriteReactor<xv::v1::WatchEvent>* Watch(grpc::CallbackServerContext* ctx,
                                                      const xv::v1::WatchRequest* req) override;
  grpc::Status DrainWorker(grpc::ServerContext* ctx, const xv::v1::DrainWorkerRequest* req,
                           xv::v1::DrainWorkerResponse* resp) override;

  // The event broadcast Watch subscribes to; call before the server starts. Must outlive it.
  void SetWatchHub(WatchHub* hub) { watch_hub_ = hub; }

  // Per-caller rate limit of the state-changing calls (null: none); call before the server
  // starts. Must outlive the service.
  void SetRateLimiter(CallerRateLimiter* limiter) { rate_limiter_ = limiter; }
  // Every method asks `authorizer` first (daemon/api/authorizer.h); null admits every call.
  void SetAuthorizer(const Authorizer* authorizer) { authorizer_ = authorizer; }

 private:
  // Submit's rows: candidates from req.recipe_yaml, or (when empty) from the campaign's head; when
  // the campaign has a policy, its replicates and head controls.
  xv::Status BuildCampaignSubmission(const xv::v1::SubmitRequest& req, store::NewSubmission* sub);
  // A `submit` token cancels only the experiments it submitted (their round's submitter is its
  // label): PERMISSION_DENIED naming the experiment otherwise, NOT_FOUND for an unknown id. Admin
  // tokens, the local owner and a daemon without tokens pass.
  grpc::Status CheckCancelsOwn(const Caller& caller, int64_t experiment_id);

  store::Store* const store_;
  Dispatcher* const dispatcher_;
  RoundCloser* const closer_;
  const SubmissionLimits limits_;
  const std::string version_;
  WatchHub* watch_hub_ = nullptr;
  CallerRateLimiter* rate_limiter_ = nullptr;
  const Authorizer* authorizer_ = nullptr;
};

}  // namespace xv::daemon
