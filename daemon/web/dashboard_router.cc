#include "daemon/web/dashboard_router.h"

#include <algorithm>
#include <cctype>
#include <random>

#include "daemon/web/dashboard_html.h"
#include "daemon/web/dashboard_json.h"
#include "daemon/web/health_check.h"
#include "daemon/web/metrics_exporter.h"

namespace xv::daemon::web {
namespace {

const char kHtml[] = "text/html; charset=utf-8";
const char kJson[] = "application/json";
// Database strings may hold invalid UTF-8 (a trainer's stderr); JSON shows U+FFFD instead.
constexpr auto kReplaceInvalidUtf8 = nlohmann::json::error_handler_t::replace;

std::string NewNonce() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  for (int i = 0; i < 2; ++i) {
    uint64_t v = rng();
    for (int j = 0; j < 16; ++j, v >>= 4) out += kHex[v & 15];
  }
  return out;
}

void AddCommonHeaders(HttpReply* r, const std::string& nonce) {
  // Inline styles only; inline scripts only with this response's nonce; fetches only to us.
  std::string csp =
      "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; "
      "connect-src 'self'; base-uri 'none'; form-action 'none'; "
      "frame-ancestors 'none'";
  if (!nonce.empty()) csp += "; script-src 'nonce-" + nonce + "'";
  r->headers.push_back({"Content-Security-Policy", csp});
  r->headers.push_back({"X-Content-Type-Options", "nosniff"});
  r->headers.push_back({"Referrer-Policy", "no-referrer"});
  r->headers.push_back({"Cache-Control", "no-store"});
}

HttpReply ErrorReply(int status, const std::string& message, bool json) {
  HttpReply r;
  r.status = status;
  if (json) {
    r.content_type = kJson;
    r.body = nlohmann::json({{"error", message}, {"status", status}})
                 .dump(-1, ' ', false, kReplaceInvalidUtf8) +
             "\n";
  } else {
    r.content_type = kHtml;
    r.body = RenderErrorPage(status, HttpReasonPhrase(status), message);
  }
  return r;
}

HttpReply FromStatus(const Status& s, bool json) {
  switch (s.code()) {
    case Status::Code::kNotFound:
      return ErrorReply(404, s.message(), json);
    case Status::Code::kInvalidArgument:
      return ErrorReply(400, s.message(), json);
    default:
      return ErrorReply(503, "reading the database: " + s.message(), json);
  }
}

// "/campaigns/12" with prefix "/campaigns/" -> 12. InvalidArgument naming `what` otherwise.
Status ParseId(const std::string& text, const std::string& what, int64_t* id) {
  if (text.empty() || text.size() > 18) {
    return Status::InvalidArgument(what + " '" + text + "': expected a positive integer");
  }
  for (char c : text) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return Status::InvalidArgument(what + " '" + text + "': expected a positive integer");
    }
  }
  *id = std::stoll(text);
  return Status::Ok();
}

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

// The campaign page's paging parameters from the target's query ("?before=120&limit=50"); other
// parameters are ignored. InvalidArgument naming the parameter when its value is no number.
Status ParseCampaignPageQuery(const std::string& target, CampaignPageQuery* q) {
  *q = CampaignPageQuery();
  const size_t mark = target.find('?');
  if (mark == std::string::npos) return Status::Ok();
  const std::string query = target.substr(mark + 1);
  size_t pos = 0;
  while (pos <= query.size()) {
    const size_t amp = std::min(query.find('&', pos), query.size());
    const std::string part = query.substr(pos, amp - pos);
    pos = amp + 1;
    const size_t eq = part.find('=');
    const std::string key = part.substr(0, eq);
    if (key != "before" && key != "limit") continue;
    int64_t v = 0;
    XV_RETURN_IF_ERROR(ParseId(eq == std::string::npos ? "" : part.substr(eq + 1), key, &v));
    if (key == "before") q->before_id = v;
    if (key == "limit") q->limit = v > 1000000 ? 1000000 : static_cast<int>(v);
  }
  return Status::Ok();
}

}  // namespace

const char* HttpReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 503:
      return "Service Unavailable";
    default:
      return "Error";
  }
}

