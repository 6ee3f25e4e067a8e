// /healthz and /readyz (daemon/web/health_check.h) over real HTTP: a HealthCheck behind the Beast
// server on a loopback socket (readiness follows the listeners, the write fault and the database
// file), then a real xvd started from a config file, answering on --health-listen and on --http
// whatever the Host header.
#include "daemon/web/health_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>

#include "daemon/web/dashboard_server.h"
#include "tests/unit/fixtures/scoped_temp_dir.h"

namespace xv::daemon::web {
namespace {

struct RawReply {
  int status = 0;
  std::string body;
};

// One HTTP/1.1 request on a fresh connection to 127.0.0.1:port; status 0 when nothing answered.
RawReply HttpGet(int port, const std::string& path, const std::string& host = "127.0.0.1",
                 const std::string& method = "GET") {
  RawReply r;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    ::close(fd);
    return r;
  }
  const std::string request =
      method + " " + path + " HTTP/1.1\r\nHost: " + host + "\r\nConnection: close\r\n\r\n";
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    ::close(fd);
    return r;
  }
  std::string text;
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof(buf))) > 0;) text.append(buf, static_cast<size_t>(n));
  ::close(fd);
  if (text.rfind("HTTP/1.1 ", 0) != 0 || text.size() < 12) return r;
  r.status = std::atoi(text.substr(9, 3).c_str());
  const size_t end = text.find("\r\n\r\n");
  if (end != std::string::npos) r.body = text.substr(end + 4);
  return r;
}

class HealthCheckServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteBytes(db_, "not really a database");
    health_ = std::make_unique<HealthCheck>([this] { return fault(); }, db_);
    Status s =
        DashboardServer::Start("127.0.0.1", 0, 1, health_.get(), &server_, "--health-listen");
    ASSERT_TRUE(s.ok()) << s.ToString();
  }

  std::string fault() {
    std::lock_guard<std::mutex> lock(mu_);
    return fault_;
  }
  void set_fault(const std::string& f) {
    std::lock_guard<std::mutex> lock(mu_);
    fault_ = f;
  }

  testing::ScopedTempDir dir_;
  std::string db_ = dir_.File("xv.db");
  std::mutex mu_;
  std::string fault_;
  std::unique_ptr<HealthCheck> health_;
  std::unique_ptr<DashboardServer> server_;
};

TEST_F(HealthCheckServerTest, LivenessAnswersWhateverTheDaemonsState) {
  RawReply r = HttpGet(server_->port(), "/healthz");
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ok\n");
  set_fault("disk full");
  EXPECT_EQ(HttpGet(server_->port(), "/healthz?x=1", "xvd.cluster.local:8471").status, 200);
  EXPECT_EQ(HttpGet(server_->port(), "/healthz", "127.0.0.1", "HEAD").status, 200);
}

TEST_F(HealthCheckServerTest, ReadinessFollowsListenersWriteFaultAndDatabaseFile) {
  RawReply r = HttpGet(server_->port(), "/readyz");
  EXPECT_EQ(r.status, 503) << "not serving yet";
  EXPECT_EQ(r.body, "not ready: listeners not up (starting or stopping)\n");

  health_->SetServing(true);
  r = HttpGet(server_->port(), "/readyz", "10.0.0.7:8471");  // a kubelet's Host
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, "ready\n");

  set_fault("database or disk is full (/secret/path/xv.db)");
  r = HttpGet(server_->port(), "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("database in read-only mode"), std::string::npos) << r.body;
  EXPECT_EQ(r.body.find("/secret/path"), std::string::npos) << "the probe names no path";
  set_fault("");
  EXPECT_EQ(HttpGet(server_->port(), "/readyz").status, 200);

  ASSERT_EQ(::unlink(db_.c_str()), 0);
  r = HttpGet(server_->port(), "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("database file not writable (No such file or directory)"),
            std::string::npos)
      << r.body;

  health_->SetServing(false);
  set_fault("x");
  r = HttpGet(server_->port(), "/readyz");
  EXPECT_EQ(r.status, 503);
  EXPECT_NE(r.body.find("listeners not up"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("; database in read-only mode"), std::string::npos) << r.body;
}

TEST_F(HealthCheckServerTest, ServesNothingElse) {
  EXPECT_EQ(HttpGet(server_->port(), "/").status, 404);
  EXPECT_EQ(HttpGet(server_->port(), "/metrics").status, 404);
  EXPECT_EQ(HttpGet(server_->port(), "/api/overview").status, 404);
  EXPECT_EQ(HttpGet(server_->port(), "/readyz", "127.0.0.1", "POST").status, 405);
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Waits up to 30 s for `path` to hold a port number; 0 when it never does.
int WaitForPortFile(const std::string& path) {
  for (int i = 0; i < 300; ++i) {
    const std::string text = ReadFile(path);
    if (!text.empty() && text.back() == '\n') return std::atoi(text.c_str());
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  return 0;
}

TEST(HealthCheckXvdTest, XvdFromAConfigFileServesHealthOnBothListeners) {
  const char* bin = std::getenv("XV_BINARY_DIR");
  ASSERT_NE(bin, nullptr) << "XV_BINARY_DIR (ctest sets it)";
  testing::ScopedTempDir dir;
  const std::string state = dir.File("state"), log = dir.File("xvd.log");
  testing::WriteBytes(dir.File("xvd.yaml"),
                      "# flags of xvd, without '--'\n"
                      "state-dir: " +
                          state +
                          "\n"
                          "listen: 127.0.0.1:0\n"
                          "http: 127.0.0.1:0\n"
                          "health-listen: 0.0.0.0:0\n"
                          "lease-ms: 20000\n");
  const std::string xvd = std::string(bin) + "/bin/xvd";
  const std::string config = dir.File("xvd.yaml");
  const pid_t pid = ::fork();
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 1);
    ::dup2(fd, 2);
    ::execl(xvd.c_str(), "xvd", "--config", config.c_str(), "--log-level", "debug", nullptr);
    ::_exit(127);
  }
  ASSERT_GT(pid, 0);
  const int health_port = WaitForPortFile(state + "/health.port");
  const int http_port = WaitForPortFile(state + "/http.port");
  if (health_port == 0 || http_port == 0) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    FAIL() << "xvd wrote no health.port/http.port within 30 s; its log:\n" << ReadFile(log);
  }
  RawReply r = HttpGet(health_port, "/readyz", "10.1.2.3:8471");
  EXPECT_EQ(r.status, 200) << r.body << ReadFile(log);
  EXPECT_EQ(r.body, "ready\n");
  EXPECT_EQ(HttpGet(health_port, "/healthz").body, "ok\n");
  EXPECT_EQ(HttpGet(health_port, "/").status, 404) << "the health listener serves no dashboard";
  // The dashboard's listener: health whatever the Host, the dashboard only to loopback names.
  EXPECT_EQ(HttpGet(http_port, "/readyz", "xvd.example:8470").status, 200);
  EXPECT_EQ(HttpGet(http_port, "/", "xvd.example:8470").status, 403);
  EXPECT_EQ(HttpGet(http_port, "/", "127.0.0.1").status, 200);

  ASSERT_EQ(::kill(pid, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << ReadFile(log);
  EXPECT_EQ(HttpGet(health_port, "/healthz").status, 0) << "the listener is gone";
  EXPECT_FALSE(std::ifstream(state + "/health.port").good()) << "health.port removed at exit";
}

}  // namespace
}  // namespace xv::daemon::web
