// The daemon's gRPC services end to end in one process: a real DaemonServer on a unix socket in a
// temp state dir, a fake worker holding a real Session stream, a real Experiments client. Checks
// the protocol (Register -> Registered, Assign, EventAck, Finished), exactly-once event
// application, the lease (lost -> requeued), submit-time validation, and the
// single-daemon-per-state-dir rules.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "daemon/api/daemon_server.h"
#include "daemon/api/state_dir_lock.h"
#include "daemon/store/sqlite_connection.h"
#include "tests/integration/daemon_fake_worker.h"
#include "tests/integration/in_process_daemon.h"
#include "xv/v1/experiments.grpc.pb.h"
#include "xv/v1/workers.grpc.pb.h"

namespace xv::daemon {
namespace {

using namespace std::chrono_literals;
using fake::FakeWorker;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string CpuTinyYaml() {
  const char* src = std::getenv("XV_SOURCE_DIR");
  return ReadFile(std::string(src ? src : ".") + "/recipes/cpu-tiny.yaml");
}

int64_t QueryInt(const std::string& db, const std::string& sql) {
  std::unique_ptr<store::SqliteConnection> conn;
  EXPECT_TRUE(
      store::SqliteConnection::Open(db, store::SqliteConnection::Mode::kReadOnly, &conn).ok());
  store::SqliteStatement st;
  EXPECT_TRUE(conn->Prepare(sql, &st).ok()) << sql;
  bool row = false;
  EXPECT_TRUE(st.Step(&row).ok());
  return row ? st.ColumnInt(0) : -1;
}

class DaemonApi : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fake::FreshStateDir("xvd-it");
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

