// ExperimentQueries: the reads of experiments for lists, the scheduler and the failure summary.
// See experiment_queries.h.
#include "daemon/store/experiment_queries.h"

#include <algorithm>

#include <google/protobuf/util/json_util.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "common/run_states.h"
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

// Positions in kExperimentSelect.
struct ExperimentColumn {
  enum : int {
    kId,
    kCampaignId,
    kRoundId,
    kName,
    kOverridesJson,
    kRecipeHash,
    kSeed,
    kTrainer,
    kState,
    kAttempt,
    kWorker,
    kDecision,
    kDecisionReason,
    kFailureKind,
    kFailureDetail,
    kDeviceName,
    kCreatedAt,
    kStartedAt,
    kFinishedAt,
    kProgress,
    kLastLoss,
    kResultId,
    kValBpb,
    kTrainingSeconds,
    kTotalSeconds,
    kNumSteps,
    kTotalTokens,
    kTokPerSec,
    kMfuPercent,
    kPeakFlops,
    kPeakFlopsSource,
    kPeakVramMb,
    kPeakReservedMb,
    kNumParams,
    kFlopsPerToken,
    kMetricVersion,
    kAttentionBackend,
    kDepth,
    kSummaryJson,
    kStderrTail,
    kRole,
    kReusedFromId,
    kConfigHash,
    kRoundDecision,
    kHealthJson,
    kMeasuredPeakFlops,
    kSourceSha256,
    kSourceBytes,
    kCount
  };
};

// The SELECT list of every experiment read (RowToExperiment).
constexpr SelectColumn kExperimentSelect[] = {
    {ExperimentColumn::kId, "e.id"},
    {ExperimentColumn::kCampaignId, "e.campaign_id"},
    {ExperimentColumn::kRoundId, "e.round_id"},
    {ExperimentColumn::kName, "e.name"},
    {ExperimentColumn::kOverridesJson, "e.overrides_json"},
    {ExperimentColumn::kRecipeHash, "r.hash"},
    {ExperimentColumn::kSeed, "e.seed"},
    {ExperimentColumn::kTrainer, "e.trainer"},
    {ExperimentColumn::kState, "e.state"},
    {ExperimentColumn::kAttempt, "e.attempt"},
    {ExperimentColumn::kWorker, "COALESCE(w.name, '')"},
    {ExperimentColumn::kDecision, "e.decision"},
    {ExperimentColumn::kDecisionReason, "e.decision_reason"},
    {ExperimentColumn::kFailureKind, "e.failure_kind"},
    {ExperimentColumn::kFailureDetail, "e.failure_detail"},
    {ExperimentColumn::kDeviceName, "e.device_name"},
    {ExperimentColumn::kCreatedAt, "e.created_at"},
    {ExperimentColumn::kStartedAt, "COALESCE(e.started_at, '')"},
    {ExperimentColumn::kFinishedAt, "COALESCE(e.finished_at, '')"},
    {ExperimentColumn::kProgress, "e.progress"},
    {ExperimentColumn::kLastLoss, "e.last_loss"},
    {ExperimentColumn::kResultId, "res.id"},
    {ExperimentColumn::kValBpb, "res.val_bpb"},
    {ExperimentColumn::kTrainingSeconds, "res.training_seconds"},
    {ExperimentColumn::kTotalSeconds, "res.total_seconds"},
    {ExperimentColumn::kNumSteps, "res.num_steps"},
    {ExperimentColumn::kTotalTokens, "res.total_tokens"},
    {ExperimentColumn::kTokPerSec, "res.tok_per_sec"},
    {ExperimentColumn::kMfuPercent, "res.mfu_percent"},
    {ExperimentColumn::kPeakFlops, "res.peak_flops"},
    {ExperimentColumn::kPeakFlopsSource, "res.peak_flops_source"},
    {ExperimentColumn::kPeakVramMb, "res.peak_vram_mb"},
    {ExperimentColumn::kPeakReservedMb, "res.peak_reserved_mb"},
    {ExperimentColumn::kNumParams, "res.num_params"},
    {ExperimentColumn::kFlopsPerToken, "res.flops_per_token"},
    {ExperimentColumn::kMetricVersion, "res.metric_version"},
    {ExperimentColumn::kAttentionBackend, "res.attention_backend"},
    {ExperimentColumn::kDepth, "res.depth"},
    {ExperimentColumn::kSummaryJson, "res.summary_json"},
    {ExperimentColumn::kStderrTail, "e.stderr_tail"},
    {ExperimentColumn::kRole, "e.role"},
    {ExperimentColumn::kReusedFromId, "COALESCE(e.reused_from_id, 0)"},
    {ExperimentColumn::kConfigHash, "e.config_hash"},
    {ExperimentColumn::kRoundDecision, "COALESCE(rd.decision_summary, '')"},
    {ExperimentColumn::kHealthJson, "res.health_json"},
    {ExperimentColumn::kMeasuredPeakFlops, "res.measured_peak_flops"},
    {ExperimentColumn::kSourceSha256, "COALESCE(src.sha256, '')"},
    {ExperimentColumn::kSourceBytes, "COALESCE(src.bytes, 0)"},
};
static_assert(ColumnsInOrder(kExperimentSelect, ExperimentColumn::kCount),
              "kExperimentSelect lists ExperimentColumn in order");

