// Authentication, roles, worker credentials, audit and TLS of xvd end to end in one process
// (issue 15): a real DaemonServer (SQLite file, gRPC on its unix socket and a loopback TCP port),
// clients dialling it through proto/daemon_channel.h with tokens made by the Tokens service, a
// fake worker holding real Session streams, and TLS with a CA and certificates made in the test
// by the openssl CLI.
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <set>
#include <sstream>

#include <google/protobuf/descriptor.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <sys/wait.h>
#include <nlohmann/json.hpp>

#include "daemon/api/daemon_server.h"
#include "daemon/api/method_roles.h"
#include "proto/daemon_channel.h"
#include "tests/integration/daemon_fake_worker.h"
#include "tests/integration/in_process_daemon.h"
#include "xv/v1/auth.grpc.pb.h"
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

std::shared_ptr<grpc::Channel> Dial(const std::string& address, const std::string& token,
                                    DaemonChannelSecurity security = {}) {
  security.token = token;
  std::shared_ptr<grpc::Channel> channel;
  Status s = OpenDaemonChannel(address, security, grpc::ChannelArguments(), &channel);
  EXPECT_TRUE(s.ok()) << s.ToString();
  return channel;
}

template <typename Call>
grpc::Status WithDeadline(Call call) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + 30s);
  return call(&ctx);
}

// Every method of the services xvd serves, from the generated descriptors.
std::vector<std::string> ServedMethods() {
  std::vector<std::string> out;
  for (const google::protobuf::FileDescriptor* file :
       {xv::v1::SubmitRequest::descriptor()->file(), xv::v1::Register::descriptor()->file(),
        xv::v1::CreateTokenRequest::descriptor()->file()}) {
    for (int s = 0; s < file->service_count(); ++s) {
      const google::protobuf::ServiceDescriptor* service = file->service(s);
      for (int m = 0; m < service->method_count(); ++m) {
        out.push_back("/" + service->full_name() + "/" + service->method(m)->name());
      }
    }
  }
  return out;
}

TEST(MethodRoles, EveryServedMethodIsInTheTableAndNothingElse) {
  std::set<std::string> served;
  for (const std::string& m : ServedMethods()) served.insert(m);
  std::set<std::string> table;
  for (const MethodRule& rule : MethodRules()) {
    EXPECT_TRUE(table.insert(rule.method).second) << "twice in the table: " << rule.method;
    EXPECT_EQ(rule.state_changing, rule.target != nullptr) << rule.method;
  }
  EXPECT_EQ(served, table);
  EXPECT_GE(served.size(), 25u);
}

