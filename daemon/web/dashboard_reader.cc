#include "daemon/web/dashboard_reader.h"

#include "common/run_states.h"

#include <sys/stat.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace xv::daemon::web {
namespace {

int64_t FileBytes(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return 0;
  return static_cast<int64_t>(st.st_size);
}

}  // namespace

std::optional<double> SecondsSinceUtcStamp(const std::string& utc_stamp) {
  int year = 0, month = 0, day = 0, hour = 0, minute = 0;
  double second = 0;
  if (std::sscanf(utc_stamp.c_str(), "%4d-%2d-%2dT%2d:%2d:%lf", &year, &month, &day, &hour, &minute,
                  &second) != 6) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = 0;
  const time_t whole = timegm(&tm);
  if (whole == static_cast<time_t>(-1)) return std::nullopt;
  const double stamp = static_cast<double>(whole) + second;
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  return now - stamp;
}

Status DashboardReader::Open(const std::string& db_path, std::unique_ptr<DashboardReader>* out) {
  std::unique_ptr<DashboardReader> r(new DashboardReader());
  r->db_path_ = db_path;
  XV_RETURN_IF_ERROR(store::Store::OpenReadOnly(db_path, &r->store_));
  XV_RETURN_IF_ERROR(store::SqliteConnection::Open(
      db_path, store::SqliteConnection::Mode::kReadOnly, &r->curve_conn_));
  *out = std::move(r);
  return Status::Ok();
}

Status DashboardReader::ReadOverview(OverviewData* out) {
  *out = OverviewData();
  // Every state shows, with 0 when no experiment is in it (ToString answers "" past the last).
  for (int i = 0; !ToString(static_cast<ExperimentState>(i)).empty(); ++i) {
    out->experiments_by_state[std::string(ToString(static_cast<ExperimentState>(i)))] = 0;
  }
  std::map<std::string, int64_t> counts;
  XV_RETURN_IF_ERROR(store_->experiments().CountByState(&counts));
  for (const auto& [state, n] : counts) out->experiments_by_state[state] = n;

  std::vector<xv::v1::WorkerInfo> workers;
  XV_RETURN_IF_ERROR(store_->workers().ListWorkers(&workers));
  for (auto& w : workers) {
    WorkerView v;
    v.heartbeat_age_s = SecondsSinceUtcStamp(w.last_heartbeat());
    v.info = std::move(w);
    out->workers.push_back(std::move(v));
  }

  std::vector<xv::v1::Campaign> campaigns;
  XV_RETURN_IF_ERROR(store_->campaigns().ListCampaigns(&campaigns));  // oldest first
  if (campaigns.size() > static_cast<size_t>(kMaxOverviewCampaigns)) {
    out->campaigns_omitted = static_cast<int64_t>(campaigns.size()) - kMaxOverviewCampaigns;
    campaigns.erase(campaigns.begin(), campaigns.begin() + out->campaigns_omitted);
  }
  // Round counts in one SQL pass; per campaign only its newest head change (no rounds read).
  std::map<int64_t, store::RoundCounts> round_counts;
  XV_RETURN_IF_ERROR(store_->campaigns().CountRounds(&round_counts));
  store::CampaignDetail last_head;
  last_head.rounds = false;
  last_head.newest_head_changes = 1;
  for (const auto& listed : campaigns) {
    CampaignSummary c;
    Status s = store_->campaigns().GetCampaign(listed.id(), "", last_head, &c.campaign);
    if (s.code() == Status::Code::kNotFound) continue;
    XV_RETURN_IF_ERROR(s);
    const auto counted = round_counts.find(listed.id());
    if (counted != round_counts.end()) {
      c.rounds = static_cast<int>(counted->second.rounds);
      c.open_rounds = static_cast<int>(counted->second.open);
    }
    if (c.campaign.head_history_size() > 0) {
      const auto& last = c.campaign.head_history(c.campaign.head_history_size() - 1);
      c.head_candidate = last.candidate();
      c.head_experiment_id = last.experiment_id();
      c.head_changed_at = last.created_at();
      if (last.experiment_id() != 0) {
        xv::v1::Experiment e;
        if (store_->experiments().GetExperiment(last.experiment_id(), &e).ok() && e.has_result() &&
            e.state() == ToString(ExperimentState::kSucceeded)) {
          c.head_val_bpb = e.result().val_bpb();
        }
      }
    }
    c.campaign.clear_rounds();
    c.campaign.clear_head_history();
    out->campaigns.push_back(std::move(c));
  }

  xv::v1::ListExperimentsRequest req;
  req.set_limit(kRecentExperiments);
  req.set_descending(true);
  XV_RETURN_IF_ERROR(store_->experiments().ListExperiments(req, &out->recent));
  return Status::Ok();
}