// The experiment read with its recipe, round, worker and current attempt's result.
const std::string& ExperimentSelectSql() {
  static const std::string kSql =
      SelectList(kExperimentSelect) +
      "FROM experiments e JOIN recipes r ON r.id = e.recipe_id "
      "LEFT JOIN sources src ON src.id = r.source_id "
      "LEFT JOIN rounds rd ON rd.id = e.round_id "
      "LEFT JOIN workers w ON w.id = e.worker_id "
      "LEFT JOIN results res ON res.experiment_id = e.id AND res.attempt = e.attempt ";
  return kSql;
}

// The result of the experiment's current attempt (the row has one: kResultId is not NULL).
void RowToResult(const SqliteStatement& st, xv::v1::Result* r) {
  using C = ExperimentColumn;
  r->set_val_bpb(st.ColumnDouble(C::kValBpb));
  r->set_training_seconds(st.ColumnDouble(C::kTrainingSeconds));
  r->set_total_seconds(st.ColumnDouble(C::kTotalSeconds));
  r->set_num_steps(st.ColumnInt(C::kNumSteps));
  r->set_total_tokens(st.ColumnInt(C::kTotalTokens));
  r->set_tok_per_sec(st.ColumnDouble(C::kTokPerSec));
  r->set_mfu_percent(st.IsNull(C::kMfuPercent) ? -1.0 : st.ColumnDouble(C::kMfuPercent));
  r->set_peak_flops(st.ColumnDouble(C::kPeakFlops));
  r->set_peak_flops_source(st.ColumnText(C::kPeakFlopsSource));
  r->set_peak_vram_mb(st.ColumnDouble(C::kPeakVramMb));
  r->set_peak_reserved_mb(st.ColumnDouble(C::kPeakReservedMb));
  r->set_num_params(st.ColumnInt(C::kNumParams));
  r->set_flops_per_token(st.ColumnInt(C::kFlopsPerToken));
  r->set_metric_version(st.ColumnText(C::kMetricVersion));
  r->set_attention_backend(st.ColumnText(C::kAttentionBackend));
  r->set_depth(static_cast<int32_t>(st.ColumnInt(C::kDepth)));
  r->set_summary_json(st.ColumnText(C::kSummaryJson));
  // Device health (migration 5): JSON of xv.v1.DeviceHealth, "" when none was reported.
  const std::string health = st.ColumnText(C::kHealthJson);
  if (!health.empty()) {
    google::protobuf::util::JsonParseOptions opts;
    opts.ignore_unknown_fields = true;
    // Health is informational: a stored document this binary cannot read leaves it empty.
    (void)google::protobuf::util::JsonStringToMessage(health, r->mutable_health(), opts);
  }
  if (!st.IsNull(C::kMeasuredPeakFlops)) {
    r->set_measured_peak_flops(st.ColumnDouble(C::kMeasuredPeakFlops));
  }
}

