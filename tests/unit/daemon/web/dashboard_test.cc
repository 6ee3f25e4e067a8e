// Tests of daemon/web: HtmlEscape, SvgPlot, PrometheusText and RenderMetrics as pure functions;
// DashboardRouter over a real SQLite database holding a campaign with a hostile name and a failed
// run with hostile failure text; DashboardServer over a real loopback TCP socket (a small Beast
// client).
#include <gtest/gtest.h>

#include <algorithm>

#include <boost/asio/connect.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "common/html_escape.h"
#include "daemon/web/dashboard_html.h"
#include "daemon/web/dashboard_reader.h"
#include "daemon/web/dashboard_router.h"
#include "daemon/web/dashboard_server.h"
#include "daemon/web/metrics_exporter.h"
#include "daemon/web/prometheus_text.h"
#include "daemon/web/svg_plot.h"
#include "tests/unit/daemon/fixtures/store_fixture.h"

namespace xv::daemon::web {
namespace {

using store::testing::MakeEvent;
using store::testing::MakeRegister;
using store::testing::MakeSubmission;
using store::testing::TempDir;

const char kHostileCampaign[] = "<script>alert('campaign')</script>";
const char kHostileFailure[] = "<script>alert(\"failure\")</script> & <b>bold</b>";

TEST(HtmlEscape, EscapesEveryMarkupCharacter) {
  EXPECT_EQ(HtmlEscape("<script>alert('x') & \"y\"</script>"),
            "&lt;script&gt;alert(&#39;x&#39;) &amp; &quot;y&quot;&lt;/script&gt;");
  EXPECT_EQ(HtmlEscape("matrix_lr=0.03"), "matrix_lr=0.03");
  EXPECT_EQ(HtmlEscape(""), "");
}

TEST(SvgPlot, EscapesLabelsAndSkipsNonFinitePoints) {
  SvgPlot plot;
  plot.title = "<b>title</b>";
  plot.x_label = "step";
  plot.y_label = "loss";
  PlotSeries s{"<i>series</i>", "#123456", true, {}};
  s.points = {{0, 1, ""}, {1, NAN, ""}, {2, 0.5, "<tip>"}};
  plot.series = {s};
  const std::string svg = RenderSvgPlot(plot);
  EXPECT_EQ(svg.rfind("<svg", 0), 0u) << svg;
  EXPECT_NE(svg.find("&lt;b&gt;title&lt;/b&gt;"), std::string::npos);
  EXPECT_NE(svg.find("&lt;i&gt;series&lt;/i&gt;"), std::string::npos);
  EXPECT_NE(svg.find("<title>&lt;tip&gt;</title>"), std::string::npos);
  EXPECT_EQ(svg.find("<b>"), std::string::npos);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  // The polyline joins the two finite points only.
  const size_t pts = svg.find("points=\"");
  ASSERT_NE(pts, std::string::npos);
  const std::string points = svg.substr(pts + 8, svg.find('"', pts + 8) - pts - 8);
  EXPECT_EQ(std::count(points.begin(), points.end(), ','), 2) << points;

  SvgPlot empty;
  empty.title = "nothing";
  EXPECT_NE(RenderSvgPlot(empty).find("no data"), std::string::npos);
}

TEST(SvgPlot, NiceTicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(NiceTicks(0, 10, 5), (std::vector<double>{0, 2, 4, 6, 8, 10}));
  const std::vector<double> t = NiceTicks(1.13, 1.37, 5);
  ASSERT_FALSE(t.empty());
  EXPECT_GE(t.front(), 1.13);
  EXPECT_LE(t.back(), 1.37 + 1e-9);
  EXPECT_NEAR(t[1] - t[0], 0.05, 1e-12);
}

TEST(PrometheusText, FormatsFamiliesLabelsAndValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(FormatSampleValue(3), "3");
  EXPECT_EQ(FormatSampleValue(0.25), "0.25");
  EXPECT_EQ(FormatSampleValue(NAN), "NaN");
  EXPECT_EQ(FormatSampleValue(-INFINITY), "-Inf");
  PrometheusText p;
  p.Family("xv_test", "A test.", "gauge");
  p.Sample("xv_test", {{"worker", "w\"1"}, {"state", "idle"}}, 2);
  p.Sample("xv_test", {}, 1.5);
  EXPECT_EQ(p.text(),
            "# HELP xv_test A test.\n# TYPE xv_test gauge\nxv_test{worker=\"w\\\"1\","
            "state=\"idle\"} 2\nxv_test 1.5\n");
}

TEST(RenderMetrics, EveryFamilyWithItsSamples) {
  OverviewData data;
  data.experiments_by_state = {{"queued", 3}, {"running", 1}, {"succeeded", 0}};
  WorkerView w;
  w.info.set_name("host:cuda:0");
  w.info.set_state("busy");
  w.heartbeat_age_s = 1.5;
  data.workers.push_back(w);
  CampaignSummary c;
  c.campaign.set_state("active");
  data.campaigns.push_back(c);
  DatabaseFiles files{4096, 512};
  const std::string text = RenderMetrics(data, files, "database or disk is full", {{200, 7}});
  for (const char* line :
       {"xv_experiments{state=\"queued\"} 3\n", "xv_experiments{state=\"succeeded\"} 0\n",
        "xv_queue_depth 3\n", "xv_workers{state=\"busy\"} 1\n", "xv_workers{state=\"idle\"} 0\n",
        "xv_worker_heartbeat_age_seconds{worker=\"host:cuda:0\"} 1.5\n",
        "xv_campaigns{state=\"active\"} 1\n", "xv_database_bytes{file=\"db\"} 4096\n",
        "xv_database_bytes{file=\"wal\"} 512\n", "xv_read_only_mode 1\n",
        "xv_http_requests_total{code=\"200\"} 7\n", "# TYPE xv_http_requests_total counter\n"}) {
    EXPECT_NE(text.find(line), std::string::npos) << line << "\nin\n" << text;
  }
  EXPECT_NE(RenderMetrics(data, files, "", {}).find("xv_read_only_mode 0\n"), std::string::npos);
}

TEST(IsLoopbackHost, AcceptsLoopbackNamesOnly) {
  for (const char* h :
       {"127.0.0.1", "127.0.0.1:8470", "localhost", "LOCALHOST:1", "[::1]", "[::1]:8470"}) {
    EXPECT_TRUE(IsLoopbackHost(h)) << h;
  }
  for (const char* h : {"evil.example", "evil.example:8470", "127.0.0.1.evil.example", "[::1]evil",
                        "10.0.0.1:8470", "localhost.evil:80"}) {
    EXPECT_FALSE(IsLoopbackHost(h)) << h;
  }
}

// A database with a hostile campaign: two experiments, one succeeded with a result and step
// metrics, one failed with hostile failure text; a worker that sent a heartbeat.
class RouterOverDatabase : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string db = dir_.file("xv.db");
    ASSERT_TRUE(store::Store::Open(db, &writer_).ok());
    store::SubmissionIds ids;
    ASSERT_TRUE(
        writer_->submissions().InsertSubmission(MakeSubmission(2, kHostileCampaign), &ids).ok());
    campaign_id_ = ids.campaign_id;
    ok_id_ = ids.experiment_ids[0];
    failed_id_ = ids.experiment_ids[1];
    int64_t worker = 0;
    ASSERT_TRUE(writer_->workers().UpsertWorker(MakeRegister("host:cpu"), &worker).ok());
    xv::v1::ExperimentSpec spec;
    ASSERT_TRUE(writer_->attempts().AssignExperiment(ok_id_, worker, &spec).ok());
    std::vector<xv::v1::TrainerEvent> events = {MakeEvent(
        ok_id_, 1, 1, "start", R"({"type":"start","t":1,"device":{"name":"cpu: test"}})")};
    for (int step = 1; step <= 4; ++step) {
      events.push_back(MakeEvent(
          ok_id_, 1, 1 + step, "step",
          R"({"type":"step","t":2,"step":)" + std::to_string(step) + R"(,"loss":)" +
              std::to_string(9.0 / step) +
              R"(,"lrm":1,"dt_ms":10,"tok_per_sec":100,"mfu_percent":null,"progress":0.5})"));
    }
    events.push_back(MakeEvent(
        ok_id_, 1, 6, "summary",
        R"({"type":"summary","t":9,"val_bpb":1.234567,"training_seconds":20.1,"total_seconds":31.5,)"
        R"("peak_vram_mb":512.0,"mfu_percent":12.5,"total_tokens_M":0.5,"num_steps":4,)"
        R"("num_params_M":3.4,"depth":2,"tok_per_sec":24000.5,"peak_reserved_mb":600.0,)"
        R"("attention_backend":"math","peak_flops":989e12,"peak_flops_source":"datasheet",)"
        R"("flops_per_token":20000000,"num_params":3400001,"total_tokens":499712,"metric_version":"v1"})"));
    store::AppliedEvents applied;
    ASSERT_TRUE(writer_->attempts().ApplyTrainerEvents(worker, events, &applied).ok());
    xv::v1::Finished f;
    f.set_experiment_id(ok_id_);
    f.set_attempt(1);
    f.set_state("succeeded");
    f.set_last_seq(6);
    xv::v1::EventAck ack;
    ASSERT_TRUE(writer_->attempts().FinishAttempt(worker, f, &ack).ok());

