// stream over gRPC, driven message by message by the test.
#pragma once

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
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
    running_ = running;
    EXPECT_TRUE(stream_->Write(m));
  }

  // Reads until a message satisfying `pred` arrives; the others are kept in `seen`.
  template <typename Pred>
  bool ReadUntil(Pred pred, xv::v1::DaemonMessage* out) {
    xv::v1::DaemonMessage m;
    while (stream_->Read(&m)) {
      seen.push_back(m);
      if (m.has_assign()) {
        xv::v1::RunningAttempt ra;
        ra.set_experiment_id(m.assign().spec().experiment_id());
        ra.set_attempt(m.assign().spec().attempt());
        std::lock_guard<std::mutex> lock(running_mu_);
        running_.push_back(ra);
      }
      if (pred(m)) {
        *out = m;
        return true;
      }
    }
    return false;
  }

  void Send(const xv::v1::WorkerMessage& m) {
    if (m.has_finished()) {
      std::lock_guard<std::mutex> lock(running_mu_);
      for (auto it = running_.begin(); it != running_.end(); ++it) {
        if (it->experiment_id() == m.finished().experiment_id() &&
            it->attempt() == m.finished().attempt()) {
          running_.erase(it);
          break;
        }
      }
    }
    std::lock_guard<std::mutex> lock(write_mu_);
    EXPECT_TRUE(stream_->Write(m));
  }

  // Sends a Heartbeat listing the attempts it holds (the `running` of the constructor, every Assign
  // read, minus those it sent Finished for) every `interval` from a background thread until
  // Close(), as a live worker does (gRPC allows one writer at a time, hence write_mu_).
  void StartHeartbeats(std::chrono::milliseconds interval) {
    heartbeat_ = std::thread([this, interval] {
      std::unique_lock<std::mutex> lock(stop_mu_);
      while (!stop_cv_.wait_for(lock, interval, [this] { return stopping_; })) {
        xv::v1::WorkerMessage hb;
        hb.mutable_heartbeat();
        {
          std::lock_guard<std::mutex> r(running_mu_);
          for (const auto& ra : running_) *hb.mutable_heartbeat()->add_running() = ra;
        }
        std::lock_guard<std::mutex> w(write_mu_);
        stream_->Write(hb);
      }
    });
  }

  // Drops every held attempt from the heartbeats, as a worker that lost track of them would.
  void ForgetAttempts() {
    std::lock_guard<std::mutex> lock(running_mu_);
    running_.clear();
  }

  ~FakeWorker() { StopHeartbeats(); }

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
    StopHeartbeats();
    stream_->WritesDone();
    xv::v1::DaemonMessage m;
    while (stream_->Read(&m)) seen.push_back(m);
    return stream_->Finish();
  }

  std::vector<xv::v1::DaemonMessage> seen;

 private:
  void StopHeartbeats() {
    {
      std::lock_guard<std::mutex> lock(stop_mu_);
      stopping_ = true;
    }
    stop_cv_.notify_all();
    if (heartbeat_.joinable()) heartbeat_.join();
  }

  static std::string nlohmann_type(const std::string& json) {
    auto p = json.find("\"type\":\"");
    return json.substr(p + 8, json.find('"', p + 8) - (p + 8));
  }
  std::unique_ptr<xv::v1::Workers::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<Stream> stream_;
  std::mutex write_mu_;
  std::mutex running_mu_;
  std::vector<xv::v1::RunningAttempt> running_;  // guarded by running_mu_
  std::mutex stop_mu_;
  std::condition_variable stop_cv_;
  bool stopping_ = false;  // guarded by stop_mu_
  std::thread heartbeat_;
};

}  // namespace xv::daemon::fake