class Auth : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = fake::FreshStateDir("xvd-auth"); }
  void TearDown() override {
    if (server_) server_->Shutdown();
    server_.reset();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  // A daemon on its unix socket and 127.0.0.1:<picked port>.
  void Start(bool require_tokens, DaemonOptions options = {}) {
    DaemonOptions base = fake::FastDaemonOptions(dir_);
    base.listen = "127.0.0.1:0";
    base.require_tokens = require_tokens;
    base.tls_cert = options.tls_cert;
    base.tls_key = options.tls_key;
    base.tls_client_ca = options.tls_client_ca;
    Status s = DaemonServer::Start(base, &server_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    unix_ = "unix:" + server_->socket_path();
    tcp_ = "127.0.0.1:" + std::to_string(server_->tcp_port());
  }

  // A token made over the unix socket by the daemon's own uid (the local owner: admin).
  std::string CreateToken(const std::string& role, const std::string& worker = "",
                          int64_t* id = nullptr) {
    auto stub = xv::v1::Tokens::NewStub(Dial(unix_, ""));
    xv::v1::CreateTokenRequest req;
    req.set_role(role);
    req.set_name("test " + role);
    req.set_worker_name(worker);
    xv::v1::CreateTokenResponse resp;
    grpc::Status st =
        WithDeadline([&](grpc::ClientContext* c) { return stub->CreateToken(c, req, &resp); });
    EXPECT_TRUE(st.ok()) << st.error_message();
    if (id != nullptr) *id = resp.token().id();
    EXPECT_EQ(resp.secret().rfind("xv_", 0), 0u) << resp.secret();
    return resp.secret();
  }

  grpc::Status Submit(const std::shared_ptr<grpc::Channel>& ch, xv::v1::SubmitResponse* resp) {
    auto stub = xv::v1::Experiments::NewStub(ch);
    xv::v1::SubmitRequest req;
    req.set_recipe_yaml(CpuTinyYaml());
    req.set_recipe_name("cpu-tiny");
    req.set_campaign("auth");
    return WithDeadline([&](grpc::ClientContext* c) { return stub->Submit(c, req, resp); });
  }

  grpc::Status CallStatus(const std::shared_ptr<grpc::Channel>& ch) {
    auto stub = xv::v1::Experiments::NewStub(ch);
    xv::v1::StatusResponse resp;
    return WithDeadline(
        [&](grpc::ClientContext* c) { return stub->Status(c, xv::v1::StatusRequest(), &resp); });
  }

  grpc::Status Cancel(const std::shared_ptr<grpc::Channel>& ch, int64_t id) {
    auto stub = xv::v1::Experiments::NewStub(ch);
    xv::v1::CancelRequest req;
    req.set_experiment_id(id);
    xv::v1::CancelResponse resp;
    return WithDeadline([&](grpc::ClientContext* c) { return stub->Cancel(c, req, &resp); });
  }

  xv::v1::Experiment Get(int64_t id) {
    auto stub = xv::v1::Experiments::NewStub(Dial(unix_, ""));
    xv::v1::GetExperimentRequest req;
    req.set_id(id);
    xv::v1::Experiment e;
    grpc::Status st =
        WithDeadline([&](grpc::ClientContext* c) { return stub->GetExperiment(c, req, &e); });
    EXPECT_TRUE(st.ok()) << st.error_message();
    return e;
  }

  std::filesystem::path dir_;
  std::unique_ptr<DaemonServer> server_;
  std::string unix_, tcp_;
};

// With --require-tokens, every method of every service refuses a call without a token on
// loopback TCP with UNAUTHENTICATED: no handler forgets to ask the Authorizer.
TEST_F(Auth, EveryMethodRefusesACallWithoutAToken) {
  Start(/*require_tokens=*/true);
  grpc::GenericStub generic(Dial(tcp_, ""));
  for (const std::string& method : ServedMethods()) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + 30s);
    grpc::ByteBuffer request, response;
    grpc::Slice empty("");
    request = grpc::ByteBuffer(&empty, 1);
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    grpc::Status status;
    generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &response, [&](grpc::Status s) {
      std::lock_guard<std::mutex> lock(mu);
      status = s;
      done = true;
      cv.notify_all();
    });
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return done; });
    EXPECT_EQ(status.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << method << ": " << status.error_message();
  }
}

// Without any token and without --require-tokens the daemon is open, as before tokens existed;
// the first token turns authentication on.
TEST_F(Auth, OpenUntilTheFirstTokenThenTokensApply) {
  Start(/*require_tokens=*/false);
  EXPECT_TRUE(CallStatus(Dial(tcp_, "")).ok());
  const std::string read = CreateToken("read");
  grpc::Status st = CallStatus(Dial(tcp_, ""));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_NE(st.error_message().find("no token"), std::string::npos) << st.error_message();
  EXPECT_TRUE(CallStatus(Dial(tcp_, read)).ok());
  // The daemon's own uid on the unix socket stays the owner without a token.
  EXPECT_TRUE(CallStatus(Dial(unix_, "")).ok());
  st = CallStatus(Dial(tcp_, "xv_00000000000000000000000000000000"));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(st.error_message().find("unknown token"), std::string::npos) << st.error_message();
}