    ASSERT_TRUE(writer_->attempts().AssignExperiment(failed_id_, worker, &spec).ok());
    ASSERT_TRUE(writer_->attempts()
                    .ApplyTrainerEvents(worker,
                                        {MakeEvent(failed_id_, 1, 1, "error",
                                                   nlohmann::json({{"type", "error"},
                                                                   {"kind", "crashed"},
                                                                   {"message", kHostileFailure}})
                                                       .dump())},
                                        &applied)
                    .ok());
    f.set_experiment_id(failed_id_);
    f.set_state("failed");
    f.set_failure_kind("crashed");
    f.set_failure_detail(kHostileFailure);
    f.set_exit_code(1);
    f.set_last_seq(1);
    f.set_stderr_tail(std::string("<img src=x onerror=alert(1)>\n"));
    ASSERT_TRUE(writer_->attempts().FinishAttempt(worker, f, &ack).ok());
    ASSERT_TRUE(writer_->workers().TouchWorker(worker).ok());

    Status s = DashboardReader::Open(db, &reader_);
    ASSERT_TRUE(s.ok()) << s.ToString();
    router_ = std::make_unique<DashboardRouter>(reader_.get(), [this] { return fault_; });
  }

  HttpReply Get(const std::string& target, const std::string& method = "GET",
                const std::string& host = "127.0.0.1:8470") {
    return router_->Handle({method, target, host});
  }

