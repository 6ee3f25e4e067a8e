// ExperimentQueries: the reads of experiments for lists, the scheduler and the failure summary.
// See experiment_queries.h.
#include "daemon/store/experiment_queries.h"

#include <algorithm>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "daemon/store/statement_rows.h"
#include "daemon/store/stored_text.h"

namespace xv::store {
namespace {

using nlohmann::json;

struct QueryParam {
  bool is_text;
  std::string text;
  int64_t number;
};

constexpr const char* kExperimentColumns =
    "SELECT e.id, e.campaign_id, e.round_id, e.name, e.overrides_json, r.hash, e.seed, e.trainer, "
    "e.state, e.attempt, COALESCE(w.name, ''), e.decision, e.decision_reason, e.failure_kind, "
    "e.failure_detail, e.device_name, e.created_at, COALESCE(e.finished_at, ''), e.progress, "
    "e.last_loss, res.id, res.val_bpb, res.training_seconds, res.total_seconds, res.num_steps, "
    "res.total_tokens, res.tok_per_sec, res.mfu_percent, res.peak_flops, res.peak_flops_source, "
    "res.peak_vram_mb, res.peak_reserved_mb, res.num_params, res.flops_per_token, "
    "res.metric_version, res.attention_backend, res.depth, res.summary_json, e.stderr_tail, "
    "e.role, COALESCE(e.reused_from_id, 0), e.config_hash, COALESCE(rd.decision_summary, ''), "
    "res.health_json, res.measured_peak_flops "
    "FROM experiments e JOIN recipes r ON r.id = e.recipe_id "
    "LEFT JOIN rounds rd ON rd.id = e.round_id "
    "LEFT JOIN workers w ON w.id = e.worker_id "
    "LEFT JOIN results res ON res.experiment_id = e.id AND res.attempt = e.attempt ";

// Where res.health_json and res.measured_peak_flops sit in kExperimentColumns.
constexpr int kHealthJsonColumn = 43;

void RowToExperiment(const SqliteStatement& st, xv::v1::Experiment* e) {
  e->set_id(st.ColumnInt(0));
  e->set_campaign_id(st.ColumnInt(1));
  e->set_round_id(st.ColumnInt(2));
  e->set_name(st.ColumnText(3));
  e->set_overrides_json(st.ColumnText(4));
  e->set_recipe_hash(st.ColumnText(5));
  e->set_seed(st.ColumnInt(6));
  e->set_trainer(st.ColumnText(7));
  e->set_state(st.ColumnText(8));
  e->set_attempt(static_cast<int32_t>(st.ColumnInt(9)));
  e->set_worker(st.ColumnText(10));
  // Head controls are measured, never decided on: they read "control".
  e->set_decision(st.ColumnText(39) == "control" ? std::string("control") : st.ColumnText(11));
  e->set_decision_reason(st.ColumnText(12));
  e->set_failure_kind(st.ColumnText(13));
  e->set_failure_detail(st.ColumnText(14));
  e->set_device_name(st.ColumnText(15));
  e->set_created_at(st.ColumnText(16));
  e->set_finished_at(st.ColumnText(17));
  e->set_progress(st.ColumnDouble(18));
  e->set_last_loss(st.IsNull(19) ? 0.0 : st.ColumnDouble(19));
  if (!st.IsNull(20)) {
    xv::v1::Result* r = e->mutable_result();
    r->set_val_bpb(st.ColumnDouble(21));
    r->set_training_seconds(st.ColumnDouble(22));
    r->set_total_seconds(st.ColumnDouble(23));
    r->set_num_steps(st.ColumnInt(24));
    r->set_total_tokens(st.ColumnInt(25));
    r->set_tok_per_sec(st.ColumnDouble(26));
    r->set_mfu_percent(st.IsNull(27) ? -1.0 : st.ColumnDouble(27));
    r->set_peak_flops(st.ColumnDouble(28));
    r->set_peak_flops_source(st.ColumnText(29));
    r->set_peak_vram_mb(st.ColumnDouble(30));
    r->set_peak_reserved_mb(st.ColumnDouble(31));
    r->set_num_params(st.ColumnInt(32));
    r->set_flops_per_token(st.ColumnInt(33));
    r->set_metric_version(st.ColumnText(34));
    r->set_attention_backend(st.ColumnText(35));
    r->set_depth(static_cast<int32_t>(st.ColumnInt(36)));
    r->set_summary_json(st.ColumnText(37));
    // Device health (migration 5): JSON of xv.v1.DeviceHealth, "" when none was reported.
    const std::string health = st.ColumnText(kHealthJsonColumn);
    if (!health.empty()) {
      google::protobuf::util::JsonParseOptions opts;
      opts.ignore_unknown_fields = true;
      (void)google::protobuf::util::JsonStringToMessage(health, r->mutable_health(), opts);
    }
    if (!st.IsNull(kHealthJsonColumn + 1)) {
      r->set_measured_peak_flops(st.ColumnDouble(kHealthJsonColumn + 1));
    }
  }
  e->set_stderr_tail(st.ColumnText(38));
  e->set_role(st.ColumnText(39));
  e->set_reused_from_id(st.ColumnInt(40));
  e->set_config_hash(st.ColumnText(41));
  e->set_round_decision(st.ColumnText(42));
}

Status ReadExperiments(SqliteConnection* conn, const std::string& where_sql,
                       const std::vector<QueryParam>& params, int limit,
                       std::vector<xv::v1::Experiment>* out, bool descending = false,
                       bool by_val_bpb = false, int offset = 0) {
  SqliteStatement st;
  const char* dir = descending ? " DESC" : "";
  std::string order =
      by_val_bpb ? std::string(" ORDER BY res.val_bpb IS NULL, res.val_bpb") + dir + ", e.id"
                 : std::string(" ORDER BY e.id") + dir;
  std::string sql = std::string(kExperimentColumns) + where_sql + order + " LIMIT ? OFFSET " +
                    std::to_string(offset);
  XV_RETURN_IF_ERROR(conn->Prepare(sql, &st));
  int i = 1;
  for (const QueryParam& p : params) {
    if (p.is_text) {
      st.Bind(i++, p.text);
    } else {
      st.Bind(i++, p.number);
    }
  }
  st.Bind(i, static_cast<int64_t>(limit));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    RowToExperiment(st, &out->emplace_back());
  }
  return Status::Ok();
}
}  // namespace