  grpc::Status Submit(const std::vector<std::string>& candidates, xv::v1::SubmitResponse* resp) {
    xv::v1::SubmitRequest req;
    req.set_recipe_yaml(CpuTinyYaml());
    req.set_recipe_name("cpu-tiny");
    for (const auto& c : candidates) {
      auto* cand = req.add_candidates();
      auto eq = c.find('=');
      auto* o = cand->add_overrides();
      o->set_key(c.substr(0, eq));
      o->set_value(c.substr(eq + 1));
    }
    grpc::ClientContext ctx;
    return experiments_->Submit(&ctx, req, resp);
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

  int CountExperiments() {
    grpc::ClientContext ctx;
    xv::v1::ListExperimentsRequest req;
    xv::v1::ListExperimentsResponse resp;
    EXPECT_TRUE(experiments_->ListExperiments(&ctx, req, &resp).ok());
    return resp.experiments_size();
  }

  std::string db() const { return (dir_ / "xv.db").string(); }

  std::filesystem::path dir_;
  std::unique_ptr<DaemonServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<xv::v1::Experiments::Stub> experiments_;
};

const char* kSummary =
    R"({"type":"summary","t":30.0,"val_bpb":2.1875,"training_seconds":25.01,"total_seconds":31.2,)"
    R"("peak_vram_mb":0.0,"mfu_percent":null,"total_tokens_M":1.2,"num_steps":300,"num_params_M":3.3,)"
    R"("depth":2,"tok_per_sec":48000.0,"peak_reserved_mb":0.0,"attention_backend":"math",)"
    R"("peak_flops":null,"peak_flops_source":"unknown","flops_per_token":19922944,)"
    R"("num_params":3300000,"total_tokens":1228800,"metric_version":"1"})";

TEST_F(DaemonApi, SubmitAssignEventsFinishedAndReadBack) {
  FakeWorker worker(channel_, "host:cpu");
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  EXPECT_GT(msg.registered().worker_id(), 0);
  EXPECT_EQ(msg.registered().lease_ms(), 1500);
  EXPECT_EQ(msg.registered().heartbeat_interval_ms(), 100);
  worker.StartHeartbeats(100ms);

  xv::v1::SubmitResponse submitted;
  grpc::Status gs = Submit({"matrix_lr=0.03", "matrix_lr=0.05"}, &submitted);
  ASSERT_TRUE(gs.ok()) << gs.error_message();
  ASSERT_EQ(submitted.experiment_ids_size(), 2);
  const int64_t first = submitted.experiment_ids(0);
  const int64_t second = submitted.experiment_ids(1);

  // The daemon pushes the oldest experiment to the only free worker.
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  const xv::v1::ExperimentSpec spec = msg.assign().spec();
  EXPECT_EQ(spec.experiment_id(), first);
  EXPECT_EQ(spec.attempt(), 1);
  EXPECT_EQ(spec.trainer(), "libtorch");
  EXPECT_DOUBLE_EQ(spec.time_budget_s(), 25.0);
  EXPECT_NE(spec.recipe_json().find("\"matrix_lr\":0.03"), std::string::npos) << spec.recipe_json();
  EXPECT_EQ(Get(first).state(), "assigned");
  EXPECT_EQ(Get(second).state(), "queued");

  worker.SendEvent(
      first, 1, 1,
      R"({"type":"start","t":1.0,"device":{"name":"cpu: fake"},"attention_backend":"math"})");
  worker.SendEvent(
      first, 1, 2,
      R"({"type":"step","t":2.0,"step":10,"loss":7.5,"lrm":1.0,"dt_ms":80,"tok_per_sec":50000,"mfu_percent":null,"progress":0.4,"remaining_s":15,"epoch":1})");
  ASSERT_TRUE(worker.ReadUntil(
      [&](auto& m) {
        return m.has_ack() && m.ack().experiment_id() == first && m.ack().seq() == 2;
      },
      &msg));
  xv::v1::Experiment running = Get(first);
  EXPECT_EQ(running.state(), "running");
  EXPECT_DOUBLE_EQ(running.progress(), 0.4);
  EXPECT_DOUBLE_EQ(running.last_loss(), 7.5);
  EXPECT_EQ(running.worker(), "host:cpu");

  worker.SendEvent(
      first, 1, 3,
      R"({"type":"step","t":3.0,"step":20,"loss":6.5,"lrm":0.5,"dt_ms":80,"tok_per_sec":51000,"mfu_percent":null,"progress":1.0,"remaining_s":0,"epoch":1})");
  worker.SendEvent(first, 1, 4, kSummary);
  xv::v1::WorkerMessage fin;
  fin.mutable_finished()->set_experiment_id(first);
  fin.mutable_finished()->set_attempt(1);
  fin.mutable_finished()->set_state("succeeded");
  fin.mutable_finished()->set_stderr_tail("val_bpb:          2.187500\n");
  fin.mutable_finished()->set_last_seq(4);
  worker.Send(fin);
  ASSERT_TRUE(worker.ReadUntil(
      [&](auto& m) {
        return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == first;
      },
      &msg));
  EXPECT_EQ(msg.ack().seq(), 4);

  xv::v1::Experiment done = Get(first);
  EXPECT_EQ(done.state(), "succeeded");
  EXPECT_EQ(done.name(), "matrix_lr=0.03");
  EXPECT_EQ(done.device_name(), "cpu: fake");
  ASSERT_TRUE(done.has_result());
  EXPECT_DOUBLE_EQ(done.result().val_bpb(), 2.1875);
  EXPECT_DOUBLE_EQ(done.result().tok_per_sec(), 48000.0);
  EXPECT_DOUBLE_EQ(done.result().mfu_percent(), -1.0);
  EXPECT_EQ(done.result().num_steps(), 300);
  EXPECT_EQ(done.result().total_tokens(), 1228800);

  // The worker is free again: the second experiment follows.
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  EXPECT_EQ(msg.assign().spec().experiment_id(), second);

  // A replay of the first attempt's events (a reconnect with a spool) is acknowledged, not
  // re-applied.
  worker.SendEvent(
      first, 1, 3,
      R"({"type":"step","t":3.0,"step":20,"loss":6.5,"lrm":0.5,"dt_ms":80,"tok_per_sec":51000,"mfu_percent":null,"progress":1.0,"remaining_s":0,"epoch":1})");
  worker.SendEvent(first, 1, 4, kSummary);
  ASSERT_TRUE(worker.ReadUntil(
      [&](auto& m) {
        return m.has_ack() && m.ack().experiment_id() == first && !m.ack().finished();
      },
      &msg));
  EXPECT_EQ(msg.ack().seq(), 4);
  EXPECT_EQ(
      QueryInt(db(), "SELECT COUNT(*) FROM metrics WHERE experiment_id = " + std::to_string(first)),
      2);
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM results"), 1);
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 4);

