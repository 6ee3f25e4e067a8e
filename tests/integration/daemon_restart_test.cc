// The real `xvd` binary as a process: kill -9 in the middle of an attempt, restart on the same
// state dir, and the reconnecting worker keeps its attempt; every event is applied exactly once,
// the database passes integrity_check. Also: SIGTERM exits 0 and removes the socket; a second xvd
// on the same state dir is refused naming the first one's pid.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "daemon/store/sqlite_connection.h"
#include "tests/integration/daemon_fake_worker.h"
#include "xv/v1/experiments.grpc.pb.h"

namespace xv::daemon {
namespace {

namespace fs = std::filesystem;
using fake::FakeWorker;
using namespace std::chrono_literals;

std::string ReadFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string XvdBinary() {
  const char* bin = std::getenv("XV_BINARY_DIR");
  return std::string(bin ? bin : ".") + "/bin/xvd";
}

// Starts `xvd` with `args`, stderr to `log`. Returns the pid.
pid_t StartXvd(const std::vector<std::string>& args, const std::string& log) {
  pid_t pid = fork();
  if (pid == 0) {
    int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> argv;
    std::string bin = XvdBinary();
    argv.push_back(bin.data());
    std::vector<std::string> copy = args;
    for (auto& a : copy) argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(bin.c_str(), argv.data());
    _exit(127);
  }
  return pid;
}

// Waits for the process to exit; returns its exit status (or 128 + signal), -1 on timeout.
int WaitExit(pid_t pid, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid, &status, WNOHANG) == pid) {
      return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    std::this_thread::sleep_for(20ms);
  }
  return -1;
}

bool WaitForServing(const std::string& socket) {
  for (int i = 0; i < 200; ++i) {
    // A fresh channel each time: a failed one would wait out its reconnect backoff.
    auto stub = xv::v1::Experiments::NewStub(
        grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 200ms);
    xv::v1::StatusResponse st;
    if (stub->Status(&ctx, xv::v1::StatusRequest(), &st).ok()) return true;
    std::this_thread::sleep_for(50ms);
  }
  return false;
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

class XvdProcess : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(XvdBinary())) << XvdBinary() << " is not built";
    std::random_device rd;
    dir_ = fs::temp_directory_path() / ("xvd-rt-" + std::to_string(rd()));
    fs::create_directories(dir_);
    state_ = (dir_ / "s").string();
    socket_ = state_ + "/xvd.sock";
    log_ = (dir_ / "xvd.log").string();
  }
  void TearDown() override {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      WaitExit(pid_, 5s);
    }
    std::error_code ec;
    if (std::getenv("XV_KEEP_TEST_DIR") == nullptr) fs::remove_all(dir_, ec);
  }
  void Start() {
    pid_ = StartXvd(
        {"--state-dir", state_, "--listen", "none", "--lease-ms", "5000", "--heartbeat-ms", "200"},
        log_);
    ASSERT_TRUE(WaitForServing(socket_)) << ReadFile(log_);
  }

  fs::path dir_;
  std::string state_, socket_, log_;
  pid_t pid_ = -1;
};

std::string StepJson(int step) {
  return R"({"type":"step","t":)" + std::to_string(step) + R"(,"step":)" + std::to_string(step) +
         R"(,"loss":)" + std::to_string(9.0 - 0.1 * step) + R"(,"progress":)" +
         std::to_string(step / 10.0) + "}";
}

