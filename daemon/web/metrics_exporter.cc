#include "daemon/web/metrics_exporter.h"

#include "daemon/web/prometheus_text.h"

namespace xv::daemon::web {

std::string RenderMetrics(const OverviewData& data, const DatabaseFiles& files,
                          const std::string& write_fault,
                          const std::map<int, int64_t>& requests_by_code) {
  PrometheusText p;
  p.Family("xv_experiments", "Experiments per state.", "gauge");
  for (const auto& [state, n] : data.experiments_by_state) {
    p.Sample("xv_experiments", {{"state", state}}, static_cast<double>(n));
  }
  p.Family("xv_queue_depth", "Experiments queued, waiting for a worker.", "gauge");
  auto queued = data.experiments_by_state.find("queued");
  p.Sample("xv_queue_depth", {},
           queued == data.experiments_by_state.end() ? 0.0 : static_cast<double>(queued->second));

  std::map<std::string, int64_t> workers = {
      {"idle", 0}, {"busy", 0}, {"draining", 0}, {"drained", 0}, {"offline", 0}};
  for (const WorkerView& w : data.workers) ++workers[w.info.state()];
  p.Family("xv_workers", "Registered workers per state.", "gauge");
  for (const auto& [state, n] : workers) {
    p.Sample("xv_workers", {{"state", state}}, static_cast<double>(n));
  }
  p.Family("xv_worker_heartbeat_age_seconds",
           "Seconds since the worker's last heartbeat stored by the daemon.", "gauge");
  for (const WorkerView& w : data.workers) {
    if (!w.heartbeat_age_s) continue;
    p.Sample("xv_worker_heartbeat_age_seconds", {{"worker", w.info.name()}}, *w.heartbeat_age_s);
  }

  std::map<std::string, int64_t> campaigns = {{"active", 0}, {"paused", 0}, {"done", 0}};
  for (const CampaignSummary& c : data.campaigns) ++campaigns[c.campaign.state()];
  p.Family("xv_campaigns", "Campaigns per state.", "gauge");
  for (const auto& [state, n] : campaigns) {
    p.Sample("xv_campaigns", {{"state", state}}, static_cast<double>(n));
  }

  p.Family("xv_database_bytes", "Size of the SQLite database file and of its write-ahead log.",
           "gauge");
  p.Sample("xv_database_bytes", {{"file", "db"}}, static_cast<double>(files.db_bytes));
  p.Sample("xv_database_bytes", {{"file", "wal"}}, static_cast<double>(files.wal_bytes));
  p.Family("xv_read_only_mode",
           "1 while the database refuses writes (disk full, read-only file, I/O error).", "gauge");
  p.Sample("xv_read_only_mode", {}, write_fault.empty() ? 0.0 : 1.0);

  p.Family("xv_http_requests_total", "Dashboard HTTP requests answered, per status code.",
           "counter");
  for (const auto& [code, n] : requests_by_code) {
    p.Sample("xv_http_requests_total", {{"code", std::to_string(code)}}, static_cast<double>(n));
  }
  return p.text();
}

}  // namespace xv::daemon::web
