// stream over gRPC, driven message by message by the test.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "xv/v1/workers.grpc.pb.h"

namespace xv::daemon::fake {

using Stream = grpc::ClientReaderWriter<xv::v1::WorkerMessage, xv::v1::DaemonMessage>;

// A worker as the daemon sees it: one Session stream, driven by the test.
class FakeWorker {
 public:
  FakeWorker(const std::shared_ptr<grpc::Channel>& channel, const std::string& name,
             const std::vector<xv::v1::RunningAttempt>& running = {}) {
    stub_ = xv::v1::Workers::NewStub(channel);
    ctx_.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
    stream_ = stub_->Session(&ctx_);
    xv::v1::WorkerMessage m;
    auto* reg = m.mutable_register_();
    reg->set_worker_name(name);
    reg->mutable_device()->set_name("cpu: fake");
    reg->mutable_device()->set_vendor("cpu");
    reg->mutable_device()->set_backend("cpu");
    reg->mutable_device()->set_index(-1);
    reg->mutable_capabilities()->add_trainers("libtorch");
    reg->mutable_capabilities()->set_max_concurrent(1);
    for (const auto& ra : running) *reg->add_running() = ra;
    EXPECT_TRUE(stream_->Write(m));
  }

  // Reads until a message satisfying `pred` arrives; the others are kept in `seen`.
  template <typename Pred>
  bool ReadUntil(Pred pred, xv::v1::DaemonMessage* out) {
    xv::v1::DaemonMessage m;
    while (stream_->Read(&m)) {
      seen.push_back(m);
      if (pred(m)) {
        *out = m;
        return true;
      }
    }
    return false;
  }

  void Send(const xv::v1::WorkerMessage& m) { EXPECT_TRUE(stream_->Write(m)); }

  void SendEvent(int64_t exp, int attempt, int64_t seq, const std::string& json) {
    xv::v1::WorkerMessage m;
    auto* ev = m.mutable_event();
    ev->set_experiment_id(exp);
    ev->set_attempt(attempt);
    ev->set_seq(seq);
    ev->set_type(nlohmann_type(json));
    ev->set_json(json);
    ev->set_unix_ms(1);
    Send(m);
  }

  grpc::Status Close() {
    stream_->WritesDone();
    xv::v1::DaemonMessage m;
    while (stream_->Read(&m)) seen.push_back(m);
    return stream_->Finish();
  }

  std::vector<xv::v1::DaemonMessage> seen;

 private:
  static std::string nlohmann_type(const std::string& json) {
    auto p = json.find("\"type\":\"");
    return json.substr(p + 8, json.find('"', p + 8) - (p + 8));
  }
  std::unique_ptr<xv::v1::Workers::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<Stream> stream_;
};

}  // namespace xv::daemon::fake