TEST_F(XvdProcess, KillNineMidAttemptThenRestartAppliesEveryEventOnce) {
  Start();
  auto channel = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
  auto experiments = xv::v1::Experiments::NewStub(channel);
  const char* src = std::getenv("XV_SOURCE_DIR");
  xv::v1::SubmitRequest req;
  req.set_recipe_yaml(ReadFile(std::string(src ? src : ".") + "/recipes/cpu-tiny.yaml"));
  xv::v1::SubmitResponse submitted;
  {
    grpc::ClientContext ctx;
    ASSERT_TRUE(experiments->Submit(&ctx, req, &submitted).ok());
  }
  const int64_t exp = submitted.experiment_ids(0);
  xv::v1::DaemonMessage msg;
  {
    FakeWorker worker(channel, "host:cpu");
    ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_assign(); }, &msg)) << ReadFile(log_);
    worker.SendEvent(exp, 1, 1, R"({"type":"start","t":0,"device":{"name":"cpu: fake"}})");
    for (int i = 1; i <= 5; ++i) worker.SendEvent(exp, 1, i + 1, StepJson(i));
    ASSERT_TRUE(worker.ReadUntil([](auto& m) { return m.has_ack() && m.ack().seq() == 6; }, &msg));
    // The daemon dies without any chance to clean up.
    ASSERT_EQ(kill(pid_, SIGKILL), 0);
    EXPECT_EQ(WaitExit(pid_, 5s), 128 + SIGKILL);
    pid_ = -1;
    worker.Close();
  }
  EXPECT_TRUE(fs::exists(socket_)) << "a killed daemon leaves its socket file";
  // Restart on the same state dir: the stale socket is replaced, the lock is free again.
  Start();
  auto channel2 = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
  xv::v1::RunningAttempt ra;
  ra.set_experiment_id(exp);
  ra.set_attempt(1);
  ra.set_last_seq(9);
  FakeWorker again(channel2, "host:cpu", {ra});
  ASSERT_TRUE(again.ReadUntil(
      [&](auto& m) { return m.has_ack() && m.ack().experiment_id() == exp; }, &msg));
  EXPECT_EQ(msg.ack().seq(), 6);  // what survived the kill
  // The worker replays its spool from the start (the worst case) and finishes.
  again.SendEvent(exp, 1, 1, R"({"type":"start","t":0,"device":{"name":"cpu: fake"}})");
  for (int i = 1; i <= 8; ++i) again.SendEvent(exp, 1, i + 1, StepJson(i));
  again.SendEvent(exp, 1, 10,
                  R"({"type":"summary","val_bpb":1.75,"training_seconds":25,"total_seconds":30,)"
                  R"("num_steps":8,"tok_per_sec":1000,"mfu_percent":null,"total_tokens":16384})");
  xv::v1::WorkerMessage fin;
  fin.mutable_finished()->set_experiment_id(exp);
  fin.mutable_finished()->set_attempt(1);
  fin.mutable_finished()->set_state("succeeded");
  fin.mutable_finished()->set_last_seq(10);
  again.Send(fin);
  ASSERT_TRUE(again.ReadUntil([](auto& m) { return m.has_ack() && m.ack().finished(); }, &msg));
  EXPECT_EQ(msg.ack().seq(), 10);
  again.Close();

  // SIGTERM: a clean exit 0 that removes the socket.
  ASSERT_EQ(kill(pid_, SIGTERM), 0);
  EXPECT_EQ(WaitExit(pid_, 10s), 0) << ReadFile(log_);
  pid_ = -1;
  EXPECT_FALSE(fs::exists(socket_));

  const std::string db = state_ + "/xv.db";
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM events WHERE source = 'trainer'"), 10);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM metrics"), 8);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(DISTINCT step) FROM metrics"), 8);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM results"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM attempts"), 1);
  EXPECT_EQ(QueryInt(db, "SELECT COUNT(*) FROM experiments WHERE state = 'succeeded'"), 1);
  std::unique_ptr<store::SqliteConnection> conn;
  ASSERT_TRUE(
      store::SqliteConnection::Open(db, store::SqliteConnection::Mode::kReadOnly, &conn).ok());
  store::SqliteStatement st;
  ASSERT_TRUE(conn->Prepare("PRAGMA integrity_check", &st).ok());
  bool row = false;
  ASSERT_TRUE(st.Step(&row).ok());
  EXPECT_EQ(st.ColumnText(0), "ok");
}

TEST_F(XvdProcess, SecondDaemonOnTheStateDirIsRefusedNamingThePid) {
  Start();
  const std::string second_log = (dir_ / "second.log").string();
  pid_t second = StartXvd({"--state-dir", state_, "--listen", "none"}, second_log);
  EXPECT_EQ(WaitExit(second, 10s), 1);
  EXPECT_NE(ReadFile(second_log).find("another xvd (pid " + std::to_string(pid_) + ")"),
            std::string::npos)
      << ReadFile(second_log);
  EXPECT_EQ(std::stol(ReadFile(state_ + "/xvd.pid")), pid_);
  // The first one still serves.
  EXPECT_TRUE(WaitForServing(socket_));
}

TEST_F(XvdProcess, NonLoopbackListenIsRefusedWithAClearError) {
  pid_t p = StartXvd({"--state-dir", state_, "--listen", "0.0.0.0:7470"}, log_);
  EXPECT_EQ(WaitExit(p, 10s), 1);
  EXPECT_NE(ReadFile(log_).find("only loopback addresses"), std::string::npos) << ReadFile(log_);
}

}  // namespace
}  // namespace xv::daemon
