// The reads of a user or an agent, timed end to end. See user_read_probes.h.
#include "bench/daemon/user_read_probes.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>

#include "tests/e2e/process_harness.h"

namespace xv::bench {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// GET `path` from 127.0.0.1:port (HTTP/1.1, Connection: close): the status line and body; "" and
// *error set when the connection fails.
std::string HttpGet(int port, const std::string& path, std::string* error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (fd < 0 || ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (fd >= 0) ::close(fd);
    *error = "connect 127.0.0.1:" + std::to_string(port) + " failed";
    return "";
  }
  const std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(req.size())) {
    ::close(fd);
    *error = "send failed";
    return "";
  }
  std::string reply;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof(buf), 0)) > 0;) reply.append(buf, n);
  ::close(fd);
  return reply;
}

}  // namespace

std::string ProbeUserReads(const UserReadTargets& t, int calls, int process_calls,
                           std::map<std::string, std::vector<double>>* out) {
  std::mt19937_64 rng(11);
  auto some_id = [&](int64_t max_id) {
    return std::to_string(
        1 + static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, max_id))));
  };
  const std::vector<std::string> base = {t.xvctl, "--state-dir", t.state_dir};
  auto xvctl = [&](const std::string& name, std::vector<std::string> args) -> std::string {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), args.begin(), args.end());
    const double t0 = Now();
    const e2e::CommandResult r = e2e::RunCommand(argv, 120);
    (*out)[name].push_back(Now() - t0);
    if (r.exit_code != 0) {
      return name + ": exit " + std::to_string(r.exit_code) + ": " + r.err.substr(0, 2000);
    }
    return "";
  };
  // A read that an older xvctl may not know (an unknown flag): timed only where it ran.
  auto xvctl_if_known = [&](const std::string& name, std::vector<std::string> args) {
    std::string e = xvctl(name, std::move(args));
    if (!e.empty()) (*out)[name].pop_back();
    if ((*out)[name].empty()) out->erase(name);
    return std::string();
  };
  auto http = [&](const std::string& name, const std::string& path) -> std::string {
    std::string error;
    const double t0 = Now();
    const std::string reply = HttpGet(t.http_port, path, &error);
    (*out)[name].push_back(Now() - t0);
    if (!error.empty()) return name + ": " + error;
    if (reply.rfind("HTTP/1.1 200", 0) != 0) return name + ": " + reply.substr(0, 500);
    return "";
  };
  std::string err;
  const std::string mid_id = std::to_string(std::max<int64_t>(2, t.max_experiment_id / 2));
  for (int i = 0; i < process_calls && err.empty(); ++i) {
    const std::string id = some_id(t.shown_max_id);
    for (std::string e :
         {xvctl("xvctl results (default)", {"results"}),
          xvctl("xvctl results --json (default)", {"results", "--json"}),
          xvctl_if_known("xvctl results --before ID (an older page)",
                         {"results", "--before", mid_id}),
          xvctl("xvctl results --campaign C --limit 20",
                {"results", "--campaign", t.campaign, "--limit", "20"}),
          xvctl("xvctl show ID", {"show", id}), xvctl("xvctl status", {"status"})}) {
      if (err.empty()) err = e;
    }
  }
  // The old default (the newest 10,000 rows), a few calls: seconds each.
  for (int i = 0; i < std::min(process_calls, 3) && err.empty(); ++i) {
    for (std::string e :
         {xvctl("xvctl results --limit 10000 (the old default)", {"results", "--limit", "10000"}),
          xvctl("xvctl results --json --limit 10000 (the old default)",
                {"results", "--json", "--limit", "10000"})}) {
      if (err.empty()) err = e;
    }
  }
  const std::string campaign = "/api/campaigns/" + std::to_string(t.campaign_id);
  for (int i = 0; t.http_port > 0 && i < calls && err.empty(); ++i) {
    const std::string id = some_id(t.max_experiment_id);
    for (std::string e :
         {http("GET /api/overview", "/api/overview"),
          http("GET /api/campaigns/ID (the large one)", campaign),
          http("GET /api/campaigns/ID?before=ID (an older page)", campaign + "?before=" + mid_id),
          http("GET /api/experiments/ID (its metrics)", "/api/experiments/" + id)}) {
      if (err.empty()) err = e;
    }
  }
  return err;
}

}  // namespace xv::bench