  // Status lists the worker as connected and the second experiment as active.
  {
    grpc::ClientContext ctx;
    xv::v1::StatusResponse st;
    ASSERT_TRUE(experiments_->Status(&ctx, xv::v1::StatusRequest(), &st).ok());
    EXPECT_EQ(st.finished(), 1);
    EXPECT_EQ(st.running(), 1);
    ASSERT_EQ(st.workers_size(), 1);
    EXPECT_EQ(st.workers(0).name(), "host:cpu");
    EXPECT_EQ(st.workers(0).state(), "busy");
    EXPECT_EQ(st.workers(0).current_experiment_id(), second);
    ASSERT_EQ(st.active_size(), 1);
    EXPECT_EQ(st.active(0).id(), second);
  }

  // The worker vanishes while running the second: after the lease it is lost and requeued once.
  EXPECT_TRUE(worker.Close().ok());
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (Get(second).state() != "queued" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
  }
  xv::v1::Experiment requeued = Get(second);
  EXPECT_EQ(requeued.state(), "queued");
  EXPECT_NE(requeued.failure_detail().find("lost"), std::string::npos) << requeued.failure_detail();

  // A new worker takes it as attempt 2.
  FakeWorker other(channel_, "host2:cpu");
  other.StartHeartbeats(100ms);
  ASSERT_TRUE(other.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  EXPECT_EQ(msg.assign().spec().experiment_id(), second);
  EXPECT_EQ(msg.assign().spec().attempt(), 2);

  // Cancel reaches the worker holding the attempt.
  {
    grpc::ClientContext ctx;
    xv::v1::CancelRequest req;
    req.set_experiment_id(second);
    xv::v1::CancelResponse resp;
    ASSERT_TRUE(experiments_->Cancel(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.state(), "cancelled");
  }
  ASSERT_TRUE(other.ReadUntil([](auto& m) { return m.has_cancel(); }, &msg));
  EXPECT_EQ(msg.cancel().experiment_id(), second);
  EXPECT_EQ(msg.cancel().attempt(), 2);
  EXPECT_TRUE(other.Close().ok());
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM attempts"), 3);
}

TEST_F(DaemonApi, InvalidSubmissionsAreRefusedNamingTheFieldAndStoreNothing) {
  xv::v1::SubmitResponse resp;
  grpc::Status s = Submit({"matrix_lr=0.03", "matrx_lr=0.05"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("candidate 2 (matrx_lr=0.05)"), std::string::npos)
      << s.error_message();
  EXPECT_NE(s.error_message().find("matrx_lr: unknown knob"), std::string::npos)
      << s.error_message();

  s = Submit({"total_batch_size=3000"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("total_batch_size"), std::string::npos) << s.error_message();

  s = Submit({"matrix_lr=0.04"}, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("no-op override: matrix_lr=0.04 equals the base"),
            std::string::npos)
      << s.error_message();

  EXPECT_EQ(CountExperiments(), 0);
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM experiments"), 0);
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM rounds"), 0);
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM recipes"), 0);
}

// Issue 11: a 1 MiB candidate name x 64 replicates grew the database by 134 MB in a second. Every
// string field has a limit (daemon/api/request_limits.h), checked before anything is stored, and
// the error names the field's path without echoing the input.
TEST_F(DaemonApi, OversizeFieldsAreRefusedNamingTheirPathAndStoreNothing) {
  const auto file_bytes = [this] {
    std::error_code ec;
    uintmax_t total = 0;
    for (const char* suffix : {"", "-wal"}) {
      const auto n = std::filesystem::file_size(db() + suffix, ec);
      if (!ec) total += n;
    }
    return total;
  };
  const uintmax_t before = file_bytes();
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(CpuTinyYaml());
  req.set_replicates(64);
  auto* cand = req.add_candidates();
  cand->set_name(std::string(1 << 20, 'n'));
  auto* o = cand->add_overrides();
  o->set_key("matrix_lr");
  o->set_value("0.05");
  xv::v1::SubmitResponse resp;
  grpc::Status s;
  {
    grpc::ClientContext ctx;
    s = experiments_->Submit(&ctx, req, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message(),
            "candidates[0].name: 1048576 bytes, over the limit of 200 (shorten it)");

  // A 4 MiB override value: INVALID_ARGUMENT naming it, not RESOURCE_EXHAUSTED on the trailer.
  cand->set_name("big");
  o->set_value(std::string(4 << 20, '9'));
  {
    grpc::ClientContext ctx;
    s = experiments_->Submit(&ctx, req, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("candidates[0].overrides[0].value: 4194304 bytes", 0), 0u)
      << s.error_message().substr(0, 300);

  // A control character in a name (it would retitle a terminal that lists it).
  o->set_value("0.05");
  cand->set_name("lr\x1b]0;pwned\x07");
  {
    grpc::ClientContext ctx;
    s = experiments_->Submit(&ctx, req, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("candidates[0].name: holds a control character", 0), 0u)
      << s.error_message();

  // An error that would quote a long input is cut at the status edge, still INVALID_ARGUMENT.
  cand->set_name("");
  o->set_key(std::string(60, 'k'));
  req.set_recipe_yaml(CpuTinyYaml() + "\n" + std::string(60000, 'x') + ": 1\n");
  {
    grpc::ClientContext ctx;
    s = experiments_->Submit(&ctx, req, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LE(s.error_message().size(), 2200u);

  // Campaigns are checked the same way.
  auto campaigns = xv::v1::Campaigns::NewStub(channel_);
  xv::v1::CreateCampaignRequest create;
  create.set_name("lr");
  create.set_base_recipe_yaml(CpuTinyYaml());
  create.set_device_filter(std::string(1 << 20, 'g'));
  xv::v1::Campaign created;
  {
    grpc::ClientContext ctx;
    s = campaigns->CreateCampaign(&ctx, create, &created);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("device_filter: 1048576 bytes, over the limit of 200", 0), 0u)
      << s.error_message().substr(0, 300);

  EXPECT_EQ(CountExperiments(), 0);
  for (const char* table : {"experiments", "rounds", "recipes", "campaigns", "events"}) {
    EXPECT_EQ(QueryInt(db(), std::string("SELECT COUNT(*) FROM ") + table), 0) << table;
  }
  EXPECT_LT(file_bytes(), before + 256 * 1024);
  // The daemon keeps serving.
  ASSERT_TRUE(Submit({"matrix_lr=0.03"}, &resp).ok());
  EXPECT_EQ(CountExperiments(), 1);
}

// Issue 11: invalid UTF-8 in a string field came back as INTERNAL with no message. protobuf
// refuses to parse such a request before any handler runs, so the field cannot be named; the
// caller hears INVALID_ARGUMENT saying why (daemon/api/unparsable_request_interceptor.h).
TEST_F(DaemonApi, InvalidUtf8InARequestIsInvalidArgumentSayingWhy) {
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(CpuTinyYaml());
  auto* cand = req.add_candidates();
  cand->set_name("lr\xff\xfe");
  auto* o = cand->add_overrides();
  o->set_key("matrix_lr");
  o->set_value("0.05");
  xv::v1::SubmitResponse resp;
  grpc::Status s;
  {
    grpc::ClientContext ctx;
    s = experiments_->Submit(&ctx, req, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_EQ(s.error_message().rfind(
                "request: could not be parsed as the request of /xv.v1.Experiments/Submit: a "
                "string field holds invalid UTF-8",
                0),
            0u)
      << s.error_message();
  // The same for a server-streaming call.
  xv::v1::WatchRequest watch;
  watch.set_campaign("\xc3");
  grpc::ClientContext wctx;
  auto reader = experiments_->Watch(&wctx, watch);
  xv::v1::WatchEvent ev;
  EXPECT_FALSE(reader->Read(&ev));
  s = reader->Finish();
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << s.error_message();
  EXPECT_NE(s.error_message().find("/xv.v1.Experiments/Watch"), std::string::npos)
      << s.error_message();
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM experiments"), 0);
  // The daemon keeps serving.
  EXPECT_EQ(CountExperiments(), 0);
}

// Issue 18: a page of 10,000 rows with their stderr tails would not fit a gRPC message; the reply
// stops at 4 MiB, says so, and the rest follows from its last row.
TEST_F(DaemonApi, ListRepliesStopAtTheSizeCapAndSaySo) {
  xv::v1::SubmitResponse sub;
  std::vector<std::string> candidates;
  for (int i = 0; i < 200; ++i) candidates.push_back("seed=" + std::to_string(100 + i));
  ASSERT_TRUE(Submit(candidates, &sub).ok());
  {
    store::Database& database = server_->store()->database();
    MutexLock lock(database.mu());
    // 3000 experiments with 2 KiB list tails: about 6.5 MB of rows.
    ASSERT_TRUE(database.conn()
                    ->Exec("WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n "
                           "WHERE i < 2800) INSERT INTO experiments (campaign_id, round_id, "
                           "recipe_id, name, seed, time_budget_s, hard_deadline_s, stderr_tail) "
                           "SELECT e.campaign_id, e.round_id, e.recipe_id, 'bulk', 1000 + n.i, 1, "
                           "1, printf('%.*c', 3000, 'x') FROM n, (SELECT * FROM experiments "
                           "LIMIT 1) e;"
                           "UPDATE experiments SET stderr_tail = printf('%.*c', 3000, 'y')")
                    .ok());
  }
  xv::v1::ListExperimentsRequest req;
  req.set_limit(10000);
  std::set<int64_t> seen;
  int replies = 0;
  for (bool more = true; more; ++replies) {
    ASSERT_LT(replies, 10);
    grpc::ClientContext ctx;
    xv::v1::ListExperimentsResponse resp;
    grpc::Status s = experiments_->ListExperiments(&ctx, req, &resp);
    ASSERT_TRUE(s.ok()) << s.error_message();
    EXPECT_LE(resp.ByteSizeLong(), 4u * 1024 * 1024);
    ASSERT_GT(resp.experiments_size(), 0);
    for (const auto& e : resp.experiments()) EXPECT_TRUE(seen.insert(e.id()).second) << e.id();
    more = resp.truncated();
    req.set_after_id(resp.experiments(resp.experiments_size() - 1).id());
    req.set_limit(req.limit() - resp.experiments_size());
  }
  EXPECT_GE(replies, 2);  // the first reply was cut
  EXPECT_EQ(seen.size(), 3000u);
}

// Issue 11: ListExperiments state "pwned" answered an empty list.
TEST_F(DaemonApi, UnknownFilterWordsAreRefusedListingTheAllowedOnes) {
  xv::v1::ListExperimentsRequest req;
  req.set_state("pwned");
  xv::v1::ListExperimentsResponse resp;
  grpc::Status s;
  {
    grpc::ClientContext ctx;
    s = experiments_->ListExperiments(&ctx, req, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("state: \"pwned\" is not one of queued, assigned, running", 0),
            0u)
      << s.error_message();
  req.set_state("succeeded");
  req.set_decision("maybe");
  {
    grpc::ClientContext ctx;
    s = experiments_->ListExperiments(&ctx, req, &resp);
  }
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(s.error_message().rfind("decision: \"maybe\" is not one of keep, discard", 0), 0u)
      << s.error_message();
  req.set_decision("keep");
  {
    grpc::ClientContext ctx;
    s = experiments_->ListExperiments(&ctx, req, &resp);
  }
  EXPECT_TRUE(s.ok()) << s.error_message();
}

TEST_F(DaemonApi, ReconnectingWorkerKeepsItsAttemptAndReplaysAfterTheAck) {
  xv::v1::SubmitResponse submitted;
  ASSERT_TRUE(Submit({"matrix_lr=0.03", "matrix_lr=0.05"}, &submitted).ok());
  const int64_t first = submitted.experiment_ids(0);
  xv::v1::DaemonMessage msg;
  {
    FakeWorker worker(channel_, "host:cpu");
    worker.StartHeartbeats(100ms);
    ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
    ASSERT_EQ(msg.assign().spec().experiment_id(), first);
    worker.SendEvent(first, 1, 1, R"({"type":"start","t":1.0,"device":{"name":"cpu: fake"}})");
    worker.SendEvent(first, 1, 2, R"({"type":"step","t":2.0,"step":1,"loss":9.0,"progress":0.1})");
    ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_ack() && m.ack().seq() == 2; }, &msg));
    EXPECT_TRUE(worker.Close().ok());  // the connection drops; the trainer keeps running
  }
  // Back within the lease, reporting the attempt: the daemon acknowledges seq 2 and keeps it.
  xv::v1::RunningAttempt ra;
  ra.set_experiment_id(first);
  ra.set_attempt(1);
  ra.set_last_seq(4);
  FakeWorker again(channel_, "host:cpu", {ra});
  again.StartHeartbeats(100ms);
  ASSERT_TRUE(again.ReadUntil(
      [&](auto& m) { return m.has_ack() && m.ack().experiment_id() == first; }, &msg));
  EXPECT_EQ(msg.ack().seq(), 2);
  for (const auto& m : again.seen) EXPECT_FALSE(m.has_cancel()) << m.DebugString();
  // Replay 2 (already stored) and 3..4 (new) from the spool.
  again.SendEvent(first, 1, 2, R"({"type":"step","t":2.0,"step":1,"loss":9.0,"progress":0.1})");
  again.SendEvent(first, 1, 3, R"({"type":"step","t":3.0,"step":2,"loss":8.0,"progress":0.2})");
  again.SendEvent(first, 1, 4, R"({"type":"step","t":4.0,"step":3,"loss":7.0,"progress":0.3})");
  ASSERT_TRUE(again.ReadUntil([](auto& m) { return m.has_ack() && m.ack().seq() == 4; }, &msg));
  // Longer than a lease later it still holds the attempt: its heartbeats keep the lease alive.
  std::this_thread::sleep_for(2000ms);
  xv::v1::Experiment e = Get(first);
  EXPECT_EQ(e.state(), "running");
  EXPECT_EQ(e.attempt(), 1);
  EXPECT_DOUBLE_EQ(e.last_loss(), 7.0);
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM metrics"), 3);
  EXPECT_TRUE(again.Close().ok());

  // A worker that comes back without the attempt (its process restarted) loses it at once.
  FakeWorker restarted(channel_, "host:cpu");
  ASSERT_TRUE(restarted.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  // The requeued first experiment (attempt 2) or the second one: both are legitimate next work.
  EXPECT_EQ(
      QueryInt(db(), "SELECT COUNT(*) FROM attempts WHERE state = 'lost' AND experiment_id = " +
                         std::to_string(first) +
                         " AND attempt = 1 AND failure_detail LIKE "
                         "'%re-registered without it%'"),
      1);
  EXPECT_EQ(QueryInt(db(), "SELECT COUNT(*) FROM attempts WHERE state = 'lost'"), 1);
  EXPECT_TRUE(restarted.Close().ok());
}

TEST_F(DaemonApi, AttemptMissingFromAConnectedWorkersHeartbeatsIsLostAndRequeued) {
  FakeWorker worker(channel_, "host:cpu");
  worker.StartHeartbeats(100ms);
  xv::v1::SubmitResponse submitted;
  ASSERT_TRUE(Submit({"matrix_lr=0.03"}, &submitted).ok());
  const int64_t exp = submitted.experiment_ids(0);
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  ASSERT_EQ(msg.assign().spec().attempt(), 1);
  // Heartbeats that list it keep it (longer than a lease) ...
  std::this_thread::sleep_for(1800ms);
  EXPECT_EQ(Get(exp).state(), "assigned");
  EXPECT_EQ(Get(exp).attempt(), 1);
  // ... heartbeats without it lose it, and the requeued experiment comes back as attempt 2.
  worker.ForgetAttempts();
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  EXPECT_EQ(msg.assign().spec().experiment_id(), exp);
  EXPECT_EQ(msg.assign().spec().attempt(), 2);
  EXPECT_EQ(QueryInt(db(),
                     "SELECT COUNT(*) FROM attempts WHERE attempt = 1 AND state = 'lost' AND "
                     "failure_detail LIKE '%does not report it%'"),
            1);
  EXPECT_TRUE(worker.Close().ok());
}

TEST_F(DaemonApi, GpuRecipesWaitForAGpuWorker) {
  FakeWorker worker(channel_, "host:cpu");
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  xv::v1::SubmitResponse gpu;
  ASSERT_TRUE(Submit({"device=cuda"}, &gpu).ok());
  xv::v1::SubmitResponse cpu;
  ASSERT_TRUE(Submit({"matrix_lr=0.05"}, &cpu).ok());
  // The CPU worker skips the GPU experiment and takes the later CPU one.
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  EXPECT_EQ(msg.assign().spec().experiment_id(), cpu.experiment_ids(0));
  EXPECT_EQ(Get(gpu.experiment_ids(0)).state(), "queued");
  EXPECT_TRUE(worker.Close().ok());
}

// Status counts the queued experiments whose trainer no connected worker offers (the store's
// CountQueuedByTrainer), what `xvctl status` prints as "waiting: ...".
TEST_F(DaemonApi, StatusCountsQueuedExperimentsWhoseTrainerNoConnectedWorkerOffers) {
  xv::v1::SubmitResponse gpu;  // the default trainer, but no CPU worker takes it
  ASSERT_TRUE(Submit({"device=cuda"}, &gpu).ok());
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(CpuTinyYaml());
  req.set_campaign("noisy-runs");
  req.set_trainer("noisy");
  for (const char* lr : {"0.05", "0.06", "0.07"}) {
    auto* o = req.add_candidates()->add_overrides();
    o->set_key("matrix_lr");
    o->set_value(lr);
  }
  xv::v1::SubmitResponse noisy;
  {
    grpc::ClientContext ctx;
    grpc::Status gs = experiments_->Submit(&ctx, req, &noisy);
    ASSERT_TRUE(gs.ok()) << gs.error_message();
  }
  auto status = [&]() {
    grpc::ClientContext ctx;
    xv::v1::StatusResponse st;
    EXPECT_TRUE(experiments_->Status(&ctx, xv::v1::StatusRequest(), &st).ok());
    return st;
  };
  auto unserved = [](const xv::v1::StatusResponse& st) {
    std::vector<std::pair<std::string, int64_t>> out;
    for (const auto& u : st.unserved_trainers()) out.emplace_back(u.trainer(), u.queued());
    return out;
  };
  using Unserved = std::vector<std::pair<std::string, int64_t>>;
  xv::v1::StatusResponse st = status();
  EXPECT_EQ(st.queued(), 4);
  EXPECT_EQ(unserved(st), (Unserved{{"libtorch", 1}, {"noisy", 3}}));

  // A worker offering libtorch connects: only "noisy" is unserved now, and all four still wait.
  FakeWorker worker(channel_, "host:cpu");
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  auto deadline = std::chrono::steady_clock::now() + 10s;
  do {
    st = status();
    if (unserved(st).size() == 1) break;
    std::this_thread::sleep_for(20ms);
  } while (std::chrono::steady_clock::now() < deadline);
  EXPECT_EQ(st.queued(), 4);
  EXPECT_EQ(unserved(st), (Unserved{{"noisy", 3}}));
  EXPECT_TRUE(worker.Close().ok());
}

TEST_F(DaemonApi, SecondDaemonOnTheSameSocketOrStateDirIsRefused) {
  DaemonOptions options;
  options.state_dir = dir_.string();
  options.listen = "none";
  std::unique_ptr<DaemonServer> second;
  Status s = DaemonServer::Start(options, &second);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition) << s.ToString();
  EXPECT_NE(s.message().find("answers"), std::string::npos) << s.message();

  std::unique_ptr<StateDirLock> lock1, lock2;
  ASSERT_TRUE(StateDirLock::Acquire(dir_.string(), &lock1).ok());
  s = StateDirLock::Acquire(dir_.string(), &lock2);
  EXPECT_EQ(s.code(), Status::Code::kFailedPrecondition);
  EXPECT_NE(s.message().find(std::to_string(getpid())), std::string::npos) << s.message();
  lock1.reset();
  EXPECT_TRUE(StateDirLock::Acquire(dir_.string(), &lock2).ok());
}

TEST(DaemonServerStart, RefusesNonLoopbackTcpAndReportsPickedPort) {
  std::random_device rd;
  auto dir = std::filesystem::temp_directory_path() / ("xvd-it-" + std::to_string(rd()));
  DaemonOptions options;
  options.state_dir = dir.string();
  options.listen = "0.0.0.0:7470";
  std::unique_ptr<DaemonServer> server;
  Status s = DaemonServer::Start(options, &server);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("loopback"), std::string::npos) << s.message();

  options.listen = "127.0.0.1:0";
  s = DaemonServer::Start(options, &server);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_GT(server->tcp_port(), 0);
  EXPECT_EQ(std::stoi(ReadFile((dir / "xvd.port").string())), server->tcp_port());
  auto perms = std::filesystem::status(dir / "xvd.sock").permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read | std::filesystem::perms::group_write);
  // The TCP port answers the same API.
  auto stub = xv::v1::Experiments::NewStub(grpc::CreateChannel(
      "127.0.0.1:" + std::to_string(server->tcp_port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 10s);
  xv::v1::StatusResponse st;
  grpc::Status gs = stub->Status(&ctx, xv::v1::StatusRequest(), &st);
  EXPECT_TRUE(gs.ok()) << gs.error_message();
  EXPECT_EQ(st.database(), (dir / "xv.db").string());
  server->Shutdown();
  EXPECT_FALSE(std::filesystem::exists(dir / "xvd.sock"));
  EXPECT_FALSE(std::filesystem::exists(dir / "xvd.port"));
  server.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace xv::daemon
