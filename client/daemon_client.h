// DaemonClient: xvctl's connection to xvd's Experiments and Campaigns services. Calls return
// xv::Status; a daemon that does not answer becomes Unavailable with a message that says how to
// start it, and the daemon's own INVALID_ARGUMENT messages (which name the field) are passed
// through unchanged. Thread-safety: safe to share (gRPC stubs are thread-safe).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "client/client_options.h"
#include "common/status.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::client {

class DaemonClient {
 public:
  explicit DaemonClient(const ClientOptions& options);

  const std::string& address() const { return address_; }
  // The channel every stub of this client uses (TLS and the token, proto/daemon_channel.h); other
  // services' stubs (Plans, Tokens, Audit) are made on it.
  const std::shared_ptr<grpc::Channel>& channel() const { return channel_; }

  Status Submit(const v1::SubmitRequest& req, v1::SubmitResponse* resp);
  Status ListExperiments(const v1::ListExperimentsRequest& req, v1::ListExperimentsResponse* resp);
  // The same, and *matching: how many experiments match the filters past the request's cursor
  // (this page's rows and every later page's), counted by the daemon (the `xv-count-matching`
  // request metadata, daemon/api/reply_caps.h); -1 when the daemon did not say (an older one).
  Status ListExperiments(const v1::ListExperimentsRequest& req, v1::ListExperimentsResponse* resp,
                         int64_t* matching);
  Status GetExperiment(int64_t id, v1::Experiment* resp);
  Status GetStatus(v1::StatusResponse* resp);
  // Experiments.Watch: a stream read with reader->Read until it returns false, then Finish().
  // `ctx` (no deadline: a watch lasts) must outlive the reader; ctx->TryCancel() ends it.
  std::unique_ptr<grpc::ClientReader<v1::WatchEvent>> Watch(grpc::ClientContext* ctx,
                                                            const v1::WatchRequest& req);
  Status DrainWorker(const v1::DrainWorkerRequest& req, v1::DrainWorkerResponse* resp);
  // Experiments.Cancel: a queued, assigned or running experiment ends `cancelled` (its trainer is
  // stopped); a finished one keeps its state. resp->state() is the state after the call.
  // NotFound for an unknown id.
  Status Cancel(int64_t experiment_id, v1::CancelResponse* resp);

  // Campaigns service. `name_or_id` is a campaign name, or its numeric id.
  Status CreateCampaign(const v1::CreateCampaignRequest& req, v1::Campaign* resp);
  Status GetCampaign(const std::string& name_or_id, v1::Campaign* resp);
  // The campaign without its rounds and head history (its budget, head recipe and policy): one
  // row, whatever the campaign's size (the `xv-campaign-rounds: none` request metadata,
  // daemon/api/reply_caps.h; an older daemon sends everything).
  Status GetCampaignSummary(const std::string& name_or_id, v1::Campaign* resp);
  // The campaign with only the rounds of `round_ids` (at most 1000; ids of other campaigns match
  // none) and no head history. An older daemon sends every round: callers look theirs up by id.
  Status GetCampaignRounds(const std::string& name_or_id, const std::vector<int64_t>& round_ids,
                           v1::Campaign* resp);
  Status ListCampaigns(v1::ListCampaignsResponse* resp);
  // pause = true: PauseCampaign, else ResumeCampaign.
  Status SetCampaignPaused(const std::string& name_or_id, bool pause, v1::Campaign* resp);
  Status Decide(const v1::DecideRequest& req, v1::RoundInfo* resp);
  Status FailureSummary(const v1::FailureSummaryRequest& req, v1::FailureSummaryResponse* resp);

  // Translates a gRPC status of a call to this daemon.
  Status FromGrpc(const grpc::Status& st) const;

 private:
  // Half a TLS pair or an unreadable file: every call fails with this (set when the channel
  // could not be made as asked; the channel is then plaintext and unused).
  Status open_error_;
  std::string address_;
  std::string state_dir_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Experiments::Stub> stub_;
  std::unique_ptr<v1::Campaigns::Stub> campaigns_;
};

}  // namespace xv::client
