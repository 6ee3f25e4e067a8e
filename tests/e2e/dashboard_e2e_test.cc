// The dashboard end to end: a real xvd (`--http 127.0.0.1:0`, port read from STATE_DIR/http.port)
// and a real xv-worker running the fake trainer through a wrapper that makes matrix_lr 0.07 fail
// with markup in its error text. One campaign whose name is markup too runs a noise-band sweep
// round (0.02 kept, 0.07 failing, two head controls), set up once for the suite. Then:
//  - HttpEndpoints: plain HTTP/1.1 over a socket: /metrics, /api/overview, /api/campaigns/ID,
//    /api/experiments/ID, HEAD, 404, 405 on POST, 403 for a foreign Host header.
//  - BrowserRendersPages: Debian's chromium (headless, --dump-dom) loads the overview, campaign and
//    experiment pages; the rendered DOM holds the head and the figures, the overview's script ran
//    under the CSP and refreshed from /api/overview, and the hostile names and
//    failure text are text, not elements (no injected <script> or <img>, title unchanged). Skipped,
//    saying why, when chromium is not installed.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>

#include "tests/e2e/process_harness.h"

namespace xv::e2e {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char kCampaign[] = "<script>document.title='pwned'</script>lr";
const char kFailureMarkup[] = "<script>document.title='pwned'</script><img src=x> boom";

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
};

// One HTTP/1.1 request to 127.0.0.1:port over a plain socket (Connection: close), read to EOF.
HttpResponse Http(int port, const std::string& method, const std::string& target,
                  const std::string& host = "") {
  HttpResponse r;
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return r;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ::close(fd);
    return r;
  }
  const std::string req = method + " " + target + " HTTP/1.1\r\nHost: " +
                          (host.empty() ? "127.0.0.1:" + std::to_string(port) : host) +
                          "\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
  (void)::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string raw;
  char buf[65536];
  for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) raw.append(buf, n);
  ::close(fd);
  const size_t end = raw.find("\r\n\r\n");
  if (end == std::string::npos || raw.size() < 12) return r;
  r.status = std::atoi(raw.substr(9, 3).c_str());
  size_t pos = raw.find("\r\n") + 2;
  while (pos < end) {
    const size_t eol = raw.find("\r\n", pos);
    const std::string line = raw.substr(pos, eol - pos);
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[name] = line.substr(colon + 2);
    pos = eol + 2;
  }
  r.body = raw.substr(end + 4);
  return r;
}

int CountOf(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t p = text.find(what); p != std::string::npos; p = text.find(what, p + 1)) ++n;
  return n;
}

