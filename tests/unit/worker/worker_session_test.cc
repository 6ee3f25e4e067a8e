// WorkerSession against an in-process fake daemon (a real gRPC server on a unix socket): register,
// heartbeats, assignment, events in seq order, Finished, cancel, and a daemon that goes away
// mid-attempt and comes back (reconnect, Register lists the running attempt, nothing is lost).
#include "worker/worker_session.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <set>
#include <thread>

namespace xv::worker {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

bool WaitFor(const std::function<bool()>& pred, double seconds) {
  auto t0 = Clock::now();
  while (std::chrono::duration<double>(Clock::now() - t0).count() < seconds) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return pred();
}

class FakeDaemon final : public v1::Workers::Service {
 public:
  explicit FakeDaemon(bool ack) : ack_(ack) {}

  grpc::Status Session(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::DaemonMessage, v1::WorkerMessage>* stream) override {
    v1::WorkerMessage m;
    if (!stream->Read(&m) || !m.has_register_()) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, "first message must be Register");
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      registers_.push_back(m.register_());
    }
    v1::DaemonMessage reg;
    reg.mutable_registered()->set_worker_id(5);
    reg.mutable_registered()->set_heartbeat_interval_ms(50);
    reg.mutable_registered()->set_lease_ms(1000);
    stream->Write(reg);
    auto flush = [&] {
      std::vector<v1::DaemonMessage> out;
      {
        std::lock_guard<std::mutex> lock(mu_);
        out.swap(to_send_);
      }
      for (const auto& d : out) stream->Write(d);
    };
    flush();
    while (stream->Read(&m)) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (m.has_heartbeat()) ++heartbeats_;
        if (m.has_event()) events_.push_back(m.event());
        if (m.has_finished()) finished_.push_back(m.finished());
        if (ack_ && (m.has_event() || m.has_finished())) {
          v1::DaemonMessage a;
          auto* ack = a.mutable_ack();
          ack->set_experiment_id(m.has_event() ? m.event().experiment_id()
                                               : m.finished().experiment_id());
          ack->set_attempt(m.has_event() ? m.event().attempt() : m.finished().attempt());
          ack->set_seq(m.has_event() ? m.event().seq() : m.finished().last_seq());
          ack->set_finished(m.has_finished());
          to_send_.push_back(a);
        }
      }
      flush();
    }
    return grpc::Status::OK;
  }

  void Send(const v1::DaemonMessage& d) {
    std::lock_guard<std::mutex> lock(mu_);
    to_send_.push_back(d);
  }
  template <typename F>
  auto With(F f) {
    std::lock_guard<std::mutex> lock(mu_);
    return f(*this);
  }

  std::vector<v1::Register> registers_;
  std::vector<v1::TrainerEvent> events_;
  std::vector<v1::Finished> finished_;
  int heartbeats_ = 0;

 private:
  const bool ack_;
  std::mutex mu_;
  std::vector<v1::DaemonMessage> to_send_;
};

std::unique_ptr<grpc::Server> StartServer(const std::string& address, FakeDaemon* service) {
  grpc::ServerBuilder b;
  b.AddListeningPort(address, grpc::InsecureServerCredentials());
  b.RegisterService(service);
  return b.BuildAndStart();
}

v1::DaemonMessage Assign(int64_t id, double deadline_s = 60) {
  v1::DaemonMessage d;
  auto* s = d.mutable_assign()->mutable_spec();
  s->set_experiment_id(id);
  s->set_attempt(1);
  s->set_recipe_json("{\"matrix_lr\": 0.05}");
  s->set_time_budget_s(1);
  s->set_hard_deadline_s(deadline_s);
  return d;
}

class WorkerSessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("xv-session-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "data");
    address_ = "unix:" + (dir_ / "xvd.sock").string();
    const char* src = getenv("XV_SOURCE_DIR");
    opts_.daemon_address = address_;
    opts_.name = "test-cpu";
    opts_.trainer.trainer_bin = std::string(src ? src : ".") + "/tests/fixtures/fake_trainer.sh";
    opts_.trainer.data_dir = (dir_ / "data").string();
    opts_.trainer.device_flag = "cpu";
    opts_.trainer.work_dir = (dir_ / "work").string();
    opts_.trainer.kill_grace_s = 0.5;
    opts_.initial_backoff_s = 0.05;
    opts_.max_backoff_s = 0.2;
    launcher_ = NewPosixProcessLauncher();
    device_.set_name("fake-device");
    caps_.add_trainers("libtorch");
  }
  void TearDown() override {
    if (session_) session_->RequestStop();
    if (runner_.joinable()) runner_.join();
    fs::remove_all(dir_);
  }
  void StartWorker() {
    session_ = std::make_unique<WorkerSession>(opts_, device_, caps_, launcher_.get());
    runner_ = std::thread([this] { EXPECT_TRUE(session_->Run().ok()); });
  }

  fs::path dir_;
  std::string address_;
  WorkerOptions opts_;
  std::unique_ptr<ProcessLauncher> launcher_;
  v1::Device device_;
  v1::Capabilities caps_;
  std::unique_ptr<WorkerSession> session_;
  std::thread runner_;
};

TEST_F(WorkerSessionTest, RegistersRunsAnAssignmentAndRelaysEveryEvent) {
  setenv("XV_FAKE_STEPS", "3", 1);
  setenv("XV_FAKE_STEP_SECONDS", "0.01", 1);
  FakeDaemon daemon(/*ack=*/true);
  auto server = StartServer(address_, &daemon);
  StartWorker();
  ASSERT_TRUE(
      WaitFor([&] { return daemon.With([](FakeDaemon& d) { return d.registers_.size(); }); }, 10));
  daemon.With([](FakeDaemon& d) {
    EXPECT_EQ(d.registers_[0].worker_name(), "test-cpu");
    EXPECT_EQ(d.registers_[0].device().name(), "fake-device");
    EXPECT_EQ(d.registers_[0].capabilities().trainers(0), "libtorch");
    return 0;
  });
  daemon.Send(Assign(31));
  ASSERT_TRUE(
      WaitFor([&] { return daemon.With([](FakeDaemon& d) { return !d.finished_.empty(); }); }, 20));
  daemon.With([](FakeDaemon& d) {
    EXPECT_EQ(d.finished_[0].experiment_id(), 31);
    EXPECT_EQ(d.finished_[0].state(), "succeeded");
    // start + 3 steps + eval + summary, in seq order, each once.
    EXPECT_EQ(d.events_.size(), 6u);
    for (size_t i = 0; i < d.events_.size(); ++i) EXPECT_EQ(d.events_[i].seq(), (int64_t)i + 1);
    EXPECT_EQ(d.finished_[0].last_seq(), 6);
    EXPECT_GT(d.heartbeats_, 0);
    return 0;
  });
  EXPECT_EQ(session_->worker_id(), 5);
  session_->RequestStop();
  runner_.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  unsetenv("XV_FAKE_STEPS");
  unsetenv("XV_FAKE_STEP_SECONDS");
}

TEST_F(WorkerSessionTest, CancelStopsTheRunningTrainer) {
  setenv("XV_FAKE_MODE", "hang", 1);
  FakeDaemon daemon(/*ack=*/true);
  auto server = StartServer(address_, &daemon);
  StartWorker();
  daemon.Send(Assign(40));
  ASSERT_TRUE(WaitFor(
      [&] { return daemon.With([](FakeDaemon& d) { return d.events_.size() >= 2; }); }, 20));
  v1::DaemonMessage c;
  c.mutable_cancel()->set_experiment_id(40);
  c.mutable_cancel()->set_attempt(1);
  daemon.Send(c);
  ASSERT_TRUE(
      WaitFor([&] { return daemon.With([](FakeDaemon& d) { return !d.finished_.empty(); }); }, 20));
  daemon.With([](FakeDaemon& d) {
    EXPECT_EQ(d.finished_[0].state(), "cancelled");
    return 0;
  });
  unsetenv("XV_FAKE_MODE");
  session_->RequestStop();
  runner_.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
}