Status ExperimentQueries::ListExperiments(const xv::v1::ListExperimentsRequest& req,
                                        std::vector<xv::v1::Experiment>* out) {
  std::string where = "WHERE 1";
  std::vector<QueryParam> params;
  if (!req.descending()) {
    where += " AND e.id > ?";
    params.push_back({false, "", req.after_id()});
  } else if (req.after_id() > 0) {
    where += " AND e.id < ?";
    params.push_back({false, "", req.after_id()});
  }
  if (req.decision() == "control") {
    where += " AND e.role = 'control'";
  } else if (!req.decision().empty()) {
    where += " AND e.role = 'candidate' AND e.decision = ?";
    params.push_back({true, req.decision(), 0});
  }
  if (req.campaign_id() != 0) {
    where += " AND e.campaign_id = ?";
    params.push_back({false, "", req.campaign_id()});
  }
  if (req.campaign_id() == 0 && !req.campaign().empty()) {
    where += " AND e.campaign_id = (SELECT id FROM campaigns WHERE name = ?)";
    params.push_back({true, req.campaign(), 0});
  }
  if (req.round_id() != 0) {
    where += " AND e.round_id = ?";
    params.push_back({false, "", req.round_id()});
  }
  if (!req.state().empty()) {
    where += " AND e.state = ?";
    params.push_back({true, req.state(), 0});
  }
  int limit = req.limit() <= 0 ? 100 : std::min(req.limit(), 10000);
  MutexLock lock(db_->mu());
  if (!req.order_by().empty() && req.order_by() != "id" && req.order_by() != "val_bpb") {
    return Status::InvalidArgument("order_by: must be id or val_bpb, got '" + req.order_by() + "'");
  }
  if (req.offset() < 0) return Status::InvalidArgument("offset: must be >= 0");
  const size_t first = out->size();
  XV_RETURN_IF_ERROR(ReadExperiments(db_->conn(), where, params, limit, out, req.descending(),
                                     req.order_by() == "val_bpb", req.offset()));
  // Lists carry the last 2 KiB of each stderr tail (GetExperiment has the whole 16 KiB), so a
  // page of 10000 failures stays far below the message limit.
  for (size_t i = first; i < out->size(); ++i) {
    xv::v1::Experiment& e = (*out)[i];
    if (e.stderr_tail().size() > kListStderrTail)
      e.set_stderr_tail(Tail(e.stderr_tail(), kListStderrTail));
  }
  return Status::Ok();
}

Status ExperimentQueries::GetExperiment(int64_t id, xv::v1::Experiment* out) {
  std::vector<xv::v1::Experiment> found;
  {
    MutexLock lock(db_->mu());
    XV_RETURN_IF_ERROR(
        ReadExperiments(db_->conn(), "WHERE e.id = ?", {{false, "", id}}, 1, &found));
  }
  if (found.empty())
    return Status::NotFound("experiment " + std::to_string(id) + " does not exist");
  *out = std::move(found[0]);
  return Status::Ok();
}

Status ExperimentQueries::CountByState(std::map<std::string, int64_t>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare("SELECT state, COUNT(*) FROM experiments GROUP BY state", &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    (*out)[st.ColumnText(0)] = st.ColumnInt(1);
  }
  return Status::Ok();
}