// No token, a revoked token, a read token that submits; a submit token submits and cancels (its
// own experiment; another submit token may not); the audit table has the submit, the cancel and
// the refused calls with their token ids.
TEST_F(Auth, RolesRefuseWithTheRightCodesAndTheAuditRecordsThem) {
  Start(/*require_tokens=*/true);
  int64_t read_id = 0, submit_id = 0, revoked_id = 0;
  const std::string read = CreateToken("read", "", &read_id);
  const std::string submit = CreateToken("submit", "", &submit_id);
  const std::string revoked = CreateToken("submit", "", &revoked_id);
  const std::string admin = CreateToken("admin");

  xv::v1::SubmitResponse resp;
  grpc::Status st = Submit(Dial(tcp_, ""), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();

  st = Submit(Dial(tcp_, read), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("needs the submit role"), std::string::npos)
      << st.error_message();
  EXPECT_TRUE(CallStatus(Dial(tcp_, read)).ok());

  ASSERT_TRUE(Submit(Dial(tcp_, submit), &resp).ok());
  ASSERT_EQ(resp.experiment_ids_size(), 1);
  const int64_t exp = resp.experiment_ids(0);
  // Another submit token may not cancel it: a submit token cancels only its own.
  st = Cancel(Dial(tcp_, revoked), exp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("cancels only its own"), std::string::npos)
      << st.error_message();
  EXPECT_NE(Get(exp).state(), "cancelled");
  st = Cancel(Dial(tcp_, submit), exp);
  ASSERT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(Get(exp).state(), "cancelled");

  // Revoked: unauthenticated from then on.
  ASSERT_TRUE(CallStatus(Dial(tcp_, revoked)).ok());
  {
    auto tokens = xv::v1::Tokens::NewStub(Dial(tcp_, admin));
    xv::v1::RevokeTokenRequest req;
    req.set_id(revoked_id);
    xv::v1::Token out;
    st = WithDeadline([&](grpc::ClientContext* c) { return tokens->RevokeToken(c, req, &out); });
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_FALSE(out.revoked_at().empty());
  }
  st = Submit(Dial(tcp_, revoked), &resp);
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  EXPECT_NE(st.error_message().find("revoked"), std::string::npos) << st.error_message();

  // A submit token cannot read the audit; an admin can.
  auto audit_as = [&](const std::string& token, xv::v1::ListAuditResponse* out) {
    auto stub = xv::v1::Audit::NewStub(Dial(tcp_, token));
    xv::v1::ListAuditRequest req;
    req.set_limit(100);
    return WithDeadline([&](grpc::ClientContext* c) { return stub->ListAudit(c, req, out); });
  };
  xv::v1::ListAuditResponse audit;
  EXPECT_EQ(audit_as(submit, &audit).error_code(), grpc::StatusCode::PERMISSION_DENIED);
  st = audit_as(admin, &audit);
  ASSERT_TRUE(st.ok()) << st.error_message();
  bool submit_ok = false, cancel_ok = false, read_refused = false, anonymous_refused = false,
       revoked_refused = false;
  for (const auto& r : audit.records()) {
    if (r.method() == "/xv.v1.Experiments/Submit" && r.outcome() == "ok") {
      submit_ok = r.token_id() == submit_id && r.target() == "campaign auth";
    }
    if (r.method() == "/xv.v1.Experiments/Cancel" && r.outcome() == "ok") {
      cancel_ok = r.token_id() == submit_id && r.target() == "experiment " + std::to_string(exp);
    }
    if (r.method() == "/xv.v1.Experiments/Submit" && r.outcome() == "PERMISSION_DENIED") {
      read_refused = r.token_id() == read_id && r.caller() == "token:" + std::to_string(read_id);
    }
    if (r.method() == "/xv.v1.Experiments/Submit" && r.outcome() == "UNAUTHENTICATED") {
      if (r.caller() == "anonymous" && r.detail().find("revoked") != std::string::npos) {
        revoked_refused = true;
      } else if (r.caller() == "anonymous") {
        anonymous_refused = true;
      }
    }
  }
  EXPECT_TRUE(submit_ok && cancel_ok && read_refused && anonymous_refused && revoked_refused)
      << submit_ok << cancel_ok << read_refused << anonymous_refused << revoked_refused << "\n"
      << audit.DebugString();
}

// A worker token opens the worker session and nothing else; a client token (even admin) cannot
// open a worker session.
TEST_F(Auth, WorkerTokensAndClientTokensStayApart) {
  Start(/*require_tokens=*/true);
  const std::string worker = CreateToken("worker", "w-a");
  const std::string admin = CreateToken("admin");
  grpc::Status st = CallStatus(Dial(tcp_, worker));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("needs the read role"), std::string::npos)
      << st.error_message();
  xv::v1::SubmitResponse resp;
  EXPECT_EQ(Submit(Dial(tcp_, worker), &resp).error_code(), grpc::StatusCode::PERMISSION_DENIED);

  FakeWorker as_admin(Dial(tcp_, admin), "w-a");
  xv::v1::DaemonMessage msg;
  EXPECT_FALSE(as_admin.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  st = as_admin.Close();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("needs the worker role"), std::string::npos)
      << st.error_message();

  FakeWorker real(Dial(tcp_, worker), "w-a");
  EXPECT_TRUE(real.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  real.Close();
}

// A re-register under a worker's name with another worker's credential is refused, and the real
// worker's attempt keeps running and finishes as the real worker reports it.
TEST_F(Auth, ForgedReRegisterIsRefusedAndTheRealAttemptKeepsRunning) {
  Start(/*require_tokens=*/true);
  const std::string real_token = CreateToken("worker", "gpu-box-0");
  const std::string other_token = CreateToken("worker");  // unbound: claims names it registers
  const std::string submit = CreateToken("submit");

  FakeWorker real(Dial(tcp_, real_token), "gpu-box-0");
  xv::v1::DaemonMessage msg;
  ASSERT_TRUE(real.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  real.StartHeartbeats(100ms);
  xv::v1::SubmitResponse resp;
  ASSERT_TRUE(Submit(Dial(tcp_, submit), &resp).ok());
  const int64_t exp = resp.experiment_ids(0);
  ASSERT_TRUE(real.ReadUntil([](auto& m) { return m.has_assign(); }, &msg));
  ASSERT_EQ(msg.assign().spec().experiment_id(), exp);
  real.SendEvent(exp, 1, 1, R"({"type":"start","t":1.0,"device":{"name":"cpu: fake"}})");
  ASSERT_TRUE(real.ReadUntil(
      [&](auto& m) { return m.has_ack() && m.ack().experiment_id() == exp && m.ack().seq() == 1; },
      &msg));

  // The forger: another worker token, the real worker's name, claiming the running attempt.
  xv::v1::RunningAttempt claimed;
  claimed.set_experiment_id(exp);
  claimed.set_attempt(1);
  FakeWorker forged(Dial(tcp_, other_token), "gpu-box-0", {claimed});
  EXPECT_FALSE(forged.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  grpc::Status st = forged.Close();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("worker name gpu-box-0 belongs to token"), std::string::npos)
      << st.error_message();
  // Without a token on TCP: unauthenticated.
  FakeWorker anonymous(Dial(tcp_, ""), "gpu-box-0", {claimed});
  EXPECT_EQ(anonymous.Close().error_code(), grpc::StatusCode::UNAUTHENTICATED);

  // The real attempt is untouched: still running on the real worker, which finishes it.
  std::this_thread::sleep_for(500ms);  // several heartbeats and scheduling ticks
  xv::v1::Experiment running = Get(exp);
  EXPECT_EQ(running.state(), "running");
  EXPECT_EQ(running.worker(), "gpu-box-0");
  EXPECT_EQ(running.attempt(), 1);
  xv::v1::WorkerMessage fin;
  fin.mutable_finished()->set_experiment_id(exp);
  fin.mutable_finished()->set_attempt(1);
  fin.mutable_finished()->set_state("failed");
  fin.mutable_finished()->set_failure_kind("crashed");
  fin.mutable_finished()->set_last_seq(1);
  real.Send(fin);
  ASSERT_TRUE(real.ReadUntil(
      [&](auto& m) { return m.has_ack() && m.ack().finished() && m.ack().experiment_id() == exp; },
      &msg));
  EXPECT_EQ(Get(exp).state(), "failed");
  EXPECT_EQ(Get(exp).worker(), "gpu-box-0");

  // An unbound token claims a free name at its first registration; the name is then its own.
  FakeWorker first(Dial(tcp_, other_token), "gpu-box-1");
  EXPECT_TRUE(first.ReadUntil([](auto& m) { return m.has_registered(); }, &msg));
  first.Close();
  const std::string third = CreateToken("worker");
  FakeWorker thief(Dial(tcp_, third), "gpu-box-1");
  st = thief.Close();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::PERMISSION_DENIED) << st.error_message();
  EXPECT_NE(st.error_message().find("belongs to token"), std::string::npos) << st.error_message();
  real.Close();
}

// The xvctl binary: token create over the unix socket as the daemon's owner, the token read from
// --token-file or XV_TOKEN_FILE (never the command line), refusals with exit 1 and xvd's message,
// an unreadable token file a usage error (exit 2) naming the flag.
struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr
};