void RowToExperiment(const SqliteStatement& st, xv::v1::Experiment* e) {
  using C = ExperimentColumn;
  e->set_id(st.ColumnInt(C::kId));
  e->set_campaign_id(st.ColumnInt(C::kCampaignId));
  e->set_round_id(st.ColumnInt(C::kRoundId));
  e->set_name(st.ColumnText(C::kName));
  e->set_overrides_json(st.ColumnText(C::kOverridesJson));
  e->set_recipe_hash(st.ColumnText(C::kRecipeHash));
  e->set_seed(st.ColumnInt(C::kSeed));
  e->set_trainer(st.ColumnText(C::kTrainer));
  e->set_state(st.ColumnText(C::kState));
  e->set_attempt(static_cast<int32_t>(st.ColumnInt(C::kAttempt)));
  e->set_worker(st.ColumnText(C::kWorker));
  // Head controls are measured, never decided on: they read "control".
  RunRole role = RunRole::kCandidate;
  const bool control = ParseRunRole(st.ColumnText(C::kRole), &role) && role == RunRole::kControl;
  e->set_decision(control ? std::string(ToString(RunRole::kControl)) : st.ColumnText(C::kDecision));
  e->set_decision_reason(st.ColumnText(C::kDecisionReason));
  e->set_failure_kind(st.ColumnText(C::kFailureKind));
  e->set_failure_detail(st.ColumnText(C::kFailureDetail));
  e->set_device_name(st.ColumnText(C::kDeviceName));
  e->set_created_at(st.ColumnText(C::kCreatedAt));
  e->set_started_at(st.ColumnText(C::kStartedAt));
  e->set_finished_at(st.ColumnText(C::kFinishedAt));
  e->set_progress(st.ColumnDouble(C::kProgress));
  e->set_last_loss(st.IsNull(C::kLastLoss) ? 0.0 : st.ColumnDouble(C::kLastLoss));
  if (!st.IsNull(C::kResultId)) RowToResult(st, e->mutable_result());
  e->set_stderr_tail(st.ColumnText(C::kStderrTail));
  e->set_source_sha256(st.ColumnText(C::kSourceSha256));
  e->set_source_bytes(st.ColumnInt(C::kSourceBytes));
  e->set_role(st.ColumnText(C::kRole));
  e->set_reused_from_id(st.ColumnInt(C::kReusedFromId));
  e->set_config_hash(st.ColumnText(C::kConfigHash));
  e->set_round_decision(st.ColumnText(C::kRoundDecision));
}

Status ReadExperiments(SqliteConnection* conn, const std::string& where_sql,
                       const std::vector<QueryParam>& params, int limit,
                       std::vector<xv::v1::Experiment>* out, bool descending = false,
                       bool by_val_bpb = false, int offset = 0) {
  SqliteStatement st;
  const char* dir = descending ? " DESC" : "";
  std::string order =
      // e.val_bpb is res.val_bpb (kept so by migration 8's triggers), and in an index.
      by_val_bpb ? std::string(" ORDER BY e.val_bpb IS NULL, e.val_bpb") + dir + ", e.id"
                 : std::string(" ORDER BY e.id") + dir;
  // The offset is bound, so every page reuses one compiled statement.
  std::string sql = ExperimentSelectSql() + where_sql + order + " LIMIT ? OFFSET ?";
  XV_RETURN_IF_ERROR(conn->Prepare(sql, &st));
  int i = 1;
  for (const QueryParam& p : params) {
    if (p.is_text) {
      st.Bind(i++, p.text);
    } else {
      st.Bind(i++, p.number);
    }
  }
  st.Bind(i, static_cast<int64_t>(limit)).Bind(i + 1, static_cast<int64_t>(offset));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    RowToExperiment(st, &out->emplace_back());
  }
  return Status::Ok();
}
// One ended run of a knob value: its run count, and the failure column its state counts in.
void CountEndedRun(ExperimentState state, bool nan, xv::v1::KnobFailure* k) {
  k->set_runs(k->runs() + 1);
  switch (state) {
    case ExperimentState::kDiverged:
      k->set_diverged(k->diverged() + 1);
      break;
    case ExperimentState::kFailed:
    case ExperimentState::kInvalid:
    case ExperimentState::kLost:
      k->set_crashed(k->crashed() + 1);
      break;
    case ExperimentState::kTimedOut:
      k->set_timed_out(k->timed_out() + 1);
      break;
    case ExperimentState::kQueued:
    case ExperimentState::kAssigned:
    case ExperimentState::kRunning:
    case ExperimentState::kSucceeded:
    case ExperimentState::kCancelled:
      break;
  }
  if (nan) k->set_nan_runs(k->nan_runs() + 1);
}