Status DashboardReader::ReadCampaign(int64_t campaign_id, const CampaignPageQuery& query,
                                     CampaignPageData* out) {
  *out = CampaignPageData();
  if (query.before_id < 0) return Status::InvalidArgument("before: must be an experiment id > 0");
  if (query.limit < 0 || query.limit > kMaxCampaignExperiments) {
    return Status::InvalidArgument("limit: must be 1.." + std::to_string(kMaxCampaignExperiments) +
                                   ", got " + std::to_string(query.limit));
  }
  out->query = query;
  if (out->query.limit == 0) out->query.limit = kCampaignPageExperiments;
  store::CampaignDetail what;
  what.newest_rounds = kCampaignPageRounds;
  what.newest_head_changes = kCampaignPageHeadChanges;
  Status s = store_->campaigns().GetCampaign(campaign_id, "", what, &out->campaign);
  if (s.code() == Status::Code::kNotFound) {
    return Status::NotFound("campaign " + std::to_string(campaign_id) + ": not found");
  }
  XV_RETURN_IF_ERROR(s);
  std::map<int64_t, store::RoundCounts> round_counts;
  XV_RETURN_IF_ERROR(store_->campaigns().CountRounds(&round_counts));
  // The newest of those rounds (decisions) within a quarter of the cap; listed oldest first.
  auto* rounds = out->campaign.mutable_rounds();
  size_t round_bytes = 0;
  int first = rounds->size();
  while (first > 0 && round_bytes + rounds->Get(first - 1).ByteSizeLong() <= kMaxReplyBytes / 4) {
    round_bytes += rounds->Get(--first).ByteSizeLong();
  }
  if (first > 0) rounds->DeleteSubrange(0, first);
  const auto counted = round_counts.find(campaign_id);
  if (counted != round_counts.end()) {
    out->rounds_omitted = std::max<int64_t>(0, counted->second.rounds - rounds->size());
  }
  // The newest page below before_id, one row more to tell whether older ones follow.
  xv::v1::ListExperimentsRequest req;
  req.set_campaign_id(campaign_id);
  req.set_descending(true);
  req.set_after_id(query.before_id);
  req.set_limit(out->query.limit + 1);
  XV_RETURN_IF_ERROR(store_->experiments().ListExperiments(req, &out->experiments));
  xv::v1::ListExperimentsRequest every;
  every.set_campaign_id(campaign_id);
  XV_RETURN_IF_ERROR(store_->experiments().CountExperiments(every, &out->experiments_total));
  if (out->experiments.size() > static_cast<size_t>(out->query.limit)) {
    out->experiments.resize(out->query.limit);
    out->experiments_truncated = true;
  }
  size_t bytes = 0, kept = 0;
  for (; kept < out->experiments.size(); ++kept) {
    bytes += out->experiments[kept].ByteSizeLong();
    if (bytes > kMaxReplyBytes && kept > 0) break;
  }
  if (kept < out->experiments.size()) {
    out->experiments.resize(kept);
    out->experiments_truncated = true;
  }
  if (out->experiments_truncated && !out->experiments.empty()) {
    out->next_before = out->experiments.back().id();  // newest first: the oldest shown
  }
  std::reverse(out->experiments.begin(), out->experiments.end());  // by id
  return Status::Ok();
}

Status DashboardReader::ReadExperiment(int64_t experiment_id, ExperimentPageData* out) {
  *out = ExperimentPageData();
  Status s = store_->experiments().GetExperiment(experiment_id, &out->experiment);
  if (s.code() == Status::Code::kNotFound) {
    return Status::NotFound("experiment " + std::to_string(experiment_id) + ": not found");
  }
  XV_RETURN_IF_ERROR(s);
  return ReadCurve(experiment_id, out->experiment.attempt(), out);
}

Status DashboardReader::ReadCurve(int64_t experiment_id, int attempt, ExperimentPageData* out) {
  MutexLock lock(&curve_mu_);
  // The attempt's row count and latest step from its latest_metrics row (one row, not a count of
  // the attempt's metrics rows); no row: the attempt stored no step yet.
  store::SqliteStatement latest;
  XV_RETURN_IF_ERROR(curve_conn_->Prepare(
      "SELECT rows, step, loss, tok_per_sec, mfu_percent, progress FROM latest_metrics "
      "WHERE experiment_id = ? AND attempt = ?",
      &latest));
  latest.Bind(1, experiment_id).Bind(2, attempt);
  bool row = false;
  XV_RETURN_IF_ERROR(latest.Step(&row));
  out->metric_rows = row ? latest.ColumnInt(0) : 0;
  if (row) {
    auto optional = [&latest](int col) {
      return latest.IsNull(col) ? std::nullopt : std::optional<double>(latest.ColumnDouble(col));
    };
    out->latest =
        LatestStep{latest.ColumnInt(1), optional(2), optional(3), optional(4), optional(5)};
  }
  if (out->metric_rows == 0) return Status::Ok();
  // Every n-th row (by step) keeps the curve under kMaxCurvePoints; the last row is always kept.
  const int64_t every = out->metric_rows / kMaxCurvePoints + 1;
  store::SqliteStatement st;
  XV_RETURN_IF_ERROR(curve_conn_->Prepare(
      "SELECT step, loss, tok_per_sec FROM ("
      "  SELECT step, loss, tok_per_sec, ROW_NUMBER() OVER (ORDER BY step, id) AS n"
      "  FROM metrics WHERE experiment_id = ? AND attempt = ?)"
      " WHERE (n - 1) % ? = 0 OR n = ? ORDER BY step",
      &st));
  st.Bind(1, experiment_id).Bind(2, attempt).Bind(3, every).Bind(4, out->metric_rows);
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    CurvePoint p;
    p.step = st.ColumnInt(0);
    if (!st.IsNull(1)) p.loss = st.ColumnDouble(1);
    if (!st.IsNull(2)) p.tok_per_sec = st.ColumnDouble(2);
    out->loss_curve.push_back(p);
  }
  return Status::Ok();
}

DatabaseFiles DashboardReader::ReadDatabaseFiles() const {
  DatabaseFiles f;
  f.db_bytes = FileBytes(db_path_);
  f.wal_bytes = FileBytes(db_path_ + "-wal");
  return f;
}

}  // namespace xv::daemon::web
