// Shared by the daemon's integration tests: FakeWorker, a worker as the daemon sees it (one Session
// stream over gRPC, driven message by message by the test), and the scripted trainer it can play
// (ScriptedValBpb, SummaryJson, RunScriptedWorker).
#pragma once

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

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

  // Sends events seq first_seq, first_seq + 1, ... of one attempt in one EventBatch message, as
  // xv-worker's outbox does with the events it holds ready (worker/event_outbox.h).
  void SendEventBatch(int64_t exp, int attempt, int64_t first_seq,
                      const std::vector<std::string>& jsons) {
    xv::v1::WorkerMessage m;
    for (size_t i = 0; i < jsons.size(); ++i) {
      auto* ev = m.mutable_event_batch()->add_events();
      ev->set_experiment_id(exp);
      ev->set_attempt(attempt);
      ev->set_seq(first_seq + static_cast<int64_t>(i));
      ev->set_type(nlohmann_type(jsons[i]));
      ev->set_json(jsons[i]);
      ev->set_unix_ms(1);
    }
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

// The scripted trainer: val_bpb of one run, a function of the recipe and its seed: 2.0, minus 0.01
// when matrix_lr is 0.05, plus noise (sd 0.0005) seeded by the seed and the recipe's other knobs,
// so that identical runs repeat exactly.
inline double ScriptedValBpb(const nlohmann::json& recipe) {
  const double lr = recipe.at("matrix_lr").get<double>();
  const double effect = std::abs(lr - 0.05) < 1e-12 ? -0.01 : 0.0;
  std::seed_seq seq{static_cast<unsigned>(recipe.at("seed").get<int64_t>()),
                    static_cast<unsigned>(std::hash<std::string>()(recipe.dump()) & 0xffffffff)};
  std::mt19937 rng(seq);
  std::normal_distribution<double> noise(0.0, 0.0005);
  return 2.0 + effect + noise(rng);
}

// The trainer's `summary` event (JSON) of a run that scored `val_bpb`.
inline std::string SummaryJson(double val_bpb) {
  return nlohmann::json{{"type", "summary"},     {"t", 30.0},
                        {"val_bpb", val_bpb},    {"training_seconds", 25},
                        {"total_seconds", 31},   {"num_steps", 30},
                        {"total_tokens", 61440}, {"num_params", 100},
                        {"tok_per_sec", 2000.0}, {"mfu_percent", nullptr},
                        {"peak_flops", nullptr}, {"metric_version", "1"}}
      .dump();
}

// A scripted worker named `worker_name` on `channel` that runs `n` assignments (fewer if the stream
// ends), heartbeating every 100 ms: each reports ScriptedValBpb in a summary event and finishes
// succeeded, except those `diverge` says diverge, which finish diverged with
// `diverged_stderr_tail`; every Finished is acknowledged before the next. The daemon may send the
// next Assign before that acknowledgement: it is kept and run next. Returns the experiment ids it
// ran, in order.
inline std::vector<int64_t> RunScriptedWorker(
    const std::shared_ptr<grpc::Channel>& channel, const std::string& worker_name, int n,
    const std::function<bool(const nlohmann::json&)>& diverge = nullptr,
    const std::string& diverged_stderr_tail = "") {
  FakeWorker worker(channel, worker_name);
  xv::v1::DaemonMessage msg;
  EXPECT_TRUE(worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  worker.StartHeartbeats(std::chrono::milliseconds(100));
  std::vector<int64_t> ran;
  std::deque<xv::v1::DaemonMessage> early;  // assigns read while waiting for an acknowledgement
  for (int i = 0; i < n; ++i) {
    if (!early.empty()) {
      msg = early.front();
      early.pop_front();
    } else if (!worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg)) {
      break;
    }
    const auto& spec = msg.assign().spec();
    const nlohmann::json recipe = nlohmann::json::parse(spec.recipe_json());
    ran.push_back(spec.experiment_id());
    xv::v1::WorkerMessage fin;
    fin.mutable_finished()->set_experiment_id(spec.experiment_id());
    fin.mutable_finished()->set_attempt(spec.attempt());
    if (diverge && diverge(recipe)) {
      fin.mutable_finished()->set_state("diverged");
      fin.mutable_finished()->set_failure_kind("diverged");
      if (!diverged_stderr_tail.empty()) {
        fin.mutable_finished()->set_stderr_tail(diverged_stderr_tail);
      }
    } else {
      worker.SendEvent(spec.experiment_id(), spec.attempt(), 1,
                       SummaryJson(ScriptedValBpb(recipe)));
      fin.mutable_finished()->set_state("succeeded");
      fin.mutable_finished()->set_last_seq(1);
    }
    worker.Send(fin);
    const int64_t id = spec.experiment_id();
    EXPECT_TRUE(worker.ReadUntil(
        [&](auto& m) {
          if (m.has_assign()) early.push_back(m);
          return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == id;
        },
        &msg));
  }
  worker.Close();
  return ran;
}

}  // namespace xv::daemon::fake
