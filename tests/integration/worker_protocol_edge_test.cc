// The worker protocol's edge in xvd (issue 11), over real gRPC on a unix socket with an in-process
// DaemonServer and a hand-driven worker stream (a worker of another version, or a fake one, may
// send anything):
//  - an unreadable Finished (a proto3 string field holding invalid UTF-8) still ends its attempt,
//    as failed with the field named, and is acknowledged, so the worker stops resending it;
//  - odd bytes in the trainer text fields (bytes on the wire) are stored repaired and the attempt
//    ends as the worker said; listings keep working;
//  - an unreadable or out-of-bounds Register is refused with INVALID_ARGUMENT naming the field;
//  - max_concurrent from a worker is capped.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "common/untrusted_text.h"
#include "daemon/api/daemon_server.h"
#include "daemon/api/worker_message_edge.h"
#include "tests/integration/daemon_fake_worker.h"
#include "tests/integration/in_process_daemon.h"
#include "xv/v1/experiments.grpc.pb.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::daemon {
namespace {

using namespace std::chrono_literals;
using fake::FakeWorker;

std::string CpuTinyYaml() {
  const char* src = std::getenv("XV_SOURCE_DIR");
  std::ifstream f(std::string(src ? src : ".") + "/recipes/cpu-tiny.yaml");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

class WorkerProtocolEdge : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fake::FreshStateDir("xvd-edge");
    Status s = fake::StartInProcessDaemon(fake::FastDaemonOptions(dir_), &server_, &channel_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    experiments_ = xv::v1::Experiments::NewStub(channel_);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::vector<int64_t> Submit(int candidates) {
    xv::v1::SubmitRequest req;
    req.set_recipe_yaml(CpuTinyYaml());
    req.set_recipe_name("cpu-tiny");
    for (int i = 0; i < candidates; ++i) {
      auto* o = req.add_candidates()->add_overrides();
      o->set_key("matrix_lr");
      o->set_value(std::to_string(0.001 * (i + 1)));
    }
    xv::v1::SubmitResponse resp;
    grpc::ClientContext ctx;
    grpc::Status gs = experiments_->Submit(&ctx, req, &resp);
    EXPECT_TRUE(gs.ok()) << gs.error_message();
    return {resp.experiment_ids().begin(), resp.experiment_ids().end()};
  }

  xv::v1::Experiment Get(int64_t id) {
    grpc::ClientContext ctx;
    xv::v1::GetExperimentRequest req;
    req.set_id(id);
    xv::v1::Experiment e;
    grpc::Status s = experiments_->GetExperiment(&ctx, req, &e);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return e;
  }

  // A session whose only message is `reg`: the status the daemon ends it with.
  grpc::Status RegisterOnly(const xv::v1::Register& reg) {
    auto stub = xv::v1::Workers::NewStub(channel_);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 10s);
    auto stream = stub->Session(&ctx);
    xv::v1::WorkerMessage m;
    *m.mutable_register_() = reg;
    stream->Write(m);
    stream->WritesDone();
    xv::v1::DaemonMessage reply;
    while (stream->Read(&reply)) {
    }
    return stream->Finish();
  }

  std::filesystem::path dir_;
  std::unique_ptr<DaemonServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xv::v1::Experiments::Stub> experiments_;
};

TEST_F(WorkerProtocolEdge, AnUnreadableFinishedEndsItsAttemptAsFailedNamingTheField) {
  FakeWorker worker(channel_, "edge-1");
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  const std::vector<int64_t> ids = Submit(1);
  ASSERT_EQ(ids.size(), 1u);
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  xv::v1::WorkerMessage fin;
  fin.mutable_finished()->set_experiment_id(ids[0]);
  fin.mutable_finished()->set_attempt(1);
  fin.mutable_finished()->set_state("failed");
  fin.mutable_finished()->set_failure_kind("crash\xFF");  // a proto3 string: unparseable
  worker.Send(fin);
  ASSERT_TRUE(worker.ReadUntil(
      [&](auto& m) {
        return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == ids[0];
      },
      &msg));
  const xv::v1::Experiment e = Get(ids[0]);
  EXPECT_EQ(e.state(), "failed");
  EXPECT_EQ(e.failure_kind(), "crashed");
  EXPECT_NE(e.failure_detail().find("finished.failure_kind: not valid UTF-8"), std::string::npos)
      << e.failure_detail();
  // The session goes on: the worker is given the next experiment.
  const std::vector<int64_t> next = Submit(1);
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  EXPECT_EQ(msg.assign().spec().experiment_id(), next[0]);
}

TEST_F(WorkerProtocolEdge, OddBytesInTrainerTextAreStoredRepairedAndListingsWork) {
  FakeWorker worker(channel_, "edge-2");
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  const std::vector<int64_t> ids = Submit(1);
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  worker.SendEvent(ids[0], 1, 1, "{\"type\":\"log\",\"text\":\"\xFF\xFE\"}");
  std::string tail = "x";
  for (int i = 0; i < 9000; ++i) tail += "\xC3\xA9";  // 18,001 bytes of valid text
  tail += "\n\xFF\xFE";
  xv::v1::WorkerMessage fin;
  fin.mutable_finished()->set_experiment_id(ids[0]);
  fin.mutable_finished()->set_attempt(1);
  fin.mutable_finished()->set_exit_code(1);
  fin.mutable_finished()->set_state("failed");
  fin.mutable_finished()->set_failure_kind("crashed");
  fin.mutable_finished()->set_failure_detail("boom \xC3");
  fin.mutable_finished()->set_stderr_tail(tail);
  fin.mutable_finished()->set_last_seq(1);
  worker.Send(fin);
  ASSERT_TRUE(worker.ReadUntil(
      [&](auto& m) {
        return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == ids[0];
      },
      &msg));
  EXPECT_EQ(msg.ack().seq(), 1);
  const xv::v1::Experiment e = Get(ids[0]);
  EXPECT_EQ(e.state(), "failed");
  EXPECT_EQ(e.failure_detail(), "boom \xEF\xBF\xBD");
  EXPECT_TRUE(IsValidUtf8(e.stderr_tail()));
  EXPECT_EQ(e.stderr_tail().substr(e.stderr_tail().size() - 7), "\n\xEF\xBF\xBD\xEF\xBF\xBD");
  grpc::ClientContext ctx;
  xv::v1::ListExperimentsResponse list;
  grpc::Status ls = experiments_->ListExperiments(&ctx, xv::v1::ListExperimentsRequest(), &list);
  ASSERT_TRUE(ls.ok()) << ls.error_message();
  ASSERT_EQ(list.experiments_size(), 1);
  EXPECT_TRUE(IsValidUtf8(list.experiments(0).stderr_tail()));
}

TEST_F(WorkerProtocolEdge, ABadRegisterIsRefusedNamingTheField) {
  xv::v1::Register reg;
  reg.set_worker_name("edge-3");
  reg.mutable_device()->set_name("cpu \xFF");  // a proto3 string: unparseable
  grpc::Status s = RegisterOnly(reg);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("register.device.name: not valid UTF-8"), std::string::npos)
      << s.error_message();