  TempDir dir_;
  std::unique_ptr<store::Store> writer_;
  std::unique_ptr<DashboardReader> reader_;
  std::unique_ptr<DashboardRouter> router_;
  std::string fault_;
  int64_t campaign_id_ = 0, ok_id_ = 0, failed_id_ = 0;
};

// No raw hostile markup anywhere in a page; its escaped text is there.
void ExpectEscaped(const std::string& page, const std::string& hostile) {
  EXPECT_EQ(page.find(hostile), std::string::npos) << "raw hostile text in the page";
  EXPECT_NE(page.find(HtmlEscape(hostile)), std::string::npos) << "escaped text missing";
}

TEST_F(RouterOverDatabase, OverviewShowsWorkersQueueAndEscapedCampaign) {
  const HttpReply r = Get("/");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "text/html; charset=utf-8");
  ExpectEscaped(r.body, kHostileCampaign);
  EXPECT_NE(r.body.find("host:cpu"), std::string::npos);
  EXPECT_NE(r.body.find("id=\"count-succeeded\">1<"), std::string::npos);
  EXPECT_NE(r.body.find("id=\"count-failed\">1<"), std::string::npos);
  // The one inline script carries the nonce the CSP header allows.
  std::string csp;
  for (const auto& [k, v] : r.headers) {
    if (k == "Content-Security-Policy") csp = v;
  }
  const size_t n = csp.find("'nonce-");
  ASSERT_NE(n, std::string::npos) << csp;
  const std::string nonce = csp.substr(n + 7, csp.find('\'', n + 7) - n - 7);
  EXPECT_NE(r.body.find("<script nonce=\"" + nonce + "\">"), std::string::npos);
  for (const auto& [k, v] : r.headers) EXPECT_NE(k, "Access-Control-Allow-Origin");
}