Status ExperimentQueries::CountQueuedByTrainer(std::map<std::string, int64_t>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      db_->conn()->Prepare("SELECT COALESCE(NULLIF(trainer, ''), 'libtorch') AS t, COUNT(*) "
                     "FROM experiments WHERE state = 'queued' GROUP BY t",
                     &st));
  return ForEachRow(
      &st, [out](const SqliteStatement& row) { (*out)[row.ColumnText(0)] = row.ColumnInt(1); });
}

Status ExperimentQueries::ListQueued(std::vector<QueuedExperiment>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT e.id, e.priority, e.trainer, e.device_requirement, e.round_id, e.name, "
      "c.device_filter, c.id, c.budget_json "
      "FROM experiments e JOIN campaigns c ON c.id = e.campaign_id "
      "WHERE e.state = 'queued' AND c.state = 'active' ORDER BY e.priority DESC, e.id",
      &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    QueuedExperiment q;
    q.id = st.ColumnInt(0);
    q.priority = static_cast<int>(st.ColumnInt(1));
    q.trainer = st.ColumnText(2);
    q.device_requirement = st.ColumnText(3);
    q.round_id = st.ColumnInt(4);
    q.candidate = st.ColumnText(5);
    q.device_filter = st.ColumnText(6);
    q.campaign_id = st.ColumnInt(7);
    q.campaign_budget_json = st.ColumnText(8);
    out->push_back(std::move(q));
  }
  return Status::Ok();
}

Status ExperimentQueries::ListActive(std::vector<ActiveAttempt>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      db_->conn()->Prepare("SELECT id, attempt, worker_id, state, "
                     "CAST((julianday('now') - julianday(COALESCE(assigned_at, created_at))) * "
                     "86400000 AS INTEGER), campaign_id FROM experiments "
                     "WHERE state IN ('assigned', 'running') ORDER BY id",
                     &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    out->push_back({st.ColumnInt(0), static_cast<int>(st.ColumnInt(1)),
                    st.IsNull(2) ? 0 : st.ColumnInt(2), st.ColumnText(3), st.ColumnInt(4),
                    st.IsNull(5) ? 0 : st.ColumnInt(5)});
  }
  return Status::Ok();
}

Status ExperimentQueries::CountCandidateAttempts(std::vector<CandidateWorkerCount>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT e.round_id, e.name, a.worker_id, COUNT(*) FROM attempts a "
      "JOIN experiments e ON e.id = a.experiment_id "
      "WHERE e.round_id IN (SELECT DISTINCT round_id FROM experiments WHERE state = 'queued') "
      "GROUP BY e.round_id, e.name, a.worker_id",
      &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    out->push_back(
        {st.ColumnInt(0), st.ColumnText(1), st.ColumnInt(2), static_cast<int>(st.ColumnInt(3))});
  }
  return Status::Ok();
}

Status ExperimentQueries::FailureSummary(int64_t campaign_id, const std::string& name,
                                       std::vector<xv::v1::KnobFailure>* out) {
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  std::string sql =
      "SELECT e.overrides_json, e.state, "
      "EXISTS (SELECT 1 FROM nan_events n WHERE n.experiment_id = e.id) FROM experiments e "
      "WHERE e.reused_from_id IS NULL AND e.role = 'candidate' AND e.state IN ('succeeded', "
      "'diverged', 'failed', 'invalid', 'timed_out', 'lost')";
  int64_t cid = 0;
  if (campaign_id != 0 || !name.empty()) {
    XV_RETURN_IF_ERROR(LookupCampaignId(c, campaign_id, name, &cid));
    sql += " AND e.campaign_id = ?";
  }
  SqliteStatement st;
  XV_RETURN_IF_ERROR(c->Prepare(sql, &st));
  if (cid != 0) st.Bind(1, cid);
  std::map<std::pair<std::string, std::string>, xv::v1::KnobFailure> by_value;
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    nlohmann::json overrides = ParseBoundedJsonOrDiscarded(st.ColumnText(0));
    if (!overrides.is_object()) continue;
    const std::string state = st.ColumnText(1);
    const bool nan = st.ColumnInt(2) != 0 || state == "diverged";
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
      xv::v1::KnobFailure& k = by_value[{it.key(), it.value().dump()}];
      k.set_knob(it.key());
      k.set_value(it.value().dump());
      k.set_runs(k.runs() + 1);
      if (state == "diverged") k.set_diverged(k.diverged() + 1);
      if (state == "failed" || state == "invalid" || state == "lost")
        k.set_crashed(k.crashed() + 1);
      if (state == "timed_out") k.set_timed_out(k.timed_out() + 1);
      if (nan) k.set_nan_runs(k.nan_runs() + 1);
    }
  }
  for (auto& [key, k] : by_value) {
    k.set_nan_rate(static_cast<double>(k.nan_runs()) / k.runs());
    if (k.diverged() + k.crashed() + k.timed_out() + k.nan_runs() > 0) out->push_back(k);
  }
  return Status::Ok();
}


}  // namespace xv::store