// Positions in kQueuedSelect.
struct QueuedColumn {
  enum : int {
    kId,
    kPriority,
    kTrainer,
    kDeviceRequirement,
    kRoundId,
    kCandidate,
    kDeviceFilter,
    kCampaignId,
    kBudgetJson,
    kCodeCandidate,
    kCount
  };
};

constexpr SelectColumn kQueuedSelect[] = {
    {QueuedColumn::kId, "e.id"},
    {QueuedColumn::kPriority, "e.priority"},
    {QueuedColumn::kTrainer, "e.trainer"},
    {QueuedColumn::kDeviceRequirement, "e.device_requirement"},
    {QueuedColumn::kRoundId, "e.round_id"},
    {QueuedColumn::kCandidate, "e.name"},
    {QueuedColumn::kDeviceFilter, "c.device_filter"},
    {QueuedColumn::kCampaignId, "c.id"},
    {QueuedColumn::kBudgetJson, "c.budget_json"},
    // A code candidate (issue 16): its recipe row names a source.
    {QueuedColumn::kCodeCandidate,
     "EXISTS (SELECT 1 FROM recipes qr WHERE qr.id = e.recipe_id AND qr.source_id IS NOT NULL)"},
};
static_assert(ColumnsInOrder(kQueuedSelect, QueuedColumn::kCount),
              "kQueuedSelect lists QueuedColumn in order");

const std::string& QueuedSelectSql() {
  static const std::string kSql = SelectList(kQueuedSelect);
  return kSql;
}

}  // namespace

namespace {

// The WHERE clause (over experiments e) of ListExperiments' and CountExperiments' filters, and
// its parameters.
void ListFilterSql(const xv::v1::ListExperimentsRequest& req, std::string* where,
                   std::vector<QueryParam>* params) {
  *where = "WHERE 1";
  params->clear();
  // Ids are positive: after_id 0 adds no condition (which would keep the planner from the
  // val_bpb index).
  if (!req.descending() && req.after_id() > 0) {
    *where += " AND e.id > ?";
    params->push_back({false, "", req.after_id()});
  } else if (req.descending() && req.after_id() > 0) {
    *where += " AND e.id < ?";
    params->push_back({false, "", req.after_id()});
  }
  // "control" filters on the role: head controls are measured, never decided on.
  if (req.decision() == ToString(RunRole::kControl)) {
    *where += " AND e.role = 'control'";
  } else if (!req.decision().empty()) {
    *where += " AND e.role = 'candidate' AND e.decision = ?";
    params->push_back({true, req.decision(), 0});
  }
  if (req.campaign_id() != 0) {
    *where += " AND e.campaign_id = ?";
    params->push_back({false, "", req.campaign_id()});
  }
  if (req.campaign_id() == 0 && !req.campaign().empty()) {
    *where += " AND e.campaign_id = (SELECT id FROM campaigns WHERE name = ?)";
    params->push_back({true, req.campaign(), 0});
  }
  if (req.round_id() != 0) {
    *where += " AND e.round_id = ?";
    params->push_back({false, "", req.round_id()});
  }
  if (!req.state().empty()) {
    *where += " AND e.state = ?";
    params->push_back({true, req.state(), 0});
  }
}

}  // namespace