bool IsLoopbackHost(const std::string& host) {
  std::string name = host;
  if (StartsWith(name, "[")) {
    const size_t close = name.find(']');
    if (close == std::string::npos) return false;
    const std::string rest = name.substr(close + 1);
    name = name.substr(0, close + 1);
    if (!rest.empty() && rest[0] != ':') return false;
  } else {
    const size_t colon = name.find(':');
    if (colon != std::string::npos) name = name.substr(0, colon);
  }
  for (char& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return name == "127.0.0.1" || name == "localhost" || name == "[::1]";
}

DashboardRouter::DashboardRouter(DashboardReader* reader, std::function<std::string()> write_fault)
    : reader_(reader), write_fault_(std::move(write_fault)) {}

std::map<int, int64_t> DashboardRouter::RequestCounts() {
  MutexLock lock(&counts_mu_);
  return counts_;
}

HttpReply DashboardRouter::Handle(const HttpRequestHead& request) {
  HttpReply r =
      health_ != nullptr && health_->Serves(request) ? health_->Handle(request) : Route(request);
  {
    MutexLock lock(&counts_mu_);
    ++counts_[r.status];
  }
  return r;
}

HttpReply DashboardRouter::Route(const HttpRequestHead& request) {
  std::string path = request.target.substr(0, request.target.find('?'));
  const bool api = StartsWith(path, "/api/");
  HttpReply r;
  if (request.method != "GET" && request.method != "HEAD") {
    r = ErrorReply(405, "method " + request.method + ": the dashboard is read-only (GET, HEAD)",
                   api);
    r.headers.push_back({"Allow", "GET, HEAD"});
    AddCommonHeaders(&r, "");
    return r;
  }
  if (!request.host.empty() && !IsLoopbackHost(request.host)) {
    r = ErrorReply(403,
                   "Host '" + request.host +
                       "': the dashboard answers only to loopback names (127.0.0.1, localhost, "
                       "[::1])",
                   api);
    AddCommonHeaders(&r, "");
    return r;
  }
  std::string nonce;
  Status s;
  int64_t id = 0;
  if (path == "/" || path == "/api/overview" || path == "/metrics") {
    OverviewData data;
    s = reader_->ReadOverview(&data);
    if (!s.ok()) {
      r = FromStatus(s, api);
    } else if (path == "/metrics") {
      r.content_type = "text/plain; version=0.0.4; charset=utf-8";
      r.body = RenderMetrics(data, reader_->ReadDatabaseFiles(), write_fault_(), RequestCounts());
    } else if (api) {
      r.content_type = kJson;
      r.body = OverviewJson(data, write_fault_()).dump(-1, ' ', false, kReplaceInvalidUtf8) + "\n";
    } else {
      nonce = NewNonce();
      r.content_type = kHtml;
      r.body = RenderOverviewPage(data, write_fault_(), nonce);
    }
  } else if (StartsWith(path, "/campaigns/") || StartsWith(path, "/api/campaigns/")) {
    s = ParseId(path.substr((api ? 4 : 0) + std::string("/campaigns/").size()), "campaign id", &id);
    CampaignPageData data;
    CampaignPageQuery page;
    if (s.ok()) s = ParseCampaignPageQuery(request.target, &page);
    if (s.ok()) s = reader_->ReadCampaign(id, page, &data);
    if (!s.ok()) {
      r = FromStatus(s, api);
    } else {
      r.content_type = api ? kJson : kHtml;
      r.body = api ? CampaignJson(data).dump(-1, ' ', false, kReplaceInvalidUtf8) + "\n"
                   : RenderCampaignPage(data);
    }
  } else if (StartsWith(path, "/experiments/") || StartsWith(path, "/api/experiments/")) {
    s = ParseId(path.substr((api ? 4 : 0) + std::string("/experiments/").size()), "experiment id",
                &id);
    ExperimentPageData data;
    if (s.ok()) s = reader_->ReadExperiment(id, &data);
    if (!s.ok()) {
      r = FromStatus(s, api);
    } else {
      r.content_type = api ? kJson : kHtml;
      r.body = api ? ExperimentJson(data).dump(-1, ' ', false, kReplaceInvalidUtf8) + "\n"
                   : RenderExperimentPage(data);
    }
  } else {
    r = ErrorReply(404, "no page at " + path, api);
  }
  AddCommonHeaders(&r, nonce);
  return r;
}

}  // namespace xv::daemon::web
