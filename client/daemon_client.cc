#include "client/daemon_client.h"

#include <chrono>

namespace xv::client {
namespace {

void SetDeadline(grpc::ClientContext* ctx, int seconds) {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
}

}  // namespace

DaemonClient::DaemonClient(const ClientOptions& options)
    : address_(options.DaemonAddress()), state_dir_(options.StateDir()) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(address_, grpc::InsecureChannelCredentials(), args);
  stub_ = v1::Experiments::NewStub(channel_);
}

Status DaemonClient::FromGrpc(const grpc::Status& st) const {
  if (st.ok()) return Status::Ok();
  switch (st.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Status::Unavailable("cannot reach xvd at " + address_ +
                                 ": is it running? (start it with: xvd --state-dir " + state_dir_ +
                                 ")");
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Status::DeadlineExceeded("xvd at " + address_ + " did not answer in time");
    case grpc::StatusCode::INVALID_ARGUMENT:
      return Status::InvalidArgument(st.error_message());
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

Status DaemonClient::GetExperiment(int64_t id, v1::Experiment* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  v1::GetExperimentRequest req;
  req.set_id(id);
  return FromGrpc(stub_->GetExperiment(&ctx, req, resp));
}

Status DaemonClient::GetStatus(v1::StatusResponse* resp) {
  grpc::ClientContext ctx;
  SetDeadline(&ctx, 30);
  return FromGrpc(stub_->Status(&ctx, v1::StatusRequest(), resp));
}

}  // namespace xv::client
