// Work bounded per request and per caller (issue 11, findings 6 and 11), over a real DaemonServer
// (SQLite file, gRPC on a unix socket) in this process:
//  - Status is answered while a submission of the largest allowed size (4096 runs) is stored, and
//    never sees part of it; one run more is refused naming the field, with nothing stored;
//  - Watch streams hold no thread each (200 open streams: the process gains far fewer than 200
//    threads), one past --max-watch-streams is RESOURCE_EXHAUSTED naming the flag, a closed stream
//    frees its slot, and live events still reach the open ones;
//  - state-changing calls are rate limited per caller (RESOURCE_EXHAUSTED saying when to retry),
//    reads are not;
//  - a fresh state dir is 0750 and the database files 0640 even under umask 000, and a looser
//    existing dir and database are tightened at start.
// Figures (Status latency during the big submit, Submit latency with 200 idle watchers) are
// printed, not asserted.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "daemon/api/daemon_server.h"
#include "tests/integration/in_process_daemon.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::daemon {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

std::string CpuTinyYaml() {
  const char* src = std::getenv("XV_SOURCE_DIR");
  std::ifstream f(std::string(src ? src : ".") + "/recipes/cpu-tiny.yaml");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// `candidates` candidates (distinct matrix_lr values) x `replicates`.
xv::v1::SubmitRequest BigSubmit(int candidates, int replicates) {
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(CpuTinyYaml());
  req.set_recipe_name("cpu-tiny");
  req.set_campaign("big");
  req.set_replicates(replicates);
  for (int i = 0; i < candidates; ++i) {
    auto* o = req.add_candidates()->add_overrides();
    o->set_key("matrix_lr");
    o->set_value(std::to_string(0.01 + 0.0001 * i));
  }
  return req;
}

int ThreadsOfThisProcess() {
  int n = 0;
  for (const auto& e : fs::directory_iterator("/proc/self/task")) {
    (void)e;
    ++n;
  }
  return n;
}

mode_t ModeOf(const fs::path& p) {
  struct stat st {};
  EXPECT_EQ(::stat(p.c_str(), &st), 0) << p;
  return st.st_mode & 0777;
}

double MsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

class DaemonLoadBounds : public ::testing::Test {
 protected:
  void TearDown() override {
    Stop();
    std::error_code ec;
    if (!dir_.empty()) fs::remove_all(dir_, ec);
  }

  void Start(DaemonOptions options) {
    Status s = fake::StartInProcessDaemon(options, &server_, &channel_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    experiments_ = xv::v1::Experiments::NewStub(channel_);
  }
  DaemonOptions Options() {
    if (dir_.empty()) dir_ = fake::FreshStateDir("xvd-bounds");
    return fake::FastDaemonOptions(dir_);
  }
  void Stop() {
    if (server_) server_->Shutdown();
    server_.reset();
  }

  grpc::Status StatusCall(xv::v1::StatusResponse* resp) {
    grpc::ClientContext ctx;
    return experiments_->Status(&ctx, xv::v1::StatusRequest(), resp);
  }

  fs::path dir_;
  std::unique_ptr<DaemonServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xv::v1::Experiments::Stub> experiments_;
};

TEST_F(DaemonLoadBounds, StatusIsAnsweredWhileTheLargestSubmitIsStoredAndSeesAllOrNothing) {
  Start(Options());
  const int kRuns = 256 * 16;  // SubmissionLimits::max_runs
  std::atomic<bool> done{false};
  grpc::Status submit_status;
  xv::v1::SubmitResponse submitted;
  const auto t0 = std::chrono::steady_clock::now();
  double submit_ms = 0;
  std::thread submitter([&] {
    grpc::ClientContext ctx;
    submit_status = experiments_->Submit(&ctx, BigSubmit(256, 16), &submitted);
    submit_ms = MsSince(t0);
    done = true;
  });
  int answered = 0;
  double worst_ms = 0;
  while (!done) {
    const auto t = std::chrono::steady_clock::now();
    xv::v1::StatusResponse st;
    ASSERT_TRUE(StatusCall(&st).ok());
    worst_ms = std::max(worst_ms, MsSince(t));
    ++answered;
    EXPECT_TRUE(st.queued() == 0 || st.queued() == kRuns)
        << "Status saw part of a submission: " << st.queued() << " queued";
  }
  submitter.join();
  ASSERT_TRUE(submit_status.ok()) << submit_status.error_message();
  EXPECT_EQ(submitted.experiment_ids_size(), kRuns);
  EXPECT_GE(answered, 1);
  xv::v1::StatusResponse after;
  ASSERT_TRUE(StatusCall(&after).ok());
  EXPECT_EQ(after.queued(), kRuns);
  std::printf(
      "submit of %d runs took %.0f ms; %d Status calls answered meanwhile, the slowest in "
      "%.0f ms\n",
      kRuns, submit_ms, answered, worst_ms);
}

TEST_F(DaemonLoadBounds, ASubmitOfMoreRunsThanTheLimitIsRefusedNamingTheField) {
  Start(Options());
  xv::v1::SubmitResponse resp;
  grpc::ClientContext ctx;
  grpc::Status s = experiments_->Submit(&ctx, BigSubmit(256, 40), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("candidates x replicates: 256 candidate(s) x 40 replicate(s)"),
            std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("10240 runs"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("at most 4096"), std::string::npos) << s.error_message();
  xv::v1::StatusResponse st;
  ASSERT_TRUE(StatusCall(&st).ok());
  EXPECT_EQ(st.queued(), 0);
}

TEST_F(DaemonLoadBounds, WatchStreamsAreCappedAndHoldNoThreadEach) {
  DaemonOptions options = Options();
  const int kStreams = 200;
  options.max_watch_streams = kStreams;
  // All streams share this test's one connection: let it carry them (the default is 128).
  options.max_streams_per_connection = 4 * kStreams;
  Start(options);
  // One call first, so that gRPC's own threads exist before counting.
  xv::v1::StatusResponse warm;
  ASSERT_TRUE(StatusCall(&warm).ok());
  const int threads_before = ThreadsOfThisProcess();

  struct Stream {
    std::unique_ptr<grpc::ClientContext> ctx;
    std::unique_ptr<grpc::ClientReader<xv::v1::WatchEvent>> reader;
  };
  auto open = [&] {
    Stream s;
    s.ctx = std::make_unique<grpc::ClientContext>();
    xv::v1::WatchRequest req;
    s.reader = experiments_->Watch(s.ctx.get(), req);
    return s;
  };
  auto wait_for_subscribers = [&](size_t n) {
    for (int i = 0; i < 200 && server_->watch_hub()->subscribers() != n; ++i) {
      std::this_thread::sleep_for(50ms);
    }
    return server_->watch_hub()->subscribers() == n;
  };
  std::vector<Stream> streams;
  for (int i = 0; i < kStreams; ++i) streams.push_back(open());
  ASSERT_TRUE(wait_for_subscribers(kStreams)) << server_->watch_hub()->subscribers();
  const int threads_open = ThreadsOfThisProcess();
  std::printf("threads: %d before, %d with %d open Watch streams\n", threads_before, threads_open,
              kStreams);
  EXPECT_LT(threads_open - threads_before, kStreams / 4) << "a thread per Watch stream?";

  // One more is refused, naming the flag.
  {
    Stream extra = open();
    xv::v1::WatchEvent ev;
    EXPECT_FALSE(extra.reader->Read(&ev));
    grpc::Status s = extra.reader->Finish();
    EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << s.error_message();
    EXPECT_NE(s.error_message().find("--max-watch-streams"), std::string::npos)
        << s.error_message();
  }
  // Closing one frees its slot.
  streams.back().ctx->TryCancel();
  (void)streams.back().reader->Finish();
  streams.pop_back();
  ASSERT_TRUE(wait_for_subscribers(kStreams - 1));
  streams.push_back(open());
  ASSERT_TRUE(wait_for_subscribers(kStreams));

  // Live events reach the open streams; Submit stays quick with every slot taken.
  const auto t0 = std::chrono::steady_clock::now();
  xv::v1::SubmitResponse submitted;
  {
    grpc::ClientContext ctx;
    grpc::Status s = experiments_->Submit(&ctx, BigSubmit(1, 1), &submitted);
    ASSERT_TRUE(s.ok()) << s.error_message();
  }
  std::printf("Submit with %d idle Watch streams: %.1f ms\n", kStreams, MsSince(t0));
  for (int i : {0, kStreams / 2, kStreams - 1}) {
    xv::v1::WatchEvent ev;
    ASSERT_TRUE(streams[i].reader->Read(&ev)) << "stream " << i;
    EXPECT_EQ(ev.kind(), "state");
    EXPECT_EQ(ev.state(), "queued");
    EXPECT_EQ(ev.experiment_id(), submitted.experiment_ids(0));
  }
  for (auto& s : streams) s.ctx->TryCancel();
  for (auto& s : streams) (void)s.reader->Finish();
  EXPECT_TRUE(wait_for_subscribers(0));
}

TEST_F(DaemonLoadBounds, StateChangingCallsAreRateLimitedPerCallerAndReadsAreNot) {
  DaemonOptions options = Options();
  options.rate_limit.per_second = 0.5;
  options.rate_limit.burst = 5;
  Start(options);
  for (int i = 0; i < 5; ++i) {
    grpc::ClientContext ctx;
    xv::v1::CancelRequest req;
    req.set_experiment_id(12345);
    xv::v1::CancelResponse resp;
    EXPECT_EQ(experiments_->Cancel(&ctx, req, &resp).error_code(), grpc::StatusCode::NOT_FOUND);
  }
  grpc::ClientContext ctx;
  xv::v1::SubmitResponse resp;
  grpc::Status s = experiments_->Submit(&ctx, BigSubmit(1, 1), &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_NE(s.error_message().find("Submit: rate limit"), std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("retry in"), std::string::npos) << s.error_message();
  for (int i = 0; i < 20; ++i) {
    xv::v1::StatusResponse st;
    ASSERT_TRUE(StatusCall(&st).ok()) << "a read was rate limited";
    EXPECT_EQ(st.queued(), 0);
  }
}

TEST_F(DaemonLoadBounds, StateDirIs0750AndTheDatabase0640WhateverTheUmask) {
  const mode_t old_umask = ::umask(0);
  Start(Options());
  ::umask(old_umask);
  // A write, so that the WAL and its index exist.
  xv::v1::SubmitResponse resp;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(experiments_->Submit(&ctx, BigSubmit(1, 1), &resp).ok());
  }
  EXPECT_EQ(ModeOf(dir_), 0750u);
  for (const char* f : {"xv.db", "xv.db-wal", "xv.db-shm"}) {
    ASSERT_TRUE(fs::exists(dir_ / f)) << f;
    EXPECT_EQ(ModeOf(dir_ / f), 0640u) << f;
  }
  // Files of an older daemon left open to everyone are tightened at the next start.
  Stop();
  fs::permissions(dir_, fs::perms::all);
  fs::permissions(dir_ / "xv.db", fs::perms::owner_read | fs::perms::owner_write |
                                      fs::perms::group_all | fs::perms::others_read);
  Start(Options());
  EXPECT_EQ(ModeOf(dir_), 0750u);
  EXPECT_EQ(ModeOf(dir_ / "xv.db"), 0640u);
}

}  // namespace
}  // namespace xv::daemon