Status ExperimentQueries::CountExperiments(const xv::v1::ListExperimentsRequest& req,
                                           int64_t* out) {
  *out = 0;
  std::string where;
  std::vector<QueryParam> params;
  ListFilterSql(req, &where, &params);
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare("SELECT COUNT(*) FROM experiments e " + where, &st));
  for (size_t i = 0; i < params.size(); ++i) {
    const int index = static_cast<int>(i) + 1;
    if (params[i].is_text) {
      st.Bind(index, params[i].text);
    } else {
      st.Bind(index, params[i].number);
    }
  }
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (row) *out = st.ColumnInt(0);
  return Status::Ok();
}

Status ExperimentQueries::ListExperiments(const xv::v1::ListExperimentsRequest& req,
                                          std::vector<xv::v1::Experiment>* out) {
  std::string where;
  std::vector<QueryParam> params;
  ListFilterSql(req, &where, &params);
  int limit = req.limit() <= 0 ? 100 : std::min(req.limit(), 10000);
  out->clear();
  if (!req.order_by().empty() && req.order_by() != "id" && req.order_by() != "val_bpb") {
    return Status::InvalidArgument("order_by: must be id or val_bpb, got '" + req.order_by() + "'");
  }
  if (req.offset() < 0) return Status::InvalidArgument("offset: must be >= 0");
  const size_t first = out->size();
  ReadLease read = db_->Read();
  XV_RETURN_IF_ERROR(ReadExperiments(read.conn(), where, params, limit, out, req.descending(),
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
    ReadLease read = db_->Read();
    XV_RETURN_IF_ERROR(
        ReadExperiments(read.conn(), "WHERE e.id = ?", {{false, "", id}}, 1, &found));
  }
  if (found.empty())
    return Status::NotFound("experiment " + std::to_string(id) + " does not exist");
  *out = std::move(found[0]);
  return Status::Ok();
}

Status ExperimentQueries::SubmitterOf(int64_t id, std::string* submitter) {
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      "SELECT r.submitter FROM experiments e JOIN rounds r ON r.id = e.round_id WHERE e.id = ?",
      &st));
  st.Bind(1, id);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (!row) return Status::NotFound("no experiment with id " + std::to_string(id));
  *submitter = st.ColumnText(0);
  return Status::Ok();
}

Status ExperimentQueries::CountByState(std::map<std::string, int64_t>* out) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteStatement st;
  // Migration 11's counters: a handful of rows, whatever the size of the table.
  XV_RETURN_IF_ERROR(
      read.conn()->Prepare("SELECT state, SUM(n) FROM experiment_counts GROUP BY state "
                           "HAVING SUM(n) > 0",
                           &st));
  return ForEachRow(
      &st, [out](const SqliteStatement& row) { (*out)[row.ColumnText(0)] = row.ColumnInt(1); });
}

Status ExperimentQueries::CountQueuedByTrainer(std::map<std::string, int64_t>* out) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      "SELECT trainer, n FROM experiment_counts WHERE state = 'queued' AND n > 0", &st));
  return ForEachRow(
      &st, [out](const SqliteStatement& row) { (*out)[row.ColumnText(0)] = row.ColumnInt(1); });
}

