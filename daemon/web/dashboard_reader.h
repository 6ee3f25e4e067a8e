// DashboardReader: what the dashboard and /metrics show, read from xvd's database through
// read-only connections of its own (Store::OpenReadOnly plus one SqliteConnection for the
// metrics table), so a page never waits on, or holds, the daemon's writer connection. WAL mode
// lets these readers run beside the writer.
//
// Thread-safety: every method may be called from any thread (the store serialises its own
// connection; curve_mu_ guards the curve connection).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "common/mutex.h"
#include "common/status.h"
#include "daemon/store/sqlite_connection.h"
#include "daemon/store/store.h"
#include "xv/v1/experiments.pb.h"

namespace xv::daemon::web {

struct WorkerView {
  xv::v1::WorkerInfo info;
  // Seconds since the stored last heartbeat; nullopt when the worker never sent one or the stamp
  // does not parse.
  std::optional<double> heartbeat_age_s;
};

struct CampaignSummary {
  xv::v1::Campaign campaign;  // without rounds and history
  int rounds = 0;
  int open_rounds = 0;
  std::string head_candidate;          // the candidate the head was kept from; "" for the base
  int64_t head_experiment_id = 0;      // the run the head was kept from; 0 for the base
  std::optional<double> head_val_bpb;  // that run's val_bpb
  std::string head_changed_at;
};

struct OverviewData {
  std::map<std::string, int64_t> experiments_by_state;  // every state, zeros included
  std::vector<WorkerView> workers;
  std::vector<CampaignSummary> campaigns;  // the newest kMaxOverviewCampaigns, oldest first
  int64_t campaigns_omitted = 0;           // older campaigns not shown
  std::vector<xv::v1::Experiment> recent;  // the newest experiments, newest first
};

// Which experiments of a campaign its page shows: the newest `limit` with ids below `before_id`.
struct CampaignPageQuery {
  int64_t before_id = 0;  // 0: from the newest
  int limit = 0;          // 0: DashboardReader::kCampaignPageExperiments
};

struct CampaignPageData {
  // With its newest kCampaignPageRounds rounds and kCampaignPageHeadChanges head changes.
  xv::v1::Campaign campaign;
  int64_t rounds_omitted = 0;  // older rounds left out
  // One page of the campaign's experiments (CampaignPageQuery), by id.
  std::vector<xv::v1::Experiment> experiments;
  // Older experiments than the page's match (or the page stopped at kMaxReplyBytes).
  bool experiments_truncated = false;
  int64_t next_before = 0;        // with experiments_truncated: before_id of the next older page
  int64_t experiments_total = 0;  // the campaign's experiments, every page
  CampaignPageQuery query;        // the page asked for, its limit filled in
};

struct CurvePoint {
  int64_t step = 0;
  std::optional<double> loss;  // NULL (non-finite) losses stay absent
  std::optional<double> tok_per_sec;
};

// The latest step row of the experiment's current attempt (the latest_metrics table).
struct LatestStep {
  int64_t step = 0;
  std::optional<double> loss, tok_per_sec, mfu_percent, progress;
};

struct ExperimentPageData {
  xv::v1::Experiment experiment;
  std::vector<CurvePoint> loss_curve;  // the current attempt's step metrics, by step
  int64_t metric_rows = 0;             // rows stored for that attempt (the curve may thin them)
  std::optional<LatestStep> latest;    // none before the attempt's first step row
};

// The database's size on disk: the main file and its -wal file.
struct DatabaseFiles {
  int64_t db_bytes = 0;
  int64_t wal_bytes = 0;
};

class DashboardReader {
 public:
  static constexpr int kRecentExperiments = 20;
  static constexpr int kCampaignPageExperiments = 100;  // a campaign page's default
  static constexpr int kMaxCampaignExperiments = 1000;  // the most one page may ask for
  static constexpr int kCampaignPageRounds = 50;        // the newest rounds on a campaign page
  static constexpr int kCampaignPageHeadChanges = 100;  // the newest head changes on it
  static constexpr int kMaxCurvePoints = 2000;
  static constexpr int kMaxOverviewCampaigns = 100;
  // A page's rows stop before this many bytes of their protobuf form (about as much JSON).
  static constexpr size_t kMaxReplyBytes = 4 * 1024 * 1024;

  // Opens `db_path` (which xvd has created and migrated) read-only twice: the store and the
  // connection for the metrics table. FailedPrecondition when it is not an xv database.
  static Status Open(const std::string& db_path, std::unique_ptr<DashboardReader>* out);

  Status ReadOverview(OverviewData* out);
  // NotFound ("campaign 7: not found") for an unknown id; InvalidArgument naming `before` or
  // `limit` for a page out of range.
  Status ReadCampaign(int64_t campaign_id, const CampaignPageQuery& query, CampaignPageData* out);
  // NotFound ("experiment 7: not found") for an unknown id.
  Status ReadExperiment(int64_t experiment_id, ExperimentPageData* out);
  DatabaseFiles ReadDatabaseFiles() const;

 private:
  DashboardReader() = default;
  Status ReadCurve(int64_t experiment_id, int attempt, ExperimentPageData* out);

  std::string db_path_;
  std::unique_ptr<store::Store> store_;  // read-only; thread-safe
  Mutex curve_mu_;
  // Read-only; set once by Open, used only with curve_mu_ held.
  std::unique_ptr<store::SqliteConnection> curve_conn_ PT_GUARDED_BY(curve_mu_);
};

// Seconds between a stored UTC stamp ("2026-11-30T12:00:00.123Z", SQLite's strftime) and now;
// nullopt when it does not parse.
std::optional<double> SecondsSinceUtcStamp(const std::string& utc_stamp);

}  // namespace xv::daemon::web