CommandResult RunXvctl(const std::string& args, const std::string& env = "") {
  const char* bin = std::getenv("XV_BINARY_DIR");
  const std::string cmd = env + " " + std::string(bin ? bin : ".") + "/bin/xvctl " + args + " 2>&1";
  CommandResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) r.output.append(buf, n);
  const int status = ::pclose(p);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

TEST_F(Auth, XvctlTokenCommandsAndTokenFiles) {
  Start(/*require_tokens=*/true);
  CommandResult created =
      RunXvctl("--daemon " + unix_ + " token create --role submit --name ci --json");
  ASSERT_EQ(created.exit_code, 0) << created.output;
  const std::string token = nlohmann::json::parse(created.output).at("token").get<std::string>();
  const std::string token_file = (dir_ / "submit-token").string();
  std::ofstream(token_file) << token << "\n";

  CommandResult r = RunXvctl("--daemon " + tcp_ + " status");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("no token"), std::string::npos) << r.output;
  r = RunXvctl("--daemon " + tcp_ + " status --json", "XV_TOKEN_FILE=" + token_file);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  r = RunXvctl("--daemon " + tcp_ + " --token-file " + token_file + " audit");
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("needs the admin role"), std::string::npos) << r.output;
  r = RunXvctl("--daemon " + tcp_ + " --token-file " + (dir_ / "missing").string() + " status");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--token-file"), std::string::npos) << r.output;

  r = RunXvctl("--daemon " + unix_ + " token list --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.find(token), std::string::npos) << "token list shows no secret";
  r = RunXvctl("--daemon " + unix_ + " audit --json --limit 5");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("/xv.v1.Experiments/Status"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("/xv.v1.Tokens/CreateToken"), std::string::npos) << r.output;
}