// A stop signal (systemd, Slurm or Kubernetes ending the worker) is not a cancel: the attempt the
// stop ended is reported interrupted, which xvd requeues (common/interrupted_attempt.h), and the
// Finished reaches the daemon before the session ends.
TEST_F(WorkerSessionTest, StopReportsTheRunningAttemptInterrupted) {
  setenv("XV_FAKE_MODE", "hang", 1);
  FakeDaemon daemon(/*ack=*/true);
  auto server = StartServer(address_, &daemon);
  StartWorker();
  daemon.Send(Assign(45));
  ASSERT_TRUE(WaitFor(
      [&] { return daemon.With([](FakeDaemon& d) { return d.events_.size() >= 2; }); }, 20));
  session_->RequestStop();
  runner_.join();
  unsetenv("XV_FAKE_MODE");
  daemon.With([](FakeDaemon& d) {
    if (d.finished_.size() != 1u) {
      ADD_FAILURE() << "expected one Finished, got " << d.finished_.size();
      return 0;
    }
    EXPECT_EQ(d.finished_[0].experiment_id(), 45);
    EXPECT_EQ(d.finished_[0].state(), "interrupted");
    EXPECT_EQ(d.finished_[0].failure_kind(), "worker_stopped");
    EXPECT_NE(d.finished_[0].failure_detail().find("stop signal"), std::string::npos)
        << d.finished_[0].failure_detail();
    return 0;
  });
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
}

TEST_F(WorkerSessionTest, DaemonGoingAwayMidAttemptLosesNothing) {
  setenv("XV_FAKE_STEPS", "30", 1);
  setenv("XV_FAKE_STEP_SECONDS", "0.05", 1);
  // The first daemon never acknowledges; it disappears after a few events.
  auto first = std::make_unique<FakeDaemon>(/*ack=*/false);
  auto server = StartServer(address_, first.get());
  StartWorker();
  first->Send(Assign(50));
  ASSERT_TRUE(WaitFor(
      [&] { return first->With([](FakeDaemon& d) { return d.events_.size() >= 3; }); }, 20));
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(100));
  server.reset();
  EXPECT_TRUE(WaitFor([&] { return !session_->connected(); }, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the trainer keeps going

  FakeDaemon second(/*ack=*/true);
  fs::remove(dir_ / "xvd.sock");
  server = StartServer(address_, &second);
  ASSERT_TRUE(server);
  ASSERT_TRUE(
      WaitFor([&] { return second.With([](FakeDaemon& d) { return !d.finished_.empty(); }); }, 30));
  second.With([](FakeDaemon& d) {
    if (d.registers_.empty() || d.registers_[0].running_size() < 1) {
      ADD_FAILURE() << "the reconnect's Register lists no running attempt";
      return 0;
    }
    const auto& reg = d.registers_[0];
    EXPECT_EQ(reg.running(0).experiment_id(), 50);
    EXPECT_GE(reg.running(0).last_seq(), 3);
    EXPECT_EQ(d.finished_[0].state(), "succeeded");
    // Every event 1..last_seq reached the second daemon (unacknowledged ones were sent again).
    std::set<int64_t> seqs;
    for (const auto& e : d.events_) seqs.insert(e.seq());
    int64_t last = d.finished_[0].last_seq();
    EXPECT_EQ(last, 33);  // start + 30 steps + eval + summary
    for (int64_t s = 1; s <= last; ++s) EXPECT_TRUE(seqs.count(s)) << "seq " << s << " missing";
    return 0;
  });
  session_->RequestStop();
  runner_.join();
  server->Shutdown(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  unsetenv("XV_FAKE_STEPS");
  unsetenv("XV_FAKE_STEP_SECONDS");
}

}  // namespace
}  // namespace xv::worker