TEST_F(RouterOverDatabase, CampaignPageEscapesAndPlots) {
  const HttpReply r = Get("/campaigns/" + std::to_string(campaign_id_));
  ASSERT_EQ(r.status, 200) << r.body;
  ExpectEscaped(r.body, kHostileCampaign);
  ExpectEscaped(r.body, kHostileFailure);
  EXPECT_NE(r.body.find("<svg"), std::string::npos);
  EXPECT_NE(r.body.find("val_bpb over rounds"), std::string::npos);
  // The progress plot of `xvctl plot`, drawn by the same code.
  EXPECT_NE(r.body.find("<h2>Progress</h2><svg xmlns=\"http://www.w3.org/2000/svg\" "
                        "class=\"progress-plot\""),
            std::string::npos);
  EXPECT_NE(r.body.find("class=\"running-best\""), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("1.234567"), std::string::npos);
  EXPECT_NE(r.body.find("id=\"campaign-head\""), std::string::npos);
}

TEST_F(RouterOverDatabase, ExperimentPagesShowFiguresCurveAndEscapedFailure) {
  HttpReply r = Get("/experiments/" + std::to_string(ok_id_));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_NE(r.body.find("id=\"fig-val-bpb\">1.234567<"), std::string::npos);
  EXPECT_NE(r.body.find("id=\"fig-tok-per-sec\">24,001<"), std::string::npos);
  EXPECT_NE(r.body.find("12.50% of 989.0 TFLOP/s (datasheet)"), std::string::npos);
  EXPECT_NE(r.body.find("512.0 MB"), std::string::npos);
  EXPECT_NE(r.body.find("<polyline"), std::string::npos);
  EXPECT_NE(r.body.find("4 step rows stored"), std::string::npos);
  EXPECT_NE(r.body.find("matrix_lr"), std::string::npos);

  r = Get("/experiments/" + std::to_string(failed_id_));
  ASSERT_EQ(r.status, 200) << r.body;
  ExpectEscaped(r.body, kHostileFailure);
  ExpectEscaped(r.body, "<img src=x onerror=alert(1)>");
  EXPECT_NE(r.body.find("id=\"failure-kind\">crashed<"), std::string::npos);
}