TEST_F(Auth, NonLoopbackListenNeedsTls) {
  DaemonOptions options = fake::FastDaemonOptions(dir_);
  options.listen = "0.0.0.0:0";
  std::unique_ptr<DaemonServer> server;
  Status s = DaemonServer::Start(options, &server);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--tls-cert"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("--tls-key"), std::string::npos) << s.message();
  options.tls_cert = (dir_ / "missing.pem").string();
  s = DaemonServer::Start(options, &server);
  EXPECT_EQ(s.code(), Status::Code::kInvalidArgument);
  EXPECT_NE(s.message().find("--tls-key"), std::string::npos) << s.message();  // half a pair
}

// A CA, a server certificate for 127.0.0.1 and a client certificate, made with the openssl CLI.
class TlsFiles {
 public:
  explicit TlsFiles(const std::filesystem::path& dir) : dir_(dir) {
    std::filesystem::create_directories(dir_);
    Run("openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=xv-test-ca -keyout " +
        P("ca.key") + " -out " + P("ca.pem"));
    Issue("server", "/CN=127.0.0.1", "subjectAltName=IP:127.0.0.1,DNS:localhost");
    Issue("client", "/CN=xv-worker", "extendedKeyUsage=clientAuth");
  }
  std::string P(const std::string& name) const { return (dir_ / name).string(); }

 private:
  void Issue(const std::string& who, const std::string& subject, const std::string& ext) {
    std::ofstream(P(who + ".ext")) << ext << "\n";
    Run("openssl req -newkey rsa:2048 -nodes -subj " + subject + " -keyout " + P(who + ".key") +
        " -out " + P(who + ".csr"));
    Run("openssl x509 -req -in " + P(who + ".csr") + " -CA " + P("ca.pem") + " -CAkey " +
        P("ca.key") + " -CAcreateserial -days 2 -extfile " + P(who + ".ext") + " -out " +
        P(who + ".pem"));
  }
  static void Run(const std::string& cmd) {
    ASSERT_EQ(std::system((cmd + " 2>/dev/null").c_str()), 0) << cmd;
  }
  std::filesystem::path dir_;
};

TEST_F(Auth, TlsRoundTripOverLoopbackWithClientCertificates) {
  if (std::system("openssl version >/dev/null 2>&1") != 0) GTEST_SKIP() << "no openssl CLI";
  TlsFiles tls(dir_.string() + "-tls");
  DaemonOptions options;
  options.tls_cert = tls.P("server.pem");
  options.tls_key = tls.P("server.key");
  options.tls_client_ca = tls.P("ca.pem");
  Start(/*require_tokens=*/false, options);
  const std::string read = CreateToken("read");

  DaemonChannelSecurity with_cert;
  with_cert.tls_ca = tls.P("ca.pem");
  with_cert.tls_cert = tls.P("client.pem");
  with_cert.tls_key = tls.P("client.key");
  grpc::Status st = CallStatus(Dial(tcp_, read, with_cert));
  EXPECT_TRUE(st.ok()) << st.error_message();
  // TLS, but the token still decides.
  st = CallStatus(Dial(tcp_, "", with_cert));
  EXPECT_EQ(st.error_code(), grpc::StatusCode::UNAUTHENTICATED) << st.error_message();
  // No client certificate, or plaintext: no connection.
  DaemonChannelSecurity no_cert;
  no_cert.tls_ca = tls.P("ca.pem");
  EXPECT_EQ(CallStatus(Dial(tcp_, read, no_cert)).error_code(), grpc::StatusCode::UNAVAILABLE);
  EXPECT_EQ(CallStatus(Dial(tcp_, read)).error_code(), grpc::StatusCode::UNAVAILABLE);
  std::error_code ec;
  std::filesystem::remove_all(dir_.string() + "-tls", ec);
}

}  // namespace
}  // namespace xv::daemon
