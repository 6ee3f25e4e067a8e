#include "daemon/web/dashboard_html.h"

#include "common/run_states.h"

#include <cmath>
#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "common/html_escape.h"
#include "common/untrusted_text.h"
#include "daemon/web/dashboard_json.h"

namespace xv::daemon::web {
namespace {

using nlohmann::json;

const char kStyle[] =
    "body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222;background:#fafafa}"
    "header{background:#263238;color:#fff;padding:8px 16px}header a{color:#fff;"
    "text-decoration:none;font-weight:600;margin-right:16px}"
    "main{padding:8px 16px}h1{font-size:20px}h2{font-size:16px;margin-top:24px}"
    "table{border-collapse:collapse;margin:4px 0 12px;background:#fff}"
    "th,td{border:1px solid #ddd;padding:3px 8px;text-align:left;vertical-align:top}"
    "th{background:#eceff1}td.num{text-align:right;font-variant-numeric:tabular-nums}"
    "pre{background:#fff;border:1px solid #ddd;padding:6px;white-space:pre-wrap;"
    "max-height:360px;overflow:auto}"
    ".banner{background:#ffcdd2;border:1px solid #c62828;padding:8px;margin:8px 0}"
    ".keep{color:#2e7d32;font-weight:600}.muted{color:#777}"
    ".plot{background:#fff;border:1px solid #ddd}.plot text{font-size:11px;fill:#333}"
    ".plot .plot-title{font-weight:600}dl{display:grid;grid-template-columns:max-content auto;"
    "gap:2px 12px}dt{color:#555}dd{margin:0;overflow-wrap:anywhere}footer{padding:8px "
    "16px;color:#777}";

std::string E(const std::string& s) { return HtmlEscape(s); }

std::string Fixed(double v, int digits) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string Fixed(const std::optional<double>& v, int digits) {
  return v ? Fixed(*v, digits) : "-";
}

std::string JsonNumber(const json& j, const char* key, int digits) {
  if (!j.is_object() || !j.contains(key) || !j[key].is_number()) return "-";
  return Fixed(j[key].get<double>(), digits);
}

std::string Thousands(double v) {
  if (!std::isfinite(v)) return "-";
  std::string digits = std::to_string(static_cast<long long>(std::llround(std::fabs(v))));
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string Short(const std::string& hash) { return hash.substr(0, 12); }

std::string ExperimentLink(int64_t id) {
  return "<a href=\"/experiments/" + std::to_string(id) + "\">#" + std::to_string(id) + "</a>";
}

std::string CampaignLink(int64_t id, const std::string& name) {
  return "<a href=\"/campaigns/" + std::to_string(id) + "\">" + E(name) + "</a>";
}

std::string Page(const std::string& title, const std::string& body, const std::string& api_path) {
  std::string out =
      "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\">"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
      "<meta name=\"referrer\" content=\"no-referrer\"><title>" +
      E(title) + " - xv</title><style>" + kStyle +
      "</style></head><body><header><a href=\"/\">xv dashboard</a><span class=\"muted\">"
      "read-only</span></header><main>" +
      body + "</main><footer>";
  if (!api_path.empty()) {
    out += "JSON: <a href=\"" + api_path + "\">" + api_path + "</a> &middot; ";
  }
  out += "<a href=\"/metrics\">/metrics</a></footer></body></html>\n";
  return out;
}

std::string StateCell(const xv::v1::Experiment& e) {
  std::string s = e.state();
  if (!e.failure_kind().empty() && e.state() != ToString(ExperimentState::kSucceeded) &&
      e.failure_kind() != e.state()) {
    s += "/" + e.failure_kind();
  }
  return E(s);
}

std::string MfuText(const xv::v1::Result& r) {
  if (r.mfu_percent() < 0 || !std::isfinite(r.mfu_percent())) {
    return "unknown (no peak FLOPS for this device; source: " +
           E(r.peak_flops_source().empty() ? "unknown" : r.peak_flops_source()) + ")";
  }
  return Fixed(r.mfu_percent(), 2) + "% of " + Fixed(r.peak_flops() / 1e12, 1) + " TFLOP/s (" +
         E(r.peak_flops_source()) + ")";
}

std::string ExperimentRows(const std::vector<xv::v1::Experiment>& experiments) {
  std::string t =
      "<table><tr><th>id</th><th>name</th><th>role</th><th>state</th><th>val_bpb</th>"
      "<th>tok/s</th><th>MFU</th><th>device</th><th>decision</th><th>reason</th></tr>";
  for (const auto& e : experiments) {
    std::string val = "-", tok = "-", mfu = "-";
    if (e.has_result()) {
      val = Fixed(e.result().val_bpb(), 6);
      tok = Thousands(e.result().tok_per_sec());
      mfu = e.result().mfu_percent() < 0 ? "?" : Fixed(e.result().mfu_percent(), 2) + "%";
    } else if (e.state() == "running") {
      val = "(" + Fixed(100 * e.progress(), 0) + "%)";
    }
    std::string reason = !e.decision_reason().empty() ? e.decision_reason() : e.failure_detail();
    t += "<tr><td>" + ExperimentLink(e.id()) + "</td><td>" + E(e.name()) + "</td><td>" +
         E(e.role()) + "</td><td>" + StateCell(e) + "</td><td class=\"num\">" + val +
         "</td><td class=\"num\">" + tok + "</td><td class=\"num\">" + mfu + "</td><td>" +
         E(e.device_name()) + "</td><td" + (e.decision() == "keep" ? " class=\"keep\"" : "") + ">" +
         E(e.decision()) + "</td><td>" + E(std::string(Utf8Prefix(reason, 200))) + "</td></tr>";
  }
  return t + "</table>";
}

const char kOverviewScript[] =
    // Refreshes the counts, worker states and heartbeat ages every 5 s from /api/overview.
    // Text only (textContent), never markup.
    "(function(){function set(id,v){var e=document.getElementById(id);if(e)e.textContent=v;}"
    "function tick(){fetch('/api/overview',{cache:'no-store'}).then(function(r){return r.json();})"
    ".then(function(d){var s=d.experiments_by_state;for(var k in s){set('count-'+k,s[k]);}"
    "set('queue-depth',d.queue_depth);(d.workers||[]).forEach(function(w){"
    "set('worker-state-'+w.id,w.state);set('worker-age-'+w.id,w.heartbeat_age_s==null?'-':"
    "w.heartbeat_age_s.toFixed(1)+' s');});set('refreshed','refreshed '+new Date()"
    ".toLocaleTimeString());}).catch(function(){set('refreshed','refresh failed');});}"
    "setInterval(tick,5000);})();";

}  // namespace

std::string RenderErrorPage(int status, const std::string& reason, const std::string& message) {
  return Page(std::to_string(status) + " " + reason,
              "<h1>" + std::to_string(status) + " " + E(reason) + "</h1><p id=\"error\">" +
                  E(message) + "</p><p><a href=\"/\">overview</a></p>",
              "");
}

std::string RenderOverviewPage(const OverviewData& data, const std::string& write_fault,
                               const std::string& script_nonce) {
  std::string b = "<h1>Overview</h1>";
  if (!write_fault.empty()) {
    b += "<p class=\"banner\" id=\"read-only\">Read-only mode: the database cannot take writes (" +
         E(write_fault) + "); new work is refused until a retried write commits.</p>";
  }
  auto queued = data.experiments_by_state.find("queued");
  b += "<h2>Queue</h2><p>Queue depth: <b id=\"queue-depth\">" +
       std::to_string(queued == data.experiments_by_state.end() ? 0 : queued->second) +
       "</b> <span class=\"muted\" id=\"refreshed\"></span></p><table><tr>";
  for (const auto& [state, n] : data.experiments_by_state) b += "<th>" + E(state) + "</th>";
  b += "</tr><tr>";
  for (const auto& [state, n] : data.experiments_by_state) {
    b += "<td class=\"num\" id=\"count-" + E(state) + "\">" + std::to_string(n) + "</td>";
  }
  b += "</tr></table>";

  b += "<h2>Workers</h2>";
  if (data.workers.empty())
    b += "<p class=\"muted\">No worker has registered yet.</p>";
  else {
    b += "<table id=\"workers\"><tr><th>name</th><th>state</th><th>device</th><th>backend</th>"
         "<th>probe matmul</th><th>probe bandwidth</th><th>last heartbeat</th>"
         "<th>running</th></tr>";
    for (const WorkerView& w : data.workers) {
      const auto& i = w.info;
      const std::string id = std::to_string(i.id());
      b += "<tr><td>" + E(i.name()) + "</td><td id=\"worker-state-" + id + "\">" + E(i.state()) +
           "</td><td>" + E(i.device().name()) + "</td><td>" + E(i.device().vendor()) + "/" +
           E(i.device().backend()) + "</td><td class=\"num\">" +
           (i.probe_matmul_tflops() > 0 ? Fixed(i.probe_matmul_tflops(), 2) + " TFLOP/s" : "-") +
           "</td><td class=\"num\">" +
           (i.probe_bandwidth_gbs() > 0 ? Fixed(i.probe_bandwidth_gbs(), 1) + " GB/s" : "-") +
           "</td><td class=\"num\" id=\"worker-age-" + id + "\">" +
           (w.heartbeat_age_s ? Fixed(*w.heartbeat_age_s, 1) + " s" : "-") + "</td><td>" +
           (i.current_experiment_id() ? ExperimentLink(i.current_experiment_id()) : "-") +
           "</td></tr>";
    }
    b += "</table>";
  }

  b += "<h2>Campaigns</h2>";
  if (data.campaigns.empty())
    b += "<p class=\"muted\">No campaign yet.</p>";
  else {
    b += "<table id=\"campaigns\"><tr><th>campaign</th><th>state</th><th>rounds</th>"
         "<th>open</th><th>head</th><th>kept from</th><th>head val_bpb</th><th>since</th></tr>";
    for (const CampaignSummary& c : data.campaigns) {
      b += "<tr><td>" + CampaignLink(c.campaign.id(), c.campaign.name()) + "</td><td>" +
           E(c.campaign.state()) + "</td><td class=\"num\">" + std::to_string(c.rounds) +
           "</td><td class=\"num\">" + std::to_string(c.open_rounds) + "</td><td><code>" +
           E(Short(c.campaign.head_recipe_hash())) + "</code></td><td>" +
           (c.head_experiment_id ? E(c.head_candidate) + " " + ExperimentLink(c.head_experiment_id)
                                 : std::string("base")) +
           "</td><td class=\"num\">" + Fixed(c.head_val_bpb, 6) + "</td><td>" +
           E(c.head_changed_at) + "</td></tr>";
    }
    b += "</table>";
  }
  b += "<h2>Recent experiments</h2>" + ExperimentRows(data.recent);
  b += "<noscript><p class=\"muted\">Reload the page for fresh figures.</p></noscript>";
  b += "<script nonce=\"" + E(script_nonce) + "\">" + kOverviewScript + "</script>";
  return Page("overview", b, "/api/overview");
}

ProgressPlot CampaignProgressPlot(const CampaignPageData& data) {
  std::vector<ProgressRun> runs;
  runs.reserve(data.experiments.size());
  for (const auto& e : data.experiments) {
    ProgressRun r;
    r.id = e.id();
    r.round_id = e.round_id();
    r.name = e.name();
    r.state = e.state();
    r.decision = e.decision();
    r.role = e.role();
    r.has_val_bpb = e.has_result();
    r.val_bpb = e.has_result() ? e.result().val_bpb() : 0;
    r.reused_from_id = e.reused_from_id();
    runs.push_back(std::move(r));
  }
  return BuildProgressPlot(data.campaign.name(), runs);
}

SvgPlot ValBpbOverRoundsPlot(const CampaignPageData& data) {
  SvgPlot plot;
  plot.title = "val_bpb over rounds";
  plot.x_label = "round";
  plot.y_label = "val_bpb";
  plot.integer_x = true;
  PlotSeries discarded{"candidate", "#90a4ae", false, {}};
  PlotSeries kept{"kept", "#2e7d32", false, {}};
  PlotSeries controls{"head control", "#1565c0", false, {}};
  PlotSeries head{"head", "#ef6c00", true, {}};
  std::map<int64_t, int> ordinal;
  for (int i = 0; i < data.campaign.rounds_size(); ++i)
    ordinal[data.campaign.rounds(i).id()] = i + 1;
  std::map<int64_t, std::vector<const xv::v1::Experiment*>> by_round;
  for (const auto& e : data.experiments) by_round[e.round_id()].push_back(&e);

  std::optional<double> head_value;
  for (const auto& r : data.campaign.rounds()) {
    const double x = ordinal[r.id()];
    double kept_sum = 0, control_sum = 0;
    int kept_n = 0, control_n = 0;
    for (const xv::v1::Experiment* e : by_round[r.id()]) {
      if (!e->has_result() || !std::isfinite(e->result().val_bpb()) ||
          e->state() != ToString(ExperimentState::kSucceeded)) {
        continue;
      }
      const double y = e->result().val_bpb();
      PlotPoint p{x, y, "#" + std::to_string(e->id()) + " " + e->name() + ": " + Fixed(y, 6)};
      if (e->role() == "control") {
        controls.points.push_back(p);
        control_sum += y;
        ++control_n;
      } else if (!r.kept_candidate().empty() && e->name() == r.kept_candidate()) {
        kept.points.push_back(p);
        kept_sum += y;
        ++kept_n;
      } else {
        discarded.points.push_back(p);
      }
    }
    if (kept_n > 0) {
      head_value = kept_sum / kept_n;
    } else if (!head_value && control_n > 0) {
      head_value = control_sum / control_n;
    }
    if (head_value) head.points.push_back({x, *head_value, ""});
  }
  plot.series = {discarded, controls, kept, head};
  return plot;
}

namespace {

// One <dt>/<dd> pair of a definition list.
void AddRow(std::string* b, const std::string& k, const std::string& v_html) {
  *b += "<dt>" + k + "</dt><dd>" + v_html + "</dd>";
}

std::string CampaignFacts(const xv::v1::Campaign& c) {
  std::string b = "<h1>Campaign <span id=\"campaign-name\">" + E(c.name()) + "</span></h1><dl>";
  AddRow(&b, "state", E(c.state()));
  AddRow(&b, "objective", E(c.objective()));
  AddRow(&b, "trainer", E(c.trainer()));
  AddRow(&b, "device filter", c.device_filter().empty() ? "any" : E(c.device_filter()));
  AddRow(&b, "policy", "<code>" + E(c.policy_json()) + "</code>");
  AddRow(&b, "budget", "<code>" + E(c.budget_json()) + "</code>");
  AddRow(&b, "max attempts", std::to_string(c.max_attempts()));
  AddRow(&b, "created", E(c.created_at()));
  return b + "</dl>";
}

// The head: the recipe the next round is built from, and where it came from.
std::string CampaignHead(const CampaignPageData& data) {
  const xv::v1::Campaign& c = data.campaign;
  std::string b = "<h2>Head</h2><dl id=\"campaign-head\">";
  AddRow(&b, "recipe hash", "<code id=\"head-hash\">" + E(c.head_recipe_hash()) + "</code>");
  if (c.head_history_size() > 0) {
    const auto& last = c.head_history(c.head_history_size() - 1);
    AddRow(&b, "kept from",
           last.experiment_id() ? "<span id=\"head-candidate\">" + E(last.candidate()) +
                                      "</span> " + ExperimentLink(last.experiment_id())
                                : std::string("the base recipe"));
    AddRow(&b, "reason", E(last.reason()));
    for (const auto& e : data.experiments) {
      if (e.id() == last.experiment_id() && e.has_result()) {
        AddRow(&b, "val_bpb",
               "<span id=\"head-val-bpb\">" + Fixed(e.result().val_bpb(), 6) + "</span>");
      }
    }
  }
  return b + "</dl>";
}

std::string RoundsTable(const xv::v1::Campaign& c) {
  std::string b =
      "<h2>Rounds</h2><table id=\"rounds\"><tr><th>#</th><th>round</th><th>kind</th>"
      "<th>state</th><th>runs</th><th>unfinished</th><th>kept</th><th>decision</th>"
      "<th>created</th><th>decided</th></tr>";
  int ordinal = 0;
  for (const auto& r : c.rounds()) {
    b += "<tr><td class=\"num\">" + std::to_string(++ordinal) + "</td><td class=\"num\">" +
         std::to_string(r.id()) + "</td><td>" + E(r.kind()) + "</td><td>" + E(r.state()) +
         "</td><td class=\"num\">" + std::to_string(r.experiments()) + "</td><td class=\"num\">" +
         std::to_string(r.unfinished()) + "</td><td class=\"keep\">" + E(r.kept_candidate()) +
         "</td><td>" + E(r.decision_summary()) + "</td><td>" + E(r.created_at()) + "</td><td>" +
         E(r.decided_at()) + "</td></tr>";
  }
  return b + "</table>";
}

// A round's drift figures (issue 14; sched/round_drift.h): a row per arm, then the controls'
// trend and corr(val_bpb, tok/s). "" when the decision has none.
std::string DriftTable(const json& drift) {
  if (!drift.is_object() || !drift.contains("arms") || !drift["arms"].is_array()) return "";
  std::string b =
      "<table class=\"drift\"><tr><th>arm</th><th>tok/s mean</th><th>tok/s sd</th>"
      "<th>steps mean</th><th>steps sd</th><th>vs controls</th></tr>";
  for (const json& a : drift["arms"]) {
    if (!a.is_object()) continue;
    b += "<tr><td>" + E(a.value("arm", std::string())) +
         (a.value("step_work_by_design", false) ? " (changes step work)" : "") +
         "</td><td class=\"num\">" + JsonNumber(a, "tok_per_sec_mean", 0) +
         "</td><td class=\"num\">" + JsonNumber(a, "tok_per_sec_sd", 0) +
         "</td><td class=\"num\">" + JsonNumber(a, "steps_mean", 1) + "</td><td class=\"num\">" +
         JsonNumber(a, "steps_sd", 1) + "</td><td class=\"num\">" +
         JsonNumber(a, "vs_controls", 3) + "</td></tr>";
  }
  return b + "</table><p>controls' tok/s trend within the round " +
         JsonNumber(drift, "controls_trend", 3) + " over " + JsonNumber(drift, "span_s", 1) +
         " s, spread (sd / mean) " + JsonNumber(drift, "controls_spread", 3) +
         "; corr(val_bpb, tok/s) within the controls " +
         JsonNumber(drift, "corr_val_bpb_tok_per_sec", 2) + "</p>";
}

// One round's decision: its mode and head, then a row per candidate with its statistics.
std::string DecisionTable(const xv::v1::RoundInfo& r) {
  const json d = json::parse(r.decision_json(), nullptr, false);
  std::string b =
      "<h3>Round " + std::to_string(r.id()) + "</h3><p>" + E(r.decision_summary()) + "</p>";
  if (d.is_discarded() || !d.is_object()) return b + "<pre>" + E(r.decision_json()) + "</pre>";
  const json head = d.value("head", json::object());
  b += "<p>mode <b>" + E(d.value("mode", std::string())) + "</b>; head: n " +
       JsonNumber(head, "n", 0) + ", mean " + JsonNumber(head, "mean", 6) + ", sd " +
       JsonNumber(head, "sd", 6) + "</p>";
  b += "<table class=\"decision\"><tr><th>candidate</th><th>decision</th><th>n</th>"
       "<th>mean</th><th>sd</th><th>NaN rate</th><th>improvement</th><th>t</th><th>df</th>"
       "<th>p</th><th>alpha</th><th>band</th><th>reason</th></tr>";
  for (const json& cd : d.value("candidates", json::array())) {
    if (!cd.is_object()) continue;
    const json stats = cd.value("stats", json::object());
    const std::string decision = cd.value("decision", std::string());
    b += "<tr><td>" + E(cd.value("name", std::string())) + "</td><td" +
         (decision == "keep" ? " class=\"keep\"" : "") + ">" + E(decision) +
         "</td><td class=\"num\">" + JsonNumber(stats, "n", 0) + "</td><td class=\"num\">" +
         JsonNumber(stats, "mean", 6) + "</td><td class=\"num\">" + JsonNumber(stats, "sd", 6) +
         "</td><td class=\"num\">" + JsonNumber(stats, "nan_rate", 2) + "</td><td class=\"num\">" +
         JsonNumber(cd, "improvement", 6) + "</td><td class=\"num\">" + JsonNumber(cd, "t", 3) +
         "</td><td class=\"num\">" + JsonNumber(cd, "df", 1) + "</td><td class=\"num\">" +
         JsonNumber(cd, "p", 4) + "</td><td class=\"num\">" + JsonNumber(cd, "alpha", 3) +
         "</td><td class=\"num\">" + JsonNumber(cd, "band", 6) + "</td><td>" +
         E(cd.value("reason_text", std::string())) + "</td></tr>";
  }
  return b + "</table>" + DriftTable(d.value("drift", json()));
}

std::string DecisionsSection(const xv::v1::Campaign& c) {
  std::string b = "<h2>Decisions</h2>";
  bool any_decision = false;
  for (const auto& r : c.rounds()) {
    if (r.decision_json().empty()) continue;
    any_decision = true;
    b += DecisionTable(r);
  }
  if (!any_decision) b += "<p class=\"muted\">No round decided yet.</p>";
  return b;
}

std::string HeadHistoryTable(const xv::v1::Campaign& c) {
  std::string b =
      "<h2>Head history</h2><table id=\"head-history\"><tr><th>when</th><th>round</th>"
      "<th>candidate</th><th>run</th><th>reason</th><th>recipe hash</th></tr>";
  for (const auto& h : c.head_history()) {
    b += "<tr><td>" + E(h.created_at()) + "</td><td class=\"num\">" +
         (h.round_id() ? std::to_string(h.round_id()) : "-") + "</td><td>" + E(h.candidate()) +
         "</td><td>" + (h.experiment_id() ? ExperimentLink(h.experiment_id()) : "-") + "</td><td>" +
         E(h.reason()) + "</td><td><code>" + E(Short(h.recipe_hash())) + "</code></td></tr>";
  }
  return b + "</table>";
}

// Where the campaign page's experiments stand among all of them, and links to the newest and
// the next older page.
std::string PageNavigation(const CampaignPageData& data) {
  const std::string base = "/campaigns/" + std::to_string(data.campaign.id());
  const std::string limit = data.query.limit == DashboardReader::kCampaignPageExperiments
                                ? ""
                                : "limit=" + std::to_string(data.query.limit);
  std::string b = "<p class=\"pager\">" + std::to_string(data.experiments.size()) + " of " +
                  std::to_string(data.experiments_total) + " experiments are shown";
  if (!data.experiments.empty()) {
    b += " (ids " + std::to_string(data.experiments.front().id()) + " to " +
         std::to_string(data.experiments.back().id()) + "; the plots show these)";
  }
  if (data.query.before_id > 0) {
    b += " &middot; <a class=\"newest\" href=\"" + base + (limit.empty() ? "" : "?" + limit) +
         "\">newest</a>";
  }
  if (data.experiments_truncated) {
    b += " &middot; <a class=\"older\" href=\"" + base +
         "?before=" + std::to_string(data.next_before) + (limit.empty() ? "" : "&amp;" + limit) +
         "\">older &rarr;</a>";
  }
  return b + "</p>";
}

}  // namespace

std::string RenderCampaignPage(const CampaignPageData& data) {
  const xv::v1::Campaign& c = data.campaign;
  std::string b = CampaignFacts(c);
  b += CampaignHead(data);
  b += "<h2>Progress</h2>" + RenderProgressSvg(CampaignProgressPlot(data));
  b += "<h2>val_bpb over rounds</h2>" + RenderSvgPlot(ValBpbOverRoundsPlot(data));
  if (data.rounds_omitted > 0) {
    b += "<p class=\"muted\">The " + std::to_string(data.rounds_omitted) +
         " oldest rounds are not shown.</p>";
  }
  b += RoundsTable(c);
  b += DecisionsSection(c);
  b += HeadHistoryTable(c);
  b += "<h2>Experiments</h2>" + PageNavigation(data) + ExperimentRows(data.experiments) +
       PageNavigation(data);
  return Page("campaign " + c.name(), b, "/api/campaigns/" + std::to_string(c.id()));
}

SvgPlot LossCurvePlot(const ExperimentPageData& data) {
  SvgPlot plot;
  plot.title = "training loss (attempt " + std::to_string(data.experiment.attempt()) + ")";
  plot.x_label = "step";
  plot.y_label = "loss";
  PlotSeries loss{"loss", "#1565c0", true, {}};
  for (const CurvePoint& p : data.loss_curve) {
    if (p.loss) loss.points.push_back({static_cast<double>(p.step), *p.loss, ""});
  }
  plot.series = {loss};
  return plot;
}

namespace {

std::string ExperimentFacts(const xv::v1::Experiment& e) {
  std::string b = "<h1>Experiment #" + std::to_string(e.id()) + " <span id=\"experiment-name\">" +
                  E(e.name()) + "</span></h1><dl>";
  AddRow(&b, "campaign",
         "<a href=\"/campaigns/" + std::to_string(e.campaign_id()) + "\">campaign " +
             std::to_string(e.campaign_id()) + "</a>");
  AddRow(&b, "round", std::to_string(e.round_id()));
  AddRow(&b, "state", "<span id=\"experiment-state\">" + StateCell(e) + "</span>");
  AddRow(&b, "attempt", std::to_string(e.attempt()));
  AddRow(&b, "role", E(e.role()));
  AddRow(&b, "worker", E(e.worker()));
  AddRow(&b, "device", E(e.device_name()));
  AddRow(&b, "trainer", E(e.trainer()));
  AddRow(&b, "seed", std::to_string(e.seed()));
  AddRow(&b, "recipe hash", "<code>" + E(e.recipe_hash()) + "</code>");
  AddRow(&b, "decision",
         E(e.decision()) + (e.decision_reason().empty() ? "" : ": " + E(e.decision_reason())));
  if (!e.round_decision().empty()) AddRow(&b, "round decision", E(e.round_decision()));
  if (e.reused_from_id() != 0) AddRow(&b, "result reused from", ExperimentLink(e.reused_from_id()));
  AddRow(&b, "created", E(e.created_at()));
  AddRow(&b, "finished", E(e.finished_at()));
  return b + "</dl>";
}

std::string KnobsSection(const xv::v1::Experiment& e) {
  std::string b = "<h2>Knobs</h2>";
  const json overrides = json::parse(e.overrides_json(), nullptr, false);
  if (overrides.is_object() && !overrides.empty()) {
    b += "<table id=\"knobs\"><tr><th>knob</th><th>value</th></tr>";
    for (const auto& [k, v] : overrides.items()) {
      b += "<tr><td>" + E(k) + "</td><td><code>" +
           E(v.is_string() ? v.get<std::string>() : v.dump()) + "</code></td></tr>";
    }
    b += "</table>";
  } else if (overrides.is_object()) {
    b += "<p class=\"muted\">The head's recipe, no override.</p>";
  } else {
    b += "<pre>" + E(e.overrides_json()) + "</pre>";
  }
  return b;
}

// One row of the result's figures table.
void AddFigure(std::string* b, const std::string& k, const std::string& id,
               const std::string& v_html) {
  *b += "<tr><th>" + k + "</th><td class=\"num\" id=\"fig-" + id + "\">" + v_html + "</td></tr>";
}

// The device health figures of a result: energy, power, temperature, throttling.
void AddHealthFigures(const xv::v1::Result& r, std::string* b) {
  const xv::v1::DeviceHealth& h = r.health();
  if (h.has_energy_j()) {
    AddFigure(b, "energy", "energy",
              Fixed(h.energy_j(), 1) + " J (" + E(h.energy_method()) + ", " + E(h.source()) + ")");
    if (h.energy_j() > 0 && r.total_tokens() > 0) {
      AddFigure(b, "tokens per joule", "tokens-per-joule",
                Fixed(static_cast<double>(r.total_tokens()) / h.energy_j(), 1));
    }
  } else {
    AddFigure(b, "energy", "energy",
              "- (source: " + E(h.source().empty() ? "none" : h.source()) + ")");
  }
  if (h.has_avg_power_w()) {
    AddFigure(b, "average power", "avg-power", Fixed(h.avg_power_w(), 1) + " W");
  }
  if (h.has_peak_temp_c()) {
    AddFigure(b, "peak temperature", "peak-temp", Fixed(h.peak_temp_c(), 0) + " °C");
  }
  if (h.throttle_known()) {
    AddFigure(b, "throttled", "throttled",
              h.throttled() ? "yes: " + Fixed(h.throttled_seconds(), 1) + " s (" +
                                  E(h.throttle_reasons()) + ")"
                            : std::string("no"));
  }
}

std::string ResultSection(const xv::v1::Experiment& e) {
  std::string b = "<h2>Result</h2>";
  if (!e.has_result()) {
    return b + "<p class=\"muted\">No result" +
           std::string(e.state() == "running" ? " yet (" + Fixed(100 * e.progress(), 0) + "%)"
                                              : "") +
           ".</p>";
  }
  const xv::v1::Result& r = e.result();
  b += "<table id=\"experiment-figures\">";
  AddFigure(&b, "val_bpb", "val-bpb", Fixed(r.val_bpb(), 6));
  AddFigure(&b, "tok/s", "tok-per-sec", Thousands(r.tok_per_sec()));
  AddFigure(&b, "MFU", "mfu", MfuText(r));
  const auto measured = MeasuredMfuPercent(r);
  AddFigure(&b, "MFU (measured ceiling)", "mfu-measured",
            measured ? Fixed(*measured, 2) + "% of " + Fixed(r.measured_peak_flops() / 1e12, 2) +
                           " TFLOP/s (the worker's matmul probe)"
                     : std::string("- (the worker did not probe)"));
  AddFigure(&b, "peak memory allocated", "peak-vram", Fixed(r.peak_vram_mb(), 1) + " MB");
  AddFigure(&b, "peak memory reserved", "peak-reserved", Fixed(r.peak_reserved_mb(), 1) + " MB");
  AddFigure(&b, "training seconds", "training-seconds", Fixed(r.training_seconds(), 1));
  AddFigure(&b, "total seconds", "total-seconds", Fixed(r.total_seconds(), 1));
  AddFigure(&b, "steps", "steps", Thousands(static_cast<double>(r.num_steps())));
  AddFigure(&b, "tokens", "tokens", Thousands(static_cast<double>(r.total_tokens())));
  AddFigure(&b, "parameters", "params", Thousands(static_cast<double>(r.num_params())));
  AddFigure(&b, "FLOPs/token", "flops-per-token",
            Thousands(static_cast<double>(r.flops_per_token())));
  AddFigure(&b, "depth", "depth", std::to_string(r.depth()));
  AddFigure(&b, "attention backend", "attention", E(r.attention_backend()));
  AddFigure(&b, "metric version", "metric-version", E(r.metric_version()));
  AddHealthFigures(r, &b);
  return b + "</table>";
}

std::string FailureSection(const xv::v1::Experiment& e) {
  if (e.failure_kind().empty() && e.failure_detail().empty()) return "";
  std::string b = "<h2>Failure</h2><dl id=\"failure\">";
  AddRow(&b, "kind", "<span id=\"failure-kind\">" + E(e.failure_kind()) + "</span>");
  AddRow(&b, "detail", "<span id=\"failure-detail\">" + E(e.failure_detail()) + "</span>");
  return b + "</dl>";
}

std::string LossCurveSection(const ExperimentPageData& data) {
  return "<h2>Loss curve</h2>" + RenderSvgPlot(LossCurvePlot(data)) + "<p class=\"muted\">" +
         std::to_string(data.metric_rows) + " step rows stored" +
         (static_cast<int64_t>(data.loss_curve.size()) < data.metric_rows
              ? ", " + std::to_string(data.loss_curve.size()) + " drawn"
              : std::string()) +
         ".</p>";
}

}  // namespace

std::string RenderExperimentPage(const ExperimentPageData& data) {
  const xv::v1::Experiment& e = data.experiment;
  std::string b = ExperimentFacts(e);
  b += KnobsSection(e);
  b += ResultSection(e);
  b += FailureSection(e);
  b += LossCurveSection(data);
  if (!e.stderr_tail().empty()) {
    b += "<h2>stderr (tail)</h2><pre id=\"stderr-tail\">" + E(e.stderr_tail()) + "</pre>";
  }
  return Page("experiment " + std::to_string(e.id()), b,
              "/api/experiments/" + std::to_string(e.id()));
}

}  // namespace xv::daemon::web