TEST_F(RouterOverDatabase, JsonEndpointsMirrorThePages) {
  HttpReply r = Get("/api/overview");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.content_type, "application/json");
  nlohmann::json j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["experiments_by_state"]["succeeded"], 1);
  EXPECT_EQ(j["queue_depth"], 0);
  EXPECT_EQ(j["campaigns"][0]["name"], kHostileCampaign);
  EXPECT_EQ(j["workers"][0]["name"], "host:cpu");
  EXPECT_TRUE(j["workers"][0]["heartbeat_age_s"].is_number());
  EXPECT_FALSE(j["read_only_mode"].get<bool>());

  r = Get("/api/experiments/" + std::to_string(ok_id_));
  ASSERT_EQ(r.status, 200) << r.body;
  j = nlohmann::json::parse(r.body);
  EXPECT_DOUBLE_EQ(j["figures"]["val_bpb"].get<double>(), 1.234567);
  EXPECT_DOUBLE_EQ(j["figures"]["mfu_peak_flops"].get<double>(), 989e12);
  ASSERT_EQ(j["loss_curve"].size(), 4u);
  EXPECT_DOUBLE_EQ(j["loss_curve"][3]["loss"].get<double>(), 2.25);
  // The latest step, from the latest_metrics row the step events left.
  EXPECT_EQ(j["metric_rows"], 4);
  EXPECT_EQ(j["latest_step"]["step"], 4);
  EXPECT_DOUBLE_EQ(j["latest_step"]["loss"].get<double>(), 2.25);
  EXPECT_DOUBLE_EQ(j["latest_step"]["tok_per_sec"].get<double>(), 100);
  EXPECT_TRUE(j["latest_step"]["mfu_percent"].is_null());
  r = Get("/api/experiments/" + std::to_string(failed_id_));
  ASSERT_EQ(r.status, 200) << r.body;
  j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["metric_rows"], 0);
  EXPECT_TRUE(j["latest_step"].is_null());

  r = Get("/api/campaigns/" + std::to_string(campaign_id_));
  ASSERT_EQ(r.status, 200) << r.body;
  j = nlohmann::json::parse(r.body);
  EXPECT_EQ(j["experiments"].size(), 2u);
  EXPECT_EQ(j["campaign"]["name"], kHostileCampaign);
}

TEST_F(RouterOverDatabase, CampaignReplyStaysUnderItsCap) {
  {
    // 8 rounds of 300 KiB decisions and experiments with 600 KiB of text each: over the caps.
    MutexLock lock(writer_->database().mu());
    store::SqliteConnection* w = writer_->database().conn();
    const std::string id = std::to_string(campaign_id_);
    Status s = w->Exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 8) "
        "INSERT INTO rounds (campaign_id, kind, state, base_recipe_id, decision_json) "
        "SELECT campaign_id, kind, 'decided', base_recipe_id, '{\"note\":\"' || "
        "hex(zeroblob(150000)) || '\"}' FROM rounds, n WHERE campaign_id = " +
        id + " LIMIT 8");
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = w->Exec(
        "UPDATE experiments SET failure_detail = hex(zeroblob(300000)) "
        "WHERE campaign_id = " +
        id);
    ASSERT_TRUE(s.ok()) << s.ToString();
    s = w->Exec(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 10) "
        "INSERT INTO experiments (campaign_id, round_id, recipe_id, name, seed, "
        "time_budget_s, hard_deadline_s, failure_detail) SELECT campaign_id, round_id, "
        "recipe_id, 'big' || i, i, 1, 1, failure_detail FROM experiments, n WHERE id = " +
        std::to_string(failed_id_));
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  const HttpReply r = Get("/api/campaigns/" + std::to_string(campaign_id_));
  ASSERT_EQ(r.status, 200);
  EXPECT_LT(r.body.size(), 6u * 1024 * 1024);
  const nlohmann::json j = nlohmann::json::parse(r.body);
  EXPECT_TRUE(j["experiments_truncated"].get<bool>());
  EXPECT_GE(j["experiments"].size(), 2u);
  EXPECT_LT(j["experiments"].size(), 12u);
  EXPECT_GT(j["rounds_omitted"].get<int>(), 0);
  EXPECT_GE(j["campaign"]["rounds"].size(), 1u);
  const HttpReply page = Get("/campaigns/" + std::to_string(campaign_id_));
  ASSERT_EQ(page.status, 200);
  EXPECT_NE(page.body.find("oldest rounds are not shown"), std::string::npos);
  EXPECT_NE(page.body.find("experiments are shown"), std::string::npos);
}