class DashboardE2eTest : public ::testing::Test {
 protected:
  // The daemon, the worker and one decided round, shared by the tests of the suite.
  static void SetUpTestSuite() {
    sb_ = new Sandbox("dash");
    xvd_ = new ChildGuard();
    worker_ = new ChildGuard();
    if (!Sandbox::BinariesBuilt()) {
      setup_error_ = Sandbox::BinariesBuilt().message();
      return;
    }
    if (!sb_->StartDaemon(xvd_, {"--http", "127.0.0.1:0"})) {
      setup_error_ = "xvd did not start:\n" + FileTail(sb_->Path("xvd.log"));
      return;
    }
    const std::string port_file = sb_->state() + "/http.port";
    if (!WaitForPath(port_file, 20)) {
      setup_error_ = "no " + port_file + ":\n" + FileTail(sb_->Path("xvd.log"));
      return;
    }
    std::ifstream(port_file) >> port_;

    // The fake trainer, except that matrix_lr 0.07 fails with markup in its error message.
    const std::string wrapper = sb_->Path("hostile_trainer.sh");
    const std::string error_line = sb_->Path("hostile_error.jsonl");
    std::ofstream(error_line)
        << json({{"type", "error"}, {"t", 1}, {"kind", "crashed"}, {"message", kFailureMarkup}})
               .dump()
        << "\n";
    std::ofstream(wrapper)
        << "#!/usr/bin/env bash\nrecipe=\"\"; prev=\"\"\n"
        << "for a in \"$@\"; do [ \"$prev\" = --recipe-json ] && recipe=$a; prev=$a; done\n"
        << "if [ -n \"$recipe\" ] && tr -d ' \\n' <\"$recipe\" | grep -q '\"matrix_lr\":0.07'; "
           "then\n  cat '"
        << error_line << "'\n  exit 1\nfi\nexec '" << SourcePath("tests/fixtures/fake_trainer.sh")
        << "' \"$@\"\n";
    ::chmod(wrapper.c_str(), 0755);
    *worker_ = ChildGuard(sb_->WorkerArgv("dash-cpu", wrapper),
                          {{"XV_FAKE_STEPS", "3"}, {"XV_FAKE_STEP_SECONDS", "0.02"}},
                          sb_->Path("worker.log"));

    const std::string policy = sb_->Path("policy.yaml");
    std::ofstream(policy) << "mode: noise_band\nreplicates: 2\nhead_controls: 2\n"
                             "min_effect: 0.01\nband_k: 2\n";
    CommandResult r = sb_->Xvctl({"campaign", "create", kCampaign, "--recipe",
                                  SourcePath("recipes/cpu-tiny.yaml"), "--policy", policy,
                                  "--budget", R"({"time_budget_s": 2})"});
    if (r.exit_code != 0) {
      setup_error_ = "campaign create: " + r.out + r.err;
      return;
    }
    r = sb_->Xvctl({"submit", "--campaign", kCampaign, "--sweep", "matrix_lr=0.02,0.07"});
    if (r.exit_code != 0) {
      setup_error_ = "submit: " + r.out + r.err;
      return;
    }
    r = sb_->Xvctl({"wait", "--timeout", "90"}, 120);
    if (r.exit_code != 0) {
      setup_error_ = "wait: " + r.out + r.err + Logs();
      return;
    }
    // The daemon decides the round on its next tick; the dashboard shows it once decided.
    for (int i = 0; i < 100; ++i) {
      json overview = json::parse(Http(port_, "GET", "/api/overview").body, nullptr, false);
      if (!overview.is_discarded() && !overview["campaigns"].empty() &&
          overview["campaigns"][0]["head_candidate"] == "matrix_lr=0.02") {
        campaign_id_ = overview["campaigns"][0]["id"].get<std::string>();
        break;
      }
      ::usleep(100 * 1000);
    }
    if (campaign_id_.empty()) {
      setup_error_ = "the round was never decided with matrix_lr=0.02 kept" + Logs();
      return;
    }
    json campaign =
        json::parse(Http(port_, "GET", "/api/campaigns/" + campaign_id_).body, nullptr, false);
    for (const auto& e : campaign.value("experiments", json::array())) {
      if (e["name"] == "matrix_lr=0.02" && e["state"] == "succeeded")
        kept_id_ = e["id"].get<std::string>();
      if (e["name"] == "matrix_lr=0.07") failed_id_ = e["id"].get<std::string>();
    }
    if (kept_id_.empty() || failed_id_.empty()) {
      setup_error_ = "experiments missing from /api/campaigns: " + campaign.dump(1);
    }
  }

  static void TearDownTestSuite() {
    worker_->Stop();
    xvd_->Stop();
    delete worker_;
    delete xvd_;
    delete sb_;
  }

  void SetUp() override { ASSERT_TRUE(setup_error_.empty()) << setup_error_; }

  static std::string Logs() {
    return "\n--- xvd.log ---\n" + FileTail(sb_->Path("xvd.log")) + "\n--- worker.log ---\n" +
           FileTail(sb_->Path("worker.log"));
  }

  static Sandbox* sb_;
  static ChildGuard* xvd_;
  static ChildGuard* worker_;
  static std::string setup_error_;
  static int port_;
  static std::string campaign_id_, kept_id_, failed_id_;
};