Status ExperimentQueries::ListQueued(std::vector<QueuedExperiment>* out, size_t limit) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      QueuedSelectSql() +
          // Migration 8's queue index holds the queue in this order: the LIMIT stops the read.
          "FROM experiments e INDEXED BY experiments_queue JOIN campaigns c ON c.id = "
          "e.campaign_id WHERE e.state = 'queued' AND c.state = 'active' "
          // Within a round its recorded run order (migration 7); rounds in submission order.
          "ORDER BY e.priority DESC, e.round_id, COALESCE(e.run_order, -1), e.id LIMIT ?",
      &st));
  st.Bind(1, limit == 0 ? int64_t{-1} : static_cast<int64_t>(limit));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    QueuedExperiment q;
    q.id = st.ColumnInt(QueuedColumn::kId);
    q.priority = static_cast<int>(st.ColumnInt(QueuedColumn::kPriority));
    q.trainer = st.ColumnText(QueuedColumn::kTrainer);
    q.device_requirement = st.ColumnText(QueuedColumn::kDeviceRequirement);
    q.round_id = st.ColumnInt(QueuedColumn::kRoundId);
    q.candidate = st.ColumnText(QueuedColumn::kCandidate);
    q.device_filter = st.ColumnText(QueuedColumn::kDeviceFilter);
    q.campaign_id = st.ColumnInt(QueuedColumn::kCampaignId);
    q.campaign_budget_json = st.ColumnText(QueuedColumn::kBudgetJson);
    q.code_candidate = st.ColumnInt(QueuedColumn::kCodeCandidate) != 0;
    out->push_back(std::move(q));
  }
  return Status::Ok();
}

Status ExperimentQueries::ListActive(std::vector<ActiveAttempt>* out) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      "SELECT id, attempt, worker_id, state, "
      "CAST((julianday('now') - julianday(COALESCE(assigned_at, created_at))) * "
      "86400000 AS INTEGER), campaign_id FROM experiments "
      "WHERE state IN ('assigned', 'running') ORDER BY id",
      &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    ActiveAttempt a;
    a.experiment_id = st.ColumnInt(0);
    a.attempt = static_cast<int>(st.ColumnInt(1));
    a.worker_id = st.IsNull(2) ? 0 : st.ColumnInt(2);
    XV_RETURN_IF_ERROR(ColumnEnum(st, 3, ParseExperimentState, "experiments.state", &a.state));
    a.assigned_age_ms = st.ColumnInt(4);
    a.campaign_id = st.IsNull(5) ? 0 : st.ColumnInt(5);
    out->push_back(std::move(a));
  }
  return Status::Ok();
}

Status ExperimentQueries::CountCandidateAttempts(
    const std::set<std::pair<int64_t, std::string>>& candidates,
    std::vector<CandidateWorkerCount>* out) {
  out->clear();
  ReadLease read = db_->Read();
  for (const auto& candidate : candidates) {
    const int64_t round_id = candidate.first;
    const std::string& name = candidate.second;
    SqliteStatement st;
    XV_RETURN_IF_ERROR(read.conn()->Prepare(
        "SELECT a.worker_id, COUNT(*) FROM experiments e "
        "INDEXED BY experiments_round_name_attempted JOIN attempts a ON a.experiment_id = e.id "
        "WHERE e.round_id = ? AND e.name = ? AND e.attempt > 0 GROUP BY a.worker_id",
        &st));
    st.Bind(1, round_id).Bind(2, name);
    XV_RETURN_IF_ERROR(ForEachRow(&st, [&](const SqliteStatement& row) {
      out->push_back({round_id, name, row.ColumnInt(0), static_cast<int>(row.ColumnInt(1))});
    }));
  }
  return Status::Ok();
}

Status ExperimentQueries::FailureSummary(int64_t campaign_id, const std::string& name,
                                         std::vector<xv::v1::KnobFailure>* out) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteConnection* c = read.conn();
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
    ExperimentState state = ExperimentState::kQueued;
    XV_RETURN_IF_ERROR(ColumnEnum(st, 1, ParseExperimentState, "experiments.state", &state));
    const bool nan = st.ColumnInt(2) != 0 || state == ExperimentState::kDiverged;
    for (auto it = overrides.begin(); it != overrides.end(); ++it) {
      xv::v1::KnobFailure& k = by_value[{it.key(), it.value().dump()}];
      k.set_knob(it.key());
      k.set_value(it.value().dump());
      CountEndedRun(state, nan, &k);
    }
  }
  for (auto& [key, k] : by_value) {
    k.set_nan_rate(static_cast<double>(k.nan_runs()) / k.runs());
    if (k.diverged() + k.crashed() + k.timed_out() + k.nan_runs() > 0) out->push_back(k);
  }
  return Status::Ok();
}

}  // namespace xv::store