TEST_F(RouterOverDatabase, ReadOnlyAndErrorAnswers) {
  HttpReply r = Get("/", "POST");
  EXPECT_EQ(r.status, 405);
  bool allow = false;
  for (const auto& [k, v] : r.headers) allow |= k == "Allow" && v == "GET, HEAD";
  EXPECT_TRUE(allow);
  EXPECT_EQ(Get("/api/overview", "DELETE").status, 405);
  EXPECT_EQ(Get("/nope").status, 404);
  r = Get("/api/campaigns/999");
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(nlohmann::json::parse(r.body)["error"], "campaign 999: not found");
  r = Get("/campaigns/abc");
  EXPECT_EQ(r.status, 400);
  EXPECT_NE(r.body.find("campaign id &#39;abc&#39;: expected a positive integer"),
            std::string::npos)
      << r.body;
  EXPECT_EQ(Get("/experiments/1/2").status, 400);
  r = Get("/", "GET", "evil.example:8470");
  EXPECT_EQ(r.status, 403);
  EXPECT_EQ(Get("/", "HEAD").status, 200);
  fault_ = "database or disk is full";
  EXPECT_NE(Get("/").body.find("id=\"read-only\""), std::string::npos);
  r = Get("/metrics");
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.content_type, "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_NE(r.body.find("xv_read_only_mode 1\n"), std::string::npos);
  EXPECT_NE(r.body.find("xv_experiments{state=\"failed\"} 1\n"), std::string::npos);
  EXPECT_NE(r.body.find("xv_http_requests_total{code=\"405\"} 2\n"), std::string::npos) << r.body;
  EXPECT_NE(r.body.find("xv_http_requests_total{code=\"404\"} 2\n"), std::string::npos);
  EXPECT_NE(r.body.find("xv_http_requests_total{code=\"403\"} 1\n"), std::string::npos);
  EXPECT_EQ(router_->RequestCounts()[200], 3);
}

// A real loopback connection to DashboardServer: GET, HEAD (headers only, same length), POST (405),
// keep-alive across requests on one connection.
TEST_F(RouterOverDatabase, ServerAnswersOverLoopbackTcp) {
  namespace http = boost::beast::http;
  std::unique_ptr<DashboardServer> server;
  Status s = DashboardServer::Start("127.0.0.1", 0, 2, router_.get(), &server);
  ASSERT_TRUE(s.ok()) << s.ToString();
  ASSERT_GT(server->port(), 0);

  boost::asio::io_context ioc;
  boost::beast::tcp_stream stream(ioc);
  stream.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                                static_cast<unsigned short>(server->port())));
  boost::beast::flat_buffer buffer;
  auto request = [&](http::verb verb, const std::string& target) {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, "127.0.0.1:" + std::to_string(server->port()));
    req.keep_alive(true);
    req.prepare_payload();
    http::write(stream, req);
    http::response_parser<http::string_body> parser;
    parser.skip(verb == http::verb::head);
    http::read(stream, buffer, parser);
    return parser.release();
  };
  auto get = request(http::verb::get, "/metrics");
  EXPECT_EQ(get.result_int(), 200);
  EXPECT_NE(get.body().find("xv_queue_depth 0\n"), std::string::npos);
  auto head = request(http::verb::head, "/");
  EXPECT_EQ(head.result_int(), 200);
  EXPECT_TRUE(head.body().empty());
  auto page = request(http::verb::get, "/");
  EXPECT_EQ(std::to_string(page.body().size()), std::string(head[http::field::content_length]));
  auto post = request(http::verb::post, "/api/overview");
  EXPECT_EQ(post.result_int(), 405);
  EXPECT_EQ(std::string(post[http::field::allow]), "GET, HEAD");
  boost::beast::error_code ec;
  stream.socket().shutdown(boost::asio::ip::tcp::socket::shutdown_both, ec);
  server->Stop();
  // Stopped: nothing listens on the port any more.
  boost::beast::tcp_stream again(ioc);
  again.connect(boost::asio::ip::tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                                               static_cast<unsigned short>(server->port())),
                ec);
  EXPECT_TRUE(ec) << "still listening after Stop()";
}

}  // namespace
}  // namespace xv::daemon::web