Sandbox* DashboardE2eTest::sb_ = nullptr;
ChildGuard* DashboardE2eTest::xvd_ = nullptr;
ChildGuard* DashboardE2eTest::worker_ = nullptr;
std::string DashboardE2eTest::setup_error_;
int DashboardE2eTest::port_ = 0;
std::string DashboardE2eTest::campaign_id_, DashboardE2eTest::kept_id_,
    DashboardE2eTest::failed_id_;

TEST_F(DashboardE2eTest, HttpEndpoints) {
  HttpResponse m = Http(port_, "GET", "/metrics");
  ASSERT_EQ(m.status, 200) << m.body;
  EXPECT_EQ(m.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  // 2 head controls + 2 runs of 0.02 succeeded; both runs of 0.07 failed.
  for (const char* line :
       {"xv_experiments{state=\"succeeded\"} 4\n", "xv_experiments{state=\"failed\"} 2\n",
        "xv_queue_depth 0\n", "xv_campaigns{state=\"active\"} 1\n", "xv_read_only_mode 0\n",
        "# TYPE xv_http_requests_total counter\n"}) {
    EXPECT_NE(m.body.find(line), std::string::npos) << line << " in\n" << m.body;
  }
  EXPECT_TRUE(std::regex_search(m.body, std::regex("xv_workers\\{state=\"(idle|busy)\"\\} 1\n")))
      << m.body;
  EXPECT_TRUE(std::regex_search(
      m.body, std::regex("xv_worker_heartbeat_age_seconds\\{worker=\"dash-cpu\"\\} [0-9.e-]+\n")))
      << m.body;
  EXPECT_TRUE(std::regex_search(m.body, std::regex("xv_database_bytes\\{file=\"db\"\\} [1-9]")));

  HttpResponse o = Http(port_, "GET", "/api/overview");
  ASSERT_EQ(o.status, 200);
  EXPECT_EQ(o.headers["content-type"], "application/json");
  EXPECT_EQ(o.headers.count("access-control-allow-origin"), 0u);
  json j = json::parse(o.body);
  EXPECT_EQ(j["campaigns"][0]["name"], kCampaign);
  EXPECT_DOUBLE_EQ(j["campaigns"][0]["head_val_bpb"].get<double>(), 1.2);
  EXPECT_EQ(j["workers"][0]["name"], "dash-cpu");
  EXPECT_EQ(j["experiments_by_state"]["failed"], 2);

  HttpResponse c = Http(port_, "GET", "/api/campaigns/" + campaign_id_);
  ASSERT_EQ(c.status, 200);
  j = json::parse(c.body);
  ASSERT_EQ(j["decisions"].size(), 1u) << c.body;
  EXPECT_EQ(j["decisions"][0]["kept_candidate"], "matrix_lr=0.02");
  int kept = 0;
  for (const auto& cand : j["decisions"][0]["decision"]["candidates"]) {
    if (cand["decision"] == "keep") {
      ++kept;
      EXPECT_EQ(cand["name"], "matrix_lr=0.02");
      EXPECT_EQ(cand["stats"]["n"], 2);
    }
  }
  EXPECT_EQ(kept, 1) << c.body;
  EXPECT_EQ(j["campaign"]["head_history"].size(), 2u);
  // The campaign's experiments in pages (issue 18): all of them on the default page, then pages
  // of 2 from the newest, walked with next_before, hold the same ids once each.
  EXPECT_FALSE(j["experiments_truncated"].get<bool>()) << c.body;
  EXPECT_TRUE(j["next_before"].is_null());
  const size_t total = j["experiments"].size();
  ASSERT_GE(total, 5u) << c.body;
  EXPECT_EQ(j["experiments_total"], total);
  // Experiments are protobuf JSON: int64 ids are strings.
  auto id_of = [](const json& x) {
    return x["id"].is_string() ? std::stoll(x["id"].get<std::string>()) : x["id"].get<int64_t>();
  };
  std::vector<int64_t> every, walked;
  for (const auto& x : j["experiments"]) every.push_back(id_of(x));
  std::string target = "/api/campaigns/" + campaign_id_ + "?limit=2";
  while (true) {
    HttpResponse p = Http(port_, "GET", target);
    ASSERT_EQ(p.status, 200) << target << ": " << p.body;
    json page = json::parse(p.body);
    EXPECT_EQ(page["limit"], 2);
    std::vector<int64_t> ids;
    for (const auto& x : page["experiments"]) ids.push_back(id_of(x));
    ASSERT_FALSE(ids.empty()) << p.body;
    walked.insert(walked.begin(), ids.begin(), ids.end());
    if (!page["experiments_truncated"].get<bool>()) break;
    ASSERT_EQ(ids.size(), 2u) << p.body;
    EXPECT_EQ(page["next_before"], ids.front()) << p.body;
    ASSERT_LT(walked.size(), total) << p.body;
    target = "/api/campaigns/" + campaign_id_ +
             "?before=" + std::to_string(page["next_before"].get<int64_t>()) + "&limit=2";
  }
  EXPECT_EQ(walked, every);
  HttpResponse bad = Http(port_, "GET", "/api/campaigns/" + campaign_id_ + "?limit=x");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("limit"), std::string::npos) << bad.body;
  EXPECT_EQ(Http(port_, "GET", "/api/campaigns/" + campaign_id_ + "?limit=5000").status, 400);

  HttpResponse e = Http(port_, "GET", "/api/experiments/" + kept_id_);
  ASSERT_EQ(e.status, 200);
  j = json::parse(e.body);
  EXPECT_DOUBLE_EQ(j["figures"]["val_bpb"].get<double>(), 1.2);
  EXPECT_DOUBLE_EQ(j["figures"]["tok_per_sec"].get<double>(), 12345.0);
  EXPECT_TRUE(j["figures"]["mfu_percent"].is_null());  // the fake reports no peak FLOPS
  EXPECT_EQ(j["loss_curve"].size(), 3u);
  e = Http(port_, "GET", "/api/experiments/" + failed_id_);
  j = json::parse(e.body);
  EXPECT_NE(j["experiment"]["failure_detail"].get<std::string>().find(kFailureMarkup),
            std::string::npos)
      << e.body;

  HttpResponse head = Http(port_, "HEAD", "/campaigns/" + campaign_id_);
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  EXPECT_EQ(head.headers["content-length"],
            std::to_string(Http(port_, "GET", "/campaigns/" + campaign_id_).body.size()));
  EXPECT_EQ(Http(port_, "GET", "/no/such/page").status, 404);
  EXPECT_EQ(Http(port_, "GET", "/api/experiments/999999").status, 404);
  HttpResponse post = Http(port_, "POST", "/api/overview");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["allow"], "GET, HEAD");
  EXPECT_EQ(Http(port_, "GET", "/", "attacker.example:" + std::to_string(port_)).status, 403);
  m = Http(port_, "GET", "/metrics");
  EXPECT_TRUE(std::regex_search(m.body, std::regex("xv_http_requests_total\\{code=\"405\"\\} 1\n")))
      << m.body;
}