  reg.mutable_device()->set_name("cpu");
  reg.set_worker_name("edge\x1b]0;pwned\x07");
  s = RegisterOnly(reg);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("register.worker_name"), std::string::npos) << s.error_message();

  reg.set_worker_name(std::string(1 << 20, 'w'));
  s = RegisterOnly(reg);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("register.worker_name"), std::string::npos);
  EXPECT_LT(s.error_message().size(), 400u);
}

TEST_F(WorkerProtocolEdge, MaxConcurrentFromAWorkerIsCapped) {
  auto stub = xv::v1::Workers::NewStub(channel_);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 20s);
  auto stream = stub->Session(&ctx);
  xv::v1::WorkerMessage m;
  m.mutable_register_()->set_worker_name("greedy");
  m.mutable_register_()->mutable_device()->set_name("cpu");
  m.mutable_register_()->mutable_capabilities()->add_trainers("libtorch");
  m.mutable_register_()->mutable_capabilities()->set_max_concurrent(1000);
  ASSERT_TRUE(stream->Write(m));
  xv::v1::DaemonMessage reply;
  ASSERT_TRUE(stream->Read(&reply));
  ASSERT_TRUE(reply.has_registered());
  Submit(2 * kMaxWorkerConcurrency);
  // Count the Assigns of the first second (within the 1.5 s lease, so none is lost and requeued).
  std::atomic<int> assigned{0};
  std::thread reader([&] {
    xv::v1::DaemonMessage r;
    while (stream->Read(&r)) assigned += r.has_assign();
  });
  std::this_thread::sleep_for(1s);
  ctx.TryCancel();
  reader.join();
  EXPECT_EQ(assigned.load(), kMaxWorkerConcurrency);
}

}  // namespace
}  // namespace xv::daemon
