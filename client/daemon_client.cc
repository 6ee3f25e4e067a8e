#include "client/daemon_client.h"

#include <chrono>
#include <iostream>
#include <string>

#include "client/numeric_ref.h"
#include "proto/daemon_channel.h"

namespace xv::client {
namespace {

void SetDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

v1::GetCampaignRequest CampaignRef(const std::string& name_or_id) {
  v1::GetCampaignRequest req;
  int64_t id = 0;
  if (ParseNumericRef(name_or_id, &id)) {
    req.set_id(id);
  } else {
    req.set_name(name_or_id);
  }
  return req;
}

// A reply the daemon trimmed under its size cap (daemon/api/reply_caps.h) says how many rows it
// left out in the `xv-rows-omitted` trailing metadata: say so on stderr.
Status NoteRowsOmitted(const grpc::ClientContext& ctx, const std::string& what, Status s) {
  const auto& trailers = ctx.GetServerTrailingMetadata();
  auto it = trailers.find("xv-rows-omitted");
  if (s.ok() && it != trailers.end()) {
    std::cerr << "xvctl: the daemon left out " << std::string(it->second.data(), it->second.size())
              << " " << what << " to keep its reply under its size cap\n";
  }
  return s;
}

}  // namespace

DaemonClient::DaemonClient(const ClientOptions& options)
    : address_(options.DaemonAddress()), state_dir_(options.StateDir()) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  DaemonChannelSecurity security;
  security.token = options.token;
  security.tls_ca = options.tls_ca;
  security.tls_cert = options.tls_cert;
  security.tls_key = options.tls_key;
  open_error_ = OpenDaemonChannel(address_, security, args, &channel_);
  if (!open_error_.ok()) {
    channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  }
  stub_ = v1::Experiments::NewStub(channel_);
  campaigns_ = v1::Campaigns::NewStub(channel_);
}

Status DaemonClient::FromGrpc(const grpc::Status& st) const {
  if (!open_error_.ok()) return open_error_;
  if (st.ok()) return Status::Ok();
  switch (st.error_code()) {
    case grpc::StatusCode::UNAUTHENTICATED:
      return Status::FailedPrecondition("xvd at " + address_ +
                                        " refused the call: " + st.error_message());
    case grpc::StatusCode::PERMISSION_DENIED:
      return Status::FailedPrecondition("xvd at " + address_ +
                                        " refused the call: " + st.error_message());
    case grpc::StatusCode::UNAVAILABLE:
      return Status::Unavailable("cannot reach xvd at " + address_ +
                                 ": is it running? (start it with: xvd --state-dir " + state_dir_ +
                                 ")");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded("xvd at " + address_ + " did not answer in time");
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(st.error_message());
    case grpc::StatusCode::ALREADY_EXISTS:
      return Status::AlreadyExists(st.error_message());
    case grpc::StatusCode::NOT_FOUND:
      return Status::NotFound(st.error_message());
    case grpc::StatusCode::FAILED_PRECONDITION:
      return Status::FailedPrecondition(st.error_message());
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
      return Status::ResourceExhausted(st.error_message());
    default:
      return Status::Internal("xvd at " + address_ + ": " + st.error_message());
  }
}

Status DaemonClient::Submit(const v1::SubmitRequest& req, v1::SubmitResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 60);
  return FromGrpc(stub_->Submit(&ctx, req, resp));
}

Status DaemonClient::ListExperiments(const v1::ListExperimentsRequest& req,
                                     v1::ListExperimentsResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return FromGrpc(stub_->ListExperiments(&ctx, req, resp));
}

Status DaemonClient::ListExperiments(const v1::ListExperimentsRequest& req,
                                     v1::ListExperimentsResponse* resp, int64_t* matching) {
  *matching = -1;
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  ctx.AddMetadata("xv-count-matching", "1");  // daemon/api/reply_caps.h
  Status st = FromGrpc(stub_->ListExperiments(&ctx, req, resp));
  const auto& trailers = ctx.GetServerTrailingMetadata();
  const auto it = trailers.find("xv-rows-matching");
  if (st.ok() && it != trailers.end()) {
    const std::string n(it->second.data(), it->second.size());
    if (!n.empty() && n.size() < 19 && n.find_first_not_of("0123456789") == std::string::npos) {
      *matching = std::stoll(n);
    }
  }
  return st;
}