TEST_F(DashboardE2eTest, BrowserRendersPages) {
  std::string chromium;
  for (const char* p : {"/usr/bin/chromium", "/usr/bin/chromium-browser"}) {
    if (fs::exists(p)) chromium = p;
  }
  if (chromium.empty()) {
    GTEST_SKIP() << "chromium is not installed (deploy/install-deps.sh installs it); the HTTP "
                    "checks above ran without it";
  }
  auto dom = [&](const std::string& path, const std::string& extra = "") {
    std::vector<std::string> argv = {chromium,
                                     "--headless=new",
                                     "--no-sandbox",
                                     "--disable-gpu",
                                     "--user-data-dir=" + sb_->Path("chromium-profile"),
                                     "--dump-dom"};
    if (!extra.empty()) argv.push_back(extra);
    argv.push_back("http://127.0.0.1:" + std::to_string(port_) + path);
    CommandResult r = RunCommand(argv, 90);
    EXPECT_EQ(r.exit_code, 0) << path << ": " << r.err.substr(0, 2000);
    EXPECT_NE(r.out.find("</html>"), std::string::npos) << path << ": " << r.out;
    return r.out;
  };
  // Text nodes are serialised escaped; an element would appear as a tag.
  const std::string escaped_campaign = "&lt;script&gt;document.title='pwned'&lt;/script&gt;lr";

  // 8 s of virtual time: the overview's script (allowed by the CSP nonce) refreshes from
  // /api/overview after 5 s.
  const std::string overview = dom("/", "--virtual-time-budget=8000");
  EXPECT_NE(overview.find("id=\"refreshed\">refreshed "), std::string::npos) << overview;
  EXPECT_NE(overview.find(escaped_campaign), std::string::npos) << overview;
  EXPECT_EQ(CountOf(overview, "<script"), 1) << "only the dashboard's own script: " << overview;
  EXPECT_NE(overview.find("<title>overview - xv</title>"), std::string::npos);
  EXPECT_NE(overview.find("dash-cpu"), std::string::npos);

  const std::string campaign = dom("/campaigns/" + campaign_id_);
  EXPECT_NE(campaign.find(escaped_campaign), std::string::npos) << campaign;
  EXPECT_EQ(CountOf(campaign, "<script"), 0) << campaign;
  EXPECT_EQ(CountOf(campaign, "<img"), 0) << campaign;
  EXPECT_EQ(campaign.find("<title>pwned"), std::string::npos);
  EXPECT_NE(campaign.find("<span id=\"head-candidate\">matrix_lr=0.02</span>"), std::string::npos)
      << campaign;
  EXPECT_NE(campaign.find("<span id=\"head-val-bpb\">1.200000</span>"), std::string::npos);
  EXPECT_NE(campaign.find("<svg"), std::string::npos);
  EXPECT_NE(campaign.find("val_bpb over rounds"), std::string::npos);
  EXPECT_EQ(campaign.find("class=\"older\""), std::string::npos) << "one page holds them all";

  // A page of 2: its count, an "older" link that leads to the next page, which links back to the
  // newest.
  const std::string paged = dom("/campaigns/" + campaign_id_ + "?limit=2");
  EXPECT_NE(paged.find("2 of "), std::string::npos) << paged;
  std::smatch older;
  ASSERT_TRUE(std::regex_search(paged, older, std::regex("class=\"older\" href=\"([^\"]+)\"")))
      << paged;
  const std::string next =
      std::regex_replace(older[1].str(), std::regex("&amp;"), std::string("&"));
  EXPECT_NE(next.find("before="), std::string::npos) << next;
  const std::string second = dom(next);
  EXPECT_NE(second.find("class=\"newest\""), std::string::npos) << second;
  EXPECT_NE(second.find("2 of "), std::string::npos) << second;

  const std::string kept = dom("/experiments/" + kept_id_);
  EXPECT_NE(kept.find("id=\"fig-val-bpb\">1.200000<"), std::string::npos) << kept;
  EXPECT_NE(kept.find("id=\"fig-tok-per-sec\">12,345<"), std::string::npos);
  EXPECT_NE(kept.find("unknown (no peak FLOPS for this device; source: unknown)"),
            std::string::npos);
  EXPECT_NE(kept.find("<polyline"), std::string::npos);

  const std::string failed = dom("/experiments/" + failed_id_);
  EXPECT_NE(
      failed.find("&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;img src=x&gt; boom"),
      std::string::npos)
      << failed;
  EXPECT_EQ(CountOf(failed, "<script"), 0) << failed;
  EXPECT_EQ(CountOf(failed, "<img"), 0) << failed;
  EXPECT_NE(failed.find("<title>experiment " + failed_id_ + " - xv</title>"), std::string::npos);
}

}  // namespace
}  // namespace xv::e2e
