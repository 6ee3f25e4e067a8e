// The /metrics page: xvd's state in the Prometheus text format. Families (all gauges unless said):
//   xv_experiments{state}                  experiments per state (every state, zeros included)
//   xv_queue_depth                          queued experiments
//   xv_workers{state}                       registered workers per state
//   xv_worker_heartbeat_age_seconds{worker} seconds since each worker's last stored heartbeat
//   xv_campaigns{state}                     campaigns per state
//   xv_database_bytes{file}                 xv.db ("db") and its write-ahead log ("wal") on disk
//   xv_read_only_mode                       1 while the database refuses writes (disk full, ...)
//   xv_http_requests_total{code}            counter: dashboard requests answered, per status code
// Thread-safety: pure function.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "daemon/web/dashboard_reader.h"

namespace xv::daemon::web {

std::string RenderMetrics(const OverviewData& data, const DatabaseFiles& files,
                          const std::string& write_fault,
                          const std::map<int, int64_t>& requests_by_code);

}  // namespace xv::daemon::web