Status DaemonClient::GetExperiment(int64_t id, v1::Experiment* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  v1::GetExperimentRequest req;
  req.set_id(id);
  return FromGrpc(stub_->GetExperiment(&ctx, req, resp));
}

std::unique_ptr<grpc::ClientReader<v1::WatchEvent>> DaemonClient::Watch(
    grpc::ClientContext* ctx, const v1::WatchRequest& req) {
  return stub_->Watch(ctx, req);
}

Status DaemonClient::DrainWorker(const v1::DrainWorkerRequest& req, v1::DrainWorkerResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return FromGrpc(stub_->DrainWorker(&ctx, req, resp));
}

Status DaemonClient::Cancel(int64_t experiment_id, v1::CancelResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  v1::CancelRequest req;
  req.set_experiment_id(experiment_id);
  return FromGrpc(stub_->Cancel(&ctx, req, resp));
}

Status DaemonClient::GetStatus(v1::StatusResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return FromGrpc(stub_->Status(&ctx, v1::StatusRequest(), resp));
}

Status DaemonClient::CreateCampaign(const v1::CreateCampaignRequest& req, v1::Campaign* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 60);
  return FromGrpc(campaigns_->CreateCampaign(&ctx, req, resp));
}

Status DaemonClient::GetCampaign(const std::string& name_or_id, v1::Campaign* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return NoteRowsOmitted(ctx, "of the oldest rounds and head changes",
                         FromGrpc(campaigns_->GetCampaign(&ctx, CampaignRef(name_or_id), resp)));
}

Status DaemonClient::GetCampaignSummary(const std::string& name_or_id, v1::Campaign* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  ctx.AddMetadata("xv-campaign-rounds", "none");  // daemon/api/reply_caps.h
  return FromGrpc(campaigns_->GetCampaign(&ctx, CampaignRef(name_or_id), resp));
}

Status DaemonClient::GetCampaignRounds(const std::string& name_or_id,
                                       const std::vector<int64_t>& round_ids, v1::Campaign* resp) {
  if (round_ids.empty()) return GetCampaignSummary(name_or_id, resp);
  if (round_ids.size() > 1000) {
    return Status::InvalidArgument("round_ids: at most 1000, got " +
                                   std::to_string(round_ids.size()));
  }
  std::string ids = "ids:";
  for (size_t i = 0; i < round_ids.size(); ++i) {
    ids += (i == 0 ? "" : ",") + std::to_string(round_ids[i]);
  }
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  ctx.AddMetadata("xv-campaign-rounds", ids);  // daemon/api/reply_caps.h
  return FromGrpc(campaigns_->GetCampaign(&ctx, CampaignRef(name_or_id), resp));
}

Status DaemonClient::ListCampaigns(v1::ListCampaignsResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return NoteRowsOmitted(
      ctx, "of the oldest campaigns",
      FromGrpc(campaigns_->ListCampaigns(&ctx, v1::ListCampaignsRequest(), resp)));
}

Status DaemonClient::SetCampaignPaused(const std::string& name_or_id, bool pause,
                                       v1::Campaign* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  v1::GetCampaignRequest req = CampaignRef(name_or_id);
  return FromGrpc(pause ? campaigns_->PauseCampaign(&ctx, req, resp)
                        : campaigns_->ResumeCampaign(&ctx, req, resp));
}

Status DaemonClient::Decide(const v1::DecideRequest& req, v1::RoundInfo* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return FromGrpc(campaigns_->Decide(&ctx, req, resp));
}

Status DaemonClient::FailureSummary(const v1::FailureSummaryRequest& req,
                                    v1::FailureSummaryResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return NoteRowsOmitted(ctx, "knob values", FromGrpc(campaigns_->FailureSummary(&ctx, req, resp)));
}

}  // namespace xv::client
