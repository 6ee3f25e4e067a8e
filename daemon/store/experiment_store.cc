#include "daemon/store/experiment_store.h"

#include <algorithm>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <google/protobuf/util/json_util.h>
#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "common/probe_figures.h"
#include "common/untrusted_text.h"
#include "daemon/sched/result_plausibility.h"
#include "daemon/store/event_log.h"
#include "daemon/store/migration_runner.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

#define XV_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

constexpr size_t kMaxStderrTail = 16 * 1024;
constexpr size_t kListStderrTail = 2 * 1024;
constexpr size_t kMaxEventJson = 256 * 1024;
// A worker offline this long that never held an attempt is forgotten (UpsertWorker).
constexpr int kIdleWorkerHorizonHours = 24;
// Recipe rows stored per transaction by InsertSubmission before the submission becomes visible.
constexpr size_t kSubmissionChunkRows = 256;
// Between two of those transactions the mutex is free this long, for the threads waiting on it.
constexpr std::chrono::microseconds kSubmissionChunkPause(1000);

using nlohmann::json;

const std::set<std::string>& TerminalStatesFromWorker() {
  static const std::set<std::string> kStates = {"succeeded", "diverged",  "failed",
                                                "invalid",   "timed_out", "cancelled"};
  return kStates;
}

// A number of a JSON object, or nullopt when missing, null or not a number.
std::optional<double> NumberField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

// An integer of a JSON object, or nullopt when missing, not a number or outside int64.
std::optional<int64_t> IntField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return std::nullopt;
  return sched::JsonInt64(*it);
}

// A text field of a worker-sent event: a string as is, another scalar as its JSON text (a nan
// event's value may be a number), an array or object described ("an array of 3"), never dumped.
std::string TextField(const json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end()) return "";
  if (it->is_string()) return it->get<std::string>();
  if (it->is_structured()) return DescribeJsonValue(*it);
  return it->dump();
}

// The last `n` bytes of `s` at most, starting on a code-point boundary: a cut never leaves half a
// character (a tail of "é" cut mid-character made every listing holding it fail to serialize).
std::string Tail(const std::string& s, size_t n) { return std::string(Utf8Suffix(s, n)); }

// A bound parameter of a dynamically built query.
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

// Inserts the recipe unless its hash exists; *id receives the row id either way, *inserted (when
// given) whether this call added the row.
Status InsertRecipe(SqliteConnection* conn, const std::string& hash, const std::string& recipe_json,
                    const std::string& resolved_json, const std::string& name, int64_t* id,
                    bool* inserted = nullptr) {
  SqliteStatement ins;
  XV_RETURN_IF_ERROR(conn->Prepare(
      "INSERT OR IGNORE INTO recipes(hash, recipe_json, resolved_json, name) VALUES (?, ?, ?, ?)",
      &ins));
  ins.Bind(1, hash).Bind(2, recipe_json).Bind(3, resolved_json).Bind(4, name);
  XV_RETURN_IF_ERROR(ins.Run());
  if (inserted != nullptr) *inserted = conn->Changes() > 0;
  SqliteStatement sel;
  XV_RETURN_IF_ERROR(conn->Prepare("SELECT id FROM recipes WHERE hash = ?", &sel));
  sel.Bind(1, hash);
  bool row = false;
  XV_RETURN_IF_ERROR(sel.Step(&row));
  if (!row) return Status::Internal("recipe " + hash + " vanished after insert");
  *id = sel.ColumnInt(0);
  return Status::Ok();
}

// Identity and reuse (DESIGN.md § Keep/discard semantics): when the campaign already has a
// succeeded run of the same recipe row (same resolved config and seed), the new experiment
// `new_id` takes its result instead of running again: it becomes succeeded, marked with
// reused_from_id (the original run, never a reuse row), and gets a copy of the result.
Status ReuseEarlierResult(SqliteConnection* c, int64_t campaign_id, int64_t recipe_id,
                          int64_t new_id) {
  SqliteStatement find;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT e.id, e.attempt, e.device_name, e.worker_id FROM experiments e "
                 "JOIN results res ON res.experiment_id = e.id AND res.attempt = e.attempt "
                 "WHERE e.campaign_id = ? AND e.recipe_id = ? AND e.state = 'succeeded' "
                 "AND e.reused_from_id IS NULL AND e.id <> ? ORDER BY e.id LIMIT 1",
                 &find));
  find.Bind(1, campaign_id).Bind(2, recipe_id).Bind(3, new_id);
  bool row = false;
  XV_RETURN_IF_ERROR(find.Step(&row));
  if (!row) return Status::Ok();
  const int64_t from = find.ColumnInt(0);
  const int64_t attempt = find.ColumnInt(1);
  SqliteStatement copy;
  XV_RETURN_IF_ERROR(c->Prepare(
      "INSERT INTO results(experiment_id, attempt, val_bpb, training_seconds, total_seconds, "
      "num_steps, total_tokens, tok_per_sec, mfu_percent, peak_flops, peak_flops_source, "
      "peak_vram_mb, peak_reserved_mb, num_params, flops_per_token, metric_version, "
      "attention_backend, depth, device_json, summary_json, health_source, health_samples, "
      "avg_power_w, energy_j, peak_temp_c, throttle_events, throttled_seconds, throttled, "
      "health_json, measured_peak_flops) "
      "SELECT ?, 0, val_bpb, training_seconds, total_seconds, num_steps, total_tokens, "
      "tok_per_sec, mfu_percent, peak_flops, peak_flops_source, peak_vram_mb, peak_reserved_mb, "
      "num_params, flops_per_token, metric_version, attention_backend, depth, device_json, "
      "summary_json, health_source, health_samples, avg_power_w, energy_j, peak_temp_c, "
      "throttle_events, throttled_seconds, throttled, health_json, measured_peak_flops "
      "FROM results WHERE experiment_id = ? AND attempt = ?",
      &copy));
  copy.Bind(1, new_id).Bind(2, from).Bind(3, attempt);
  XV_RETURN_IF_ERROR(copy.Run());
  SqliteStatement upd;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE experiments SET state = 'succeeded', attempt = 0, reused_from_id = ?, "
                 "device_name = ?, progress = 1, finished_at = " XV_NOW " WHERE id = ?",
                 &upd));
  upd.Bind(1, from).Bind(2, find.ColumnText(2)).Bind(3, new_id);
  return upd.Run();
}

// Device health of a finished attempt (migration 5): on the attempt row, and on its result row
// (when the trainer produced a summary) as columns plus the worker's probed matmul FLOP/s.
// Optional figures the worker did not measure stay NULL.
Status StoreAttemptHealth(SqliteConnection* c, int64_t worker_id, const xv::v1::Finished& f) {
  std::string health_json;
  if (f.has_health()) {
    google::protobuf::util::JsonPrintOptions opts;
    opts.preserve_proto_field_names = true;
    (void)google::protobuf::util::MessageToJsonString(f.health(), &health_json, opts);
    SqliteStatement at;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE attempts SET health_json = ? WHERE experiment_id = ? AND attempt = ?", &at));
    at.Bind(1, health_json).Bind(2, f.experiment_id()).Bind(3, f.attempt());
    XV_RETURN_IF_ERROR(at.Run());
  }
  const xv::v1::DeviceHealth& h = f.health();
  auto opt = [](bool has, double v) { return has ? std::optional<double>(v) : std::nullopt; };
  SqliteStatement res;
  XV_RETURN_IF_ERROR(c->Prepare(
      "UPDATE results SET measured_peak_flops = (SELECT probe_matmul_tflops * 1e12 FROM workers "
      "WHERE id = ?1), health_source = ?2, health_samples = ?3, avg_power_w = ?4, energy_j = ?5, "
      "peak_temp_c = ?6, throttle_events = ?7, throttled_seconds = ?8, throttled = ?9, "
      "health_json = ?10 WHERE experiment_id = ?11 AND attempt = ?12",
      &res));
  const bool known = f.has_health();
  const bool throttle_known = known && h.throttle_known();
  res.Bind(1, worker_id)
      .Bind(2, h.source())
      .Bind(3, known ? std::optional<int64_t>(h.sample_count()) : std::nullopt)
      .Bind(4, opt(h.has_avg_power_w(), h.avg_power_w()))
      .Bind(5, opt(h.has_energy_j(), h.energy_j()))
      .Bind(6, opt(h.has_peak_temp_c(), h.peak_temp_c()))
      .Bind(7, throttle_known ? std::optional<int64_t>(h.throttle_events()) : std::nullopt)
      .Bind(8, opt(throttle_known, h.throttled_seconds()))
      .Bind(9, throttle_known ? std::optional<int64_t>(h.throttled() ? 1 : 0) : std::nullopt)
      .Bind(10, health_json)
      .Bind(11, f.experiment_id())
      .Bind(12, f.attempt());
  return res.Run();
}

// The failure kind of an attempt whose trainer reported figures that cannot be true
// (daemon/sched/result_plausibility.h); the attempt ends invalid with it.
constexpr const char* kImplausibleResult = "implausible_result";

// A trainer event of this attempt carried an implausible figure (`why` names it): the attempt is
// marked (its failure kind and detail; the first such event wins) while it is live (assigned,
// running, or lost and possibly reporting late), and FinishAttempt ends it invalid. The event
// itself stays stored verbatim; none of its figures are applied.
Status MarkAttemptImplausible(SqliteConnection* c, const xv::v1::TrainerEvent& ev,
                              const Status& why) {
  const std::string detail = SanitizeAndTruncateUtf8(
      ev.type() + " event " + std::to_string(ev.seq()) + ": " + why.message(), kMaxDetailBytes);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      c->Prepare("UPDATE attempts SET failure_kind = ?, failure_detail = ? WHERE experiment_id = ? "
                 "AND attempt = ? AND state IN ('assigned', 'running', 'lost') AND failure_kind "
                 "!= ?",
                 &st));
  st.Bind(1, kImplausibleResult)
      .Bind(2, detail)
      .Bind(3, ev.experiment_id())
      .Bind(4, ev.attempt())
      .Bind(5, kImplausibleResult);
  return st.Run();
}

// A Finished that is not applied (its attempt had already ended) is recorded as a daemon event
// 'finished_ignored' of that attempt, with what it said.
Status RecordIgnoredFinished(SqliteConnection* c, int64_t worker_id, const xv::v1::Finished& f,
                             const std::string& attempt_state, const std::string& reason) {
  const json ev = {{"worker_id", worker_id},
                   {"state", SanitizeAndTruncateUtf8(f.state(), kMaxKindBytes)},
                   {"failure_kind", SanitizeAndTruncateUtf8(f.failure_kind(), kMaxKindBytes)},
                   {"failure_detail", SanitizeAndTruncateUtf8(f.failure_detail(), kMaxQuoteBytes)},
                   {"exit_code", f.exit_code()},
                   {"attempt_state", attempt_state},
                   {"reason", reason}};
  return InsertDaemonEvent(c, f.experiment_id(), f.attempt(), "finished_ignored", ev.dump());
}

}  // namespace

ExperimentStore::ExperimentStore(std::unique_ptr<SqliteConnection> conn, bool read_only,
                                 int version)
    : conn_(std::move(conn)),
      read_only_(read_only),
      schema_version_(version),
      path_(conn_->path()) {}

Status ExperimentStore::Open(const std::string& path, std::unique_ptr<ExperimentStore>* out) {
  std::unique_ptr<SqliteConnection> conn;
  XV_RETURN_IF_ERROR(SqliteConnection::Open(path, SqliteConnection::Mode::kReadWrite, &conn));
  {
    SqliteStatement st;
    XV_RETURN_IF_ERROR(conn->Prepare("PRAGMA integrity_check", &st));
    bool row = false;
    XV_RETURN_IF_ERROR(st.Step(&row));
    std::string result = row ? st.ColumnText(0) : "no answer";
    if (result != "ok") {
      return Status::DataLoss(path + ": integrity_check failed: " + result +
                              " (restore a backup or move the file away)");
    }
  }
  int to = 0;
  XV_RETURN_IF_ERROR(ApplyMigrations(conn.get(), EmbeddedMigrations(), nullptr, &to));
  out->reset(new ExperimentStore(std::move(conn), /*read_only=*/false, to));
  return Status::Ok();
}

Status ExperimentStore::OpenReadOnly(const std::string& path,
                                     std::unique_ptr<ExperimentStore>* out) {
  std::unique_ptr<SqliteConnection> conn;
  XV_RETURN_IF_ERROR(SqliteConnection::Open(path, SqliteConnection::Mode::kReadOnly, &conn));
  int version = 0;
  XV_RETURN_IF_ERROR(ReadSchemaVersion(conn.get(), &version));
  const int newest = static_cast<int>(EmbeddedMigrations().size());
  if (version == 0) return Status::FailedPrecondition(path + ": not an xv database (no schema)");
  if (version > newest) {
    return Status::FailedPrecondition(
        path + ": database schema version " + std::to_string(version) +
        " is newer than this binary (knows " + std::to_string(newest) + ")");
  }
  out->reset(new ExperimentStore(std::move(conn), /*read_only=*/true, version));
  return Status::Ok();
}

Status ExperimentStore::CheckWritable() const {
  if (read_only_) return Status::FailedPrecondition(path_ + ": store opened read-only");
  return Status::Ok();
}

Status ExperimentStore::IntegrityCheck(std::string* result) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare("PRAGMA integrity_check", &st));
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *result = row ? st.ColumnText(0) : "";
  return Status::Ok();
}

Status ExperimentStore::InsertSubmission(const NewSubmission& sub, SubmissionIds* ids) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> one_submission(submissions_mu_);
  std::vector<int64_t> added_recipes;  // rows this submission added (deleted again on failure)
  Status s = InsertSubmissionSteps(sub, ids, &added_recipes);
  if (s.ok() || added_recipes.empty()) return s;
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  Status cleanup = InWriteTransaction(c, [&]() -> Status {
    SqliteStatement del;
    XV_RETURN_IF_ERROR(c->Prepare(
        "DELETE FROM recipes WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM campaigns WHERE "
        "base_recipe_id = ?1 OR head_recipe_id = ?1) AND NOT EXISTS (SELECT 1 FROM rounds WHERE "
        "base_recipe_id = ?1) AND NOT EXISTS (SELECT 1 FROM head_history WHERE recipe_id = ?1)",
        &del));
    for (int64_t id : added_recipes) {
      del.Reset();
      del.Bind(1, id);
      XV_RETURN_IF_ERROR(del.Run());  // a row an experiment uses fails the foreign key: kept
    }
    return Status::Ok();
  });
  if (!cleanup.ok()) {
    // Unreferenced recipe rows are harmless (content-addressed; a later identical config reuses
    // them): keep the submission's own error.
    spdlog::warn("submission refused; {} recipe row(s) it added stay: {}", added_recipes.size(),
                 cleanup.ToString());
  }
  return s;
}

Status ExperimentStore::InsertSubmissionSteps(const NewSubmission& sub, SubmissionIds* ids,
                                              std::vector<int64_t>* added_recipes) {
  // Step 1: the recipes (the bulky part: two JSON documents per row), kSubmissionChunkRows per
  // transaction, the store's mutex released in between so that readers, worker events and
  // assignments go first. Recipe rows are content-addressed (by hash) and nothing refers to them
  // yet: a submission that stops here (refused below, or a crash) leaves nothing queued, and a
  // later identical config reuses them.
  int64_t base_recipe_id = 0;
  std::vector<int64_t> recipe_ids(sub.experiments.size(), 0);
  for (size_t first = 0; first == 0 || first < sub.experiments.size();
       first += kSubmissionChunkRows) {
    const size_t end = std::min(sub.experiments.size(), first + kSubmissionChunkRows);
    std::lock_guard<std::mutex> lock(mu_);
    XV_RETURN_IF_ERROR(CheckAcceptsNewWorkLocked());
    SqliteConnection* c = conn_.get();
    XV_RETURN_IF_ERROR(InWriteTransaction(c, [&]() -> Status {
      std::vector<int64_t> added;
      bool inserted = false;
      if (first == 0) {
        XV_RETURN_IF_ERROR(InsertRecipe(c, sub.base_hash, sub.base_recipe_json,
                                        sub.base_resolved_json, sub.recipe_name, &base_recipe_id,
                                        &inserted));
        if (inserted) added.push_back(base_recipe_id);
      }
      for (size_t i = first; i < end; ++i) {
        const NewExperiment& e = sub.experiments[i];
        XV_RETURN_IF_ERROR(InsertRecipe(c, e.recipe_hash, e.recipe_json, e.resolved_json, e.name,
                                        &recipe_ids[i], &inserted));
        if (inserted) added.push_back(recipe_ids[i]);
      }
      // Listed before the commit: should it fail, deleting these ids again is a no-op.
      added_recipes->insert(added_recipes->end(), added.begin(), added.end());
      return Status::Ok();
    }));
    // std::mutex is not fair: without a pause this thread could take it straight back.
    if (end < sub.experiments.size()) std::this_thread::sleep_for(kSubmissionChunkPause);
  }
  // Step 2: everything that makes the submission visible, in one transaction of small rows: the
  // campaign (created on first use), the round, the experiments and their 'queued' state events,
  // and the audit event. Readers and the dispatcher see all of it or nothing.
  std::lock_guard<std::mutex> lock(mu_);
  XV_RETURN_IF_ERROR(CheckAcceptsNewWorkLocked());
  SqliteConnection* c = conn_.get();
  SubmissionIds result;
  XV_RETURN_IF_ERROR(InWriteTransaction(c, [&]() -> Status {
    {
      SqliteStatement st;
      XV_RETURN_IF_ERROR(
          c->Prepare("INSERT OR IGNORE INTO campaigns(name, base_recipe_id, head_recipe_id, "
                     "trainer, recipe_name) VALUES (?, ?, ?, ?, ?)",
                     &st));
      st.Bind(1, sub.campaign)
          .Bind(2, base_recipe_id)
          .Bind(3, base_recipe_id)
          .Bind(4, sub.trainer)
          .Bind(5, sub.recipe_name);
      XV_RETURN_IF_ERROR(st.Run());
      if (c->Changes() > 0) {
        SqliteStatement hist;
        XV_RETURN_IF_ERROR(
            c->Prepare("INSERT INTO head_history(campaign_id, recipe_id, reason) VALUES (?, ?, "
                       "'base')",
                       &hist));
        hist.Bind(1, c->LastInsertRowId()).Bind(2, base_recipe_id);
        XV_RETURN_IF_ERROR(hist.Run());
      }
      SqliteStatement sel;
      XV_RETURN_IF_ERROR(c->Prepare("SELECT id FROM campaigns WHERE name = ?", &sel));
      sel.Bind(1, sub.campaign);
      bool row = false;
      XV_RETURN_IF_ERROR(sel.Step(&row));
      if (!row) return Status::Internal("campaign " + sub.campaign + " vanished after insert");
      result.campaign_id = sel.ColumnInt(0);
    }
    {
      SqliteStatement st;
      XV_RETURN_IF_ERROR(
          c->Prepare("INSERT INTO rounds(campaign_id, kind, base_recipe_id, recipe_name, "
                     "recipe_yaml, submitter, head_config_hash, plan_id, plan_phase, keep_rule) "
                     "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                     &st));
      st.Bind(1, result.campaign_id)
          .Bind(2, sub.kind)
          .Bind(3, base_recipe_id)
          .Bind(4, sub.recipe_name)
          .Bind(5, sub.recipe_yaml)
          .Bind(6, sub.submitter)
          .Bind(7, sub.base_config_hash);
      if (sub.plan_id != 0) {
        st.Bind(8, sub.plan_id).Bind(9, static_cast<int64_t>(sub.plan_phase));
        // One round per plan phase (unique index): say so instead of a constraint error.
        SqliteStatement dup;
        XV_RETURN_IF_ERROR(
            c->Prepare("SELECT id FROM rounds WHERE plan_id = ? AND plan_phase = ?", &dup));
        dup.Bind(1, sub.plan_id).Bind(2, static_cast<int64_t>(sub.plan_phase));
        bool exists = false;
        XV_RETURN_IF_ERROR(dup.Step(&exists));
        if (exists) {
          return Status::AlreadyExists("plan " + std::to_string(sub.plan_id) + " phase " +
                                       std::to_string(sub.plan_phase) + " already has round " +
                                       std::to_string(dup.ColumnInt(0)));
        }
      } else {
        st.Bind(8, std::optional<int64_t>()).Bind(9, std::optional<int64_t>());
      }
      st.Bind(10, sub.keep_rule);
      XV_RETURN_IF_ERROR(st.Run());
      result.round_id = c->LastInsertRowId();
    }
    // Recipes of the campaign that have a succeeded original run, looked up once: only new rows
    // of those can reuse a result (rows of this submission are all queued).
    std::set<int64_t> reusable;
    {
      SqliteStatement st;
      XV_RETURN_IF_ERROR(c->Prepare(
          "SELECT DISTINCT e.recipe_id FROM experiments e "
          "JOIN results res ON res.experiment_id = e.id AND res.attempt = e.attempt "
          "WHERE e.campaign_id = ? AND e.state = 'succeeded' AND e.reused_from_id IS NULL",
          &st));
      st.Bind(1, result.campaign_id);
      XV_RETURN_IF_ERROR(
          ForEachRow(&st, [&](const SqliteStatement& row) { reusable.insert(row.ColumnInt(0)); }));
    }
    SqliteStatement ins;
    XV_RETURN_IF_ERROR(
        c->Prepare("INSERT INTO experiments(campaign_id, round_id, recipe_id, name, "
                   "candidate_index, replicate, "
                   "overrides_json, seed, trainer, device_requirement, priority, time_budget_s, "
                   "hard_deadline_s, role, config_hash) "
                   "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                   &ins));
    for (size_t i = 0; i < sub.experiments.size(); ++i) {
      const NewExperiment& e = sub.experiments[i];
      const int64_t recipe_id = recipe_ids[i];
      ins.Reset();
      ins.Bind(1, result.campaign_id)
          .Bind(2, result.round_id)
          .Bind(3, recipe_id)
          .Bind(4, e.name)
          .Bind(5, e.candidate_index)
          .Bind(6, e.replicate)
          .Bind(7, e.overrides_json)
          .Bind(8, e.seed)
          .Bind(9, sub.trainer)
          .Bind(10, e.device_requirement)
          .Bind(11, sub.priority)
          .Bind(12, e.time_budget_s)
          .Bind(13, e.hard_deadline_s)
          .Bind(14, e.role)
          .Bind(15, e.config_hash);
      XV_RETURN_IF_ERROR(ins.Run().WithContext("experiment " + e.name + ": "));
      const int64_t new_id = c->LastInsertRowId();
      result.experiment_ids.push_back(new_id);
      if (reusable.count(recipe_id) != 0) {
        XV_RETURN_IF_ERROR(ReuseEarlierResult(c, result.campaign_id, recipe_id, new_id));
      }
    }
    {
      // One 'state' event per experiment (queued, or succeeded when reused), in id order: what
      // InsertStateEvent writes, in one statement.
      SqliteStatement st;
      XV_RETURN_IF_ERROR(c->Prepare(
          "INSERT INTO events(source, experiment_id, attempt, type, json) "
          "SELECT 'daemon', id, attempt, 'state', json_object('state', state, 'detail', '') "
          "FROM experiments WHERE round_id = ? ORDER BY id",
          &st));
      st.Bind(1, result.round_id);
      XV_RETURN_IF_ERROR(st.Run());
    }
    json audit = {{"campaign", sub.campaign},       {"round_id", result.round_id},
                  {"recipe_name", sub.recipe_name}, {"submitter", sub.submitter},
                  {"trainer", sub.trainer},         {"experiments", result.experiment_ids}};
    SqliteStatement ev;
    XV_RETURN_IF_ERROR(
        c->Prepare("INSERT INTO events(source, type, json) VALUES ('audit', 'submit', ?)", &ev));
    ev.Bind(1, DumpJsonLossless(audit));
    return ev.Run();
  }));
  *ids = std::move(result);
  return Status::Ok();
}

Status ExperimentStore::ListExperiments(const xv::v1::ListExperimentsRequest& req,
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
  std::lock_guard<std::mutex> lock(mu_);
  if (!req.order_by().empty() && req.order_by() != "id" && req.order_by() != "val_bpb") {
    return Status::InvalidArgument("order_by: must be id or val_bpb, got '" + req.order_by() + "'");
  }
  if (req.offset() < 0) return Status::InvalidArgument("offset: must be >= 0");
  const size_t first = out->size();
  XV_RETURN_IF_ERROR(ReadExperiments(conn_.get(), where, params, limit, out, req.descending(),
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

Status ExperimentStore::GetExperiment(int64_t id, xv::v1::Experiment* out) {
  std::vector<xv::v1::Experiment> found;
  {
    std::lock_guard<std::mutex> lock(mu_);
    XV_RETURN_IF_ERROR(
        ReadExperiments(conn_.get(), "WHERE e.id = ?", {{false, "", id}}, 1, &found));
  }
  if (found.empty())
    return Status::NotFound("experiment " + std::to_string(id) + " does not exist");
  *out = std::move(found[0]);
  return Status::Ok();
}

Status ExperimentStore::CountByState(std::map<std::string, int64_t>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare("SELECT state, COUNT(*) FROM experiments GROUP BY state", &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    (*out)[st.ColumnText(0)] = st.ColumnInt(1);
  }
  return Status::Ok();
}

Status ExperimentStore::CountQueuedByTrainer(std::map<std::string, int64_t>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("SELECT COALESCE(NULLIF(trainer, ''), 'libtorch') AS t, COUNT(*) "
                     "FROM experiments WHERE state = 'queued' GROUP BY t",
                     &st));
  return ForEachRow(
      &st, [out](const SqliteStatement& row) { (*out)[row.ColumnText(0)] = row.ColumnInt(1); });
}

Status ExperimentStore::ListWorkers(std::vector<xv::v1::WorkerInfo>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("SELECT w.id, w.name, w.state, w.device_json, COALESCE(w.last_heartbeat, ''), "
                     "(SELECT MIN(e.id) FROM experiments e WHERE e.worker_id = w.id "
                     " AND e.state IN ('assigned', 'running')), w.probe_json, "
                     "w.probe_matmul_tflops, w.probe_bandwidth_gbs FROM workers w ORDER BY w.id",
                     &st));
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (!row) break;
    xv::v1::WorkerInfo* w = &out->emplace_back();
    w->set_id(st.ColumnInt(0));
    w->set_name(st.ColumnText(1));
    w->set_state(st.ColumnText(2));
    std::string device = st.ColumnText(3);
    json dj = ParseBoundedJsonOrDiscarded(device);
    if (dj.is_object()) {
      w->mutable_device()->set_name(TextField(dj, "name"));
      w->mutable_device()->set_vendor(TextField(dj, "vendor"));
      w->mutable_device()->set_backend(TextField(dj, "backend"));
      w->mutable_device()->set_hostname(TextField(dj, "hostname"));
      if (auto idx = IntField(dj, "index")) w->mutable_device()->set_index(static_cast<int>(*idx));
      if (auto peak = NumberField(dj, "peak_flops")) w->mutable_device()->set_peak_flops(*peak);
    }
    w->set_last_heartbeat(st.ColumnText(4));
    w->set_current_experiment_id(st.IsNull(5) ? 0 : st.ColumnInt(5));
    w->set_probe_json(st.ColumnText(6));
    w->set_probe_matmul_tflops(st.IsNull(7) ? 0.0 : st.ColumnDouble(7));
    w->set_probe_bandwidth_gbs(st.IsNull(8) ? 0.0 : st.ColumnDouble(8));
  }
  return Status::Ok();
}

Status ExperimentStore::ListQueued(std::vector<QueuedExperiment>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
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

Status ExperimentStore::ListActive(std::vector<ActiveAttempt>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("SELECT id, attempt, worker_id, state, "
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

Status ExperimentStore::CountCandidateAttempts(std::vector<CandidateWorkerCount>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
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

Status ExperimentStore::AssignExperiment(int64_t experiment_id, int64_t worker_id,
                                         xv::v1::ExperimentSpec* spec) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  XV_RETURN_IF_ERROR(CheckAcceptsNewWorkLocked());
  SqliteConnection* c = conn_.get();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(c->Prepare(
        "SELECT e.state, e.attempt, e.trainer, r.recipe_json, r.hash, e.seed, e.time_budget_s, "
        "e.hard_deadline_s, e.campaign_id, e.round_id FROM experiments e "
        "JOIN recipes r ON r.id = e.recipe_id WHERE e.id = ?",
        &sel));
    sel.Bind(1, experiment_id);
    bool row = false;
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row) return Status::NotFound("experiment " + std::to_string(experiment_id));
    if (sel.ColumnText(0) != "queued") {
      return Status::FailedPrecondition("experiment " + std::to_string(experiment_id) + " is " +
                                        sel.ColumnText(0) + ", not queued");
    }
    const int attempt = static_cast<int>(sel.ColumnInt(1)) + 1;
    spec->set_experiment_id(experiment_id);
    spec->set_attempt(attempt);
    spec->set_trainer(sel.ColumnText(2));
    spec->set_recipe_json(sel.ColumnText(3));
    spec->set_recipe_hash(sel.ColumnText(4));
    spec->set_seed(sel.ColumnInt(5));
    spec->set_time_budget_s(sel.ColumnDouble(6));
    spec->set_hard_deadline_s(sel.ColumnDouble(7));
    spec->set_campaign_id(sel.ColumnInt(8));
    spec->set_round_id(sel.ColumnInt(9));
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE experiments SET state = 'assigned', attempt = ?, worker_id = ?, progress = 0, "
        "last_loss = NULL, failure_kind = '', failure_detail = '', assigned_at = " XV_NOW
        " WHERE id = ?",
        &up));
    up.Bind(1, attempt).Bind(2, worker_id).Bind(3, experiment_id);
    XV_RETURN_IF_ERROR(up.Run());
    SqliteStatement ins;
    XV_RETURN_IF_ERROR(
        c->Prepare("INSERT INTO attempts(experiment_id, attempt, worker_id, state) VALUES (?, ?, "
                   "?, 'assigned')",
                   &ins));
    ins.Bind(1, experiment_id).Bind(2, attempt).Bind(3, worker_id);
    XV_RETURN_IF_ERROR(ins.Run());
    XV_RETURN_IF_ERROR(InsertStateEvent(c, experiment_id, "worker " + std::to_string(worker_id)));
    SqliteStatement ws;
    XV_RETURN_IF_ERROR(c->Prepare("UPDATE workers SET state = 'busy' WHERE id = ?", &ws));
    ws.Bind(1, worker_id);
    return ws.Run();
  });
}

Status ExperimentStore::MarkAttemptLost(int64_t experiment_id, int attempt,
                                        const std::string& detail, int max_attempts,
                                        bool* requeued) {
  XV_RETURN_IF_ERROR(CheckWritable());
  *requeued = false;
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT x.state, x.attempt, c.max_attempts FROM experiments x "
                   "JOIN campaigns c ON c.id = x.campaign_id WHERE x.id = ?",
                   &sel));
    sel.Bind(1, experiment_id);
    bool row = false;
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row) return Status::NotFound("experiment " + std::to_string(experiment_id));
    std::string state = sel.ColumnText(0);
    if (max_attempts <= 0) max_attempts = static_cast<int>(sel.ColumnInt(2));
    if (sel.ColumnInt(1) != attempt || (state != "assigned" && state != "running")) {
      return Status::Ok();
    }
    SqliteStatement at;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE attempts SET state = 'lost', failure_kind = 'lost', failure_detail = ?, "
                   "finished_at = " XV_NOW " WHERE experiment_id = ? AND attempt = ?",
                   &at));
    at.Bind(1, detail).Bind(2, experiment_id).Bind(3, attempt);
    XV_RETURN_IF_ERROR(at.Run());
    SqliteStatement up;
    if (attempt < max_attempts) {
      *requeued = true;
      XV_RETURN_IF_ERROR(
          c->Prepare("UPDATE experiments SET state = 'queued', worker_id = NULL, progress = 0, "
                     "failure_detail = ? WHERE id = ?",
                     &up));
      up.Bind(1, "attempt " + std::to_string(attempt) + " lost: " + detail).Bind(2, experiment_id);
    } else {
      XV_RETURN_IF_ERROR(c->Prepare(
          "UPDATE experiments SET state = 'lost', failure_kind = 'lost', failure_detail = ?, "
          "finished_at = " XV_NOW " WHERE id = ?",
          &up));
      up.Bind(1, detail).Bind(2, experiment_id);
    }
    XV_RETURN_IF_ERROR(up.Run());
    SqliteStatement ev;
    XV_RETURN_IF_ERROR(
        c->Prepare("INSERT INTO events(source, experiment_id, attempt, type, json) "
                   "VALUES ('daemon', ?, ?, 'lost', ?)",
                   &ev));
    ev.Bind(1, experiment_id)
        .Bind(2, attempt)
        .Bind(3, DumpJsonLossless(json{{"detail", detail}, {"requeued", *requeued}}));
    return ev.Run();
  });
}

Status ExperimentStore::CancelExperiment(int64_t experiment_id, std::string* state,
                                         int64_t* worker_id, int* attempt) {
  XV_RETURN_IF_ERROR(CheckWritable());
  *worker_id = 0;
  *attempt = 0;
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT state, attempt, worker_id FROM experiments WHERE id = ?", &sel));
    sel.Bind(1, experiment_id);
    bool row = false;
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row)
      return Status::NotFound("experiment " + std::to_string(experiment_id) + " does not exist");
    *state = sel.ColumnText(0);
    if (*state != "queued" && *state != "assigned" && *state != "running") return Status::Ok();
    if (*state != "queued") {
      *attempt = static_cast<int>(sel.ColumnInt(1));
      *worker_id = sel.IsNull(2) ? 0 : sel.ColumnInt(2);
    }
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE experiments SET state = 'cancelled', failure_detail = 'cancelled by request', "
        "finished_at = " XV_NOW " WHERE id = ?",
        &up));
    up.Bind(1, experiment_id);
    XV_RETURN_IF_ERROR(up.Run());
    *state = "cancelled";
    SqliteStatement ev;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO events(source, experiment_id, type, json) VALUES ('audit', ?, 'cancel', '{}')",
        &ev));
    ev.Bind(1, experiment_id);
    return ev.Run();
  });
}

Status ExperimentStore::UpsertWorker(const xv::v1::Register& reg, int64_t* worker_id) {
  XV_RETURN_IF_ERROR(CheckWritable());
  const xv::v1::Device& d = reg.device();
  json device = {{"name", d.name()},
                 {"vendor", d.vendor()},
                 {"backend", d.backend()},
                 {"index", d.index()},
                 {"memory_bytes", d.memory_bytes()},
                 {"driver", d.driver()},
                 {"runtime", d.runtime()},
                 {"torch_version", d.torch_version()},
                 {"os", d.os()},
                 {"hostname", d.hostname()},
                 {"peak_flops", d.peak_flops()},
                 {"peak_flops_source", d.peak_flops_source()}};
  json env = json::object();
  for (const auto& [k, v] : d.env_knobs()) env[k] = v;
  device["env_knobs"] = env;
  const xv::v1::Capabilities& cap = reg.capabilities();
  json caps = {{"trainers", std::vector<std::string>(cap.trainers().begin(), cap.trainers().end())},
               {"attention_backends", std::vector<std::string>(cap.attention_backends().begin(),
                                                               cap.attention_backends().end())},
               {"sliding_window", cap.sliding_window()},
               {"dtypes", std::vector<std::string>(cap.dtypes().begin(), cap.dtypes().end())},
               {"max_concurrent", cap.max_concurrent()}};
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  return InWriteTransaction(c, [&]() -> Status {
    // Worker rows do not pile up (issue 11: 300 made-up names lived forever): a worker offline
    // for kIdleWorkerHorizon that never held an attempt is forgotten; registering again makes it
    // anew. Workers that ran something stay, their rows are referenced by experiments and attempts.
    SqliteStatement prune;
    XV_RETURN_IF_ERROR(c->Prepare(
        "DELETE FROM workers WHERE state = 'offline' AND COALESCE(last_heartbeat, registered_at) < "
        "strftime('%Y-%m-%dT%H:%M:%fZ', 'now', ?) "
        "AND NOT EXISTS (SELECT 1 FROM attempts a WHERE a.worker_id = workers.id) "
        "AND NOT EXISTS (SELECT 1 FROM experiments e WHERE e.worker_id = workers.id)",
        &prune));
    prune.Bind(1, "-" + std::to_string(kIdleWorkerHorizonHours) + " hours");
    XV_RETURN_IF_ERROR(prune.Run());
    if (c->Changes() > 0) {
      spdlog::info("forgot {} worker(s) offline for over {} h that never ran an attempt",
                   c->Changes(), kIdleWorkerHorizonHours);
    }
    SqliteStatement st;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO workers(name, device_json, capabilities_json, backend, device_name, state, "
        "version, last_heartbeat) VALUES (?, ?, ?, ?, ?, 'idle', ?, " XV_NOW
        ") ON CONFLICT(name) DO UPDATE SET device_json = excluded.device_json, "
        "capabilities_json = excluded.capabilities_json, backend = excluded.backend, "
        "device_name = excluded.device_name, state = 'idle', version = excluded.version, "
        "registered_at = " XV_NOW ", last_heartbeat = excluded.last_heartbeat",
        &st));
    st.Bind(1, reg.worker_name())
        .Bind(2, DumpJsonLossless(device))
        .Bind(3, DumpJsonLossless(caps))
        .Bind(4, d.backend().empty() ? std::string("cpu") : d.backend())
        .Bind(5, d.name())
        .Bind(6, reg.version());
    XV_RETURN_IF_ERROR(st.Run());
    // The device probe (issue 3). A worker registering without one (--no-probe, probe failed)
    // keeps the one stored before.
    if (!reg.probe_json().empty()) {
      ProbeFigures pf;
      const bool parsed = ParseProbeFigures(reg.probe_json(), &pf);
      SqliteStatement probe;
      XV_RETURN_IF_ERROR(c->Prepare(
          "UPDATE workers SET probe_json = ?, probe_matmul_tflops = ?, probe_bandwidth_gbs = ?, "
          "probed_at = " XV_NOW " WHERE name = ?",
          &probe));
      probe.Bind(1, reg.probe_json())
          .Bind(2, parsed && pf.matmul_tflops > 0 ? std::optional<double>(pf.matmul_tflops)
                                                  : std::nullopt)
          .Bind(3, parsed && pf.bandwidth_gb_per_s > 0
                       ? std::optional<double>(pf.bandwidth_gb_per_s)
                       : std::nullopt)
          .Bind(4, reg.worker_name());
      XV_RETURN_IF_ERROR(probe.Run());
    }
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(c->Prepare("SELECT id FROM workers WHERE name = ?", &sel));
    sel.Bind(1, reg.worker_name());
    bool row = false;
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row) return Status::Internal("worker " + reg.worker_name() + " vanished after upsert");
    *worker_id = sel.ColumnInt(0);
    return Status::Ok();
  });
}

Status ExperimentStore::SetWorkerState(int64_t worker_id, const std::string& state) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
      "UPDATE workers SET state = ?, last_heartbeat = " XV_NOW " WHERE id = ?", &st));
  st.Bind(1, state).Bind(2, worker_id);
  return st.Run();
}

Status ExperimentStore::MarkAllWorkersOffline() {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->Exec("UPDATE workers SET state = 'offline' WHERE state != 'offline'");
}

Status ExperimentStore::TouchWorker(int64_t worker_id) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("UPDATE workers SET last_heartbeat = " XV_NOW " WHERE id = ?", &st));
  st.Bind(1, worker_id);
  return st.Run();
}

Status ExperimentStore::HighestContiguousSeqLocked(int64_t experiment_id, int attempt,
                                                   int64_t* seq) {
  // The first stored seq whose successor is missing, among a run that starts at 1.
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
      "SELECT e.seq FROM events e WHERE e.source = 'trainer' AND e.experiment_id = ?1 "
      "AND e.attempt = ?2 AND NOT EXISTS (SELECT 1 FROM events f WHERE f.experiment_id = ?1 "
      "AND f.attempt = ?2 AND f.seq = e.seq + 1) ORDER BY e.seq LIMIT 1",
      &st));
  st.Bind(1, experiment_id).Bind(2, attempt);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (!row) {
    *seq = 0;
    return Status::Ok();
  }
  int64_t end = st.ColumnInt(0);
  SqliteStatement one;
  XV_RETURN_IF_ERROR(conn_->Prepare(
      "SELECT 1 FROM events WHERE experiment_id = ? AND attempt = ? AND seq = 1", &one));
  one.Bind(1, experiment_id).Bind(2, attempt);
  XV_RETURN_IF_ERROR(one.Step(&row));
  *seq = row ? end : 0;
  return Status::Ok();
}

Status ExperimentStore::HighestContiguousSeq(int64_t experiment_id, int attempt, int64_t* seq) {
  std::lock_guard<std::mutex> lock(mu_);
  return HighestContiguousSeqLocked(experiment_id, attempt, seq);
}

Status ExperimentStore::IsActiveAttemptOf(int64_t worker_id, int64_t experiment_id, int attempt,
                                          bool* active) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("SELECT 1 FROM experiments WHERE id = ? AND attempt = ? AND worker_id = ? "
                     "AND state IN ('assigned', 'running')",
                     &st));
  st.Bind(1, experiment_id).Bind(2, attempt).Bind(3, worker_id);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *active = row;
  return Status::Ok();
}

Status ExperimentStore::ApplyOneEventLocked(const xv::v1::TrainerEvent& ev, bool* duplicate) {
  SqliteConnection* c = conn_.get();
  const int64_t exp = ev.experiment_id();
  const int attempt = ev.attempt();
  // Cut on a code-point boundary; the store edge (SqliteStatement::Bind) keeps it valid UTF-8.
  std::string text(Utf8Prefix(ev.json(), kMaxEventJson));
  SqliteStatement ins;
  XV_RETURN_IF_ERROR(c->Prepare(
      "INSERT OR IGNORE INTO events(source, experiment_id, attempt, seq, type, json, unix_ms) "
      "VALUES ('trainer', ?, ?, ?, ?, ?, ?)",
      &ins));
  ins.Bind(1, exp)
      .Bind(2, attempt)
      .Bind(3, ev.seq())
      .Bind(4, ev.type())
      .Bind(5, text)
      .Bind(6, ev.unix_ms());
  XV_RETURN_IF_ERROR(ins.Run());
  *duplicate = c->Changes() == 0;
  if (*duplicate) return Status::Ok();

  json j = ParseBoundedJsonOrDiscarded(ev.json());
  if (!j.is_object()) return Status::Ok();  // stored verbatim; nothing to interpret
  const std::string type =
      j.contains("type") && j["type"].is_string() ? j["type"].get<std::string>() : ev.type();
  // Only the active attempt moves the experiment's live fields.
  constexpr const char* kActive =
      " WHERE id = ? AND attempt = ? AND state IN ('assigned', 'running')";
  if (type == "start") {
    std::string device_name;
    if (j.contains("device") && j["device"].is_object())
      device_name = TextField(j["device"], "name");
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(std::string("UPDATE experiments SET state = 'running', "
                                              "started_at = " XV_NOW ", device_name = ?") +
                                      kActive,
                                  &up));
    up.Bind(1, device_name).Bind(2, exp).Bind(3, attempt);
    XV_RETURN_IF_ERROR(up.Run());
    SqliteStatement at;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE attempts SET state = 'running' WHERE experiment_id = ? AND attempt = ? "
                   "AND state = 'assigned'",
                   &at));
    at.Bind(1, exp).Bind(2, attempt);
    return at.Run();
  }
  if (type == "step") {
    sched::StepFigures fig;
    Status plausible = sched::ReadStepFigures(j, &fig);
    if (!plausible.ok()) return MarkAttemptImplausible(c, ev, plausible);
    SqliteStatement m;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO metrics(experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec, "
        "mfu_percent, progress) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &m));
    m.Bind(1, exp)
        .Bind(2, attempt)
        .Bind(3, fig.step)
        .Bind(4, fig.loss)
        .Bind(5, fig.lrm)
        .Bind(6, fig.dt_ms)
        .Bind(7, fig.tok_per_sec)
        .Bind(8, fig.mfu_percent)
        .Bind(9, fig.progress);
    XV_RETURN_IF_ERROR(m.Run());
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(
        std::string("UPDATE experiments SET state = 'running', progress = COALESCE(?, progress), "
                    "last_loss = COALESCE(?, last_loss), started_at = COALESCE(started_at, " XV_NOW
                    ")") +
            kActive,
        &up));
    up.Bind(1, fig.progress).Bind(2, fig.loss).Bind(3, exp).Bind(4, attempt);
    return up.Run();
  }
  if (type == "nan") {
    SqliteStatement n;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO nan_events(experiment_id, attempt, step, micro_step, what, value, knobs_json) "
        "VALUES (?1, ?2, ?3, ?4, ?5, ?6, "
        "(SELECT overrides_json FROM experiments WHERE id = ?1))",
        &n));
    n.Bind(1, exp)
        .Bind(2, attempt)
        .Bind(3, IntField(j, "step"))
        .Bind(4, IntField(j, "micro_step"))
        .Bind(5, TextField(j, "what"))
        .Bind(6, TextField(j, "value"));
    return n.Run();
  }
  if (type == "summary") {
    sched::ResultFigures fig;
    Status plausible = sched::ReadResultFigures(j, &fig);
    if (!plausible.ok()) return MarkAttemptImplausible(c, ev, plausible);
    SqliteStatement r;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT OR REPLACE INTO results(experiment_id, attempt, val_bpb, training_seconds, "
        "total_seconds, num_steps, total_tokens, tok_per_sec, mfu_percent, peak_flops, "
        "peak_flops_source, peak_vram_mb, peak_reserved_mb, num_params, flops_per_token, "
        "metric_version, attention_backend, depth, summary_json) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &r));
    r.Bind(1, exp)
        .Bind(2, attempt)
        .Bind(3, fig.val_bpb)
        .Bind(4, fig.training_seconds)
        .Bind(5, fig.total_seconds)
        .Bind(6, fig.num_steps)
        .Bind(7, fig.total_tokens)
        .Bind(8, fig.tok_per_sec)
        .Bind(9, fig.mfu_percent.value_or(-1.0))  // null: unknown peak
        .Bind(10, fig.peak_flops.value_or(0.0))
        .Bind(11, TextField(j, "peak_flops_source"))
        .Bind(12, fig.peak_vram_mb)
        .Bind(13, fig.peak_reserved_mb)
        .Bind(14, fig.num_params)
        .Bind(15, fig.flops_per_token)
        .Bind(16, TextField(j, "metric_version"))
        .Bind(17, TextField(j, "attention_backend"))
        .Bind(18, fig.depth)
        .Bind(19, ev.json());
    return r.Run();
  }
  if (type == "error") {
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(
        std::string("UPDATE experiments SET failure_kind = ?, failure_detail = ?") + kActive, &up));
    // The experiment row keeps a bounded detail (the whole event stays in the event log).
    up.Bind(1, SanitizeAndTruncateUtf8(TextField(j, "kind"), kMaxKindBytes))
        .Bind(2, SanitizeAndTruncateUtf8(TextField(j, "message"), kMaxDetailBytes))
        .Bind(3, exp)
        .Bind(4, attempt);
    return up.Run();
  }
  return Status::Ok();  // eval, log and future types: stored in events only
}

Status ExperimentStore::ApplyTrainerEvents(int64_t worker_id,
                                           const std::vector<xv::v1::TrainerEvent>& events,
                                           AppliedEvents* applied) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  AppliedEvents result;
  XV_RETURN_IF_ERROR(InWriteTransaction(c, [&]() -> Status {
    std::vector<std::pair<int64_t, int>> touched;
    for (const xv::v1::TrainerEvent& ev : events) {
      // The worker must hold (or have held) this attempt.
      SqliteStatement own;
      XV_RETURN_IF_ERROR(c->Prepare(
          "SELECT 1 FROM attempts WHERE experiment_id = ? AND attempt = ? AND worker_id = ?",
          &own));
      own.Bind(1, ev.experiment_id()).Bind(2, ev.attempt()).Bind(3, worker_id);
      bool row = false;
      XV_RETURN_IF_ERROR(own.Step(&row));
      if (!row || ev.seq() <= 0) {
        ++result.rejected;
        continue;
      }
      bool duplicate = false;
      XV_RETURN_IF_ERROR(ApplyOneEventLocked(ev, &duplicate));
      if (duplicate) ++result.duplicates;
      std::pair<int64_t, int> key(ev.experiment_id(), ev.attempt());
      if (std::find(touched.begin(), touched.end(), key) == touched.end()) touched.push_back(key);
    }
    for (const auto& [exp, attempt] : touched) {
      xv::v1::EventAck ack;
      ack.set_experiment_id(exp);
      ack.set_attempt(attempt);
      int64_t seq = 0;
      XV_RETURN_IF_ERROR(HighestContiguousSeqLocked(exp, attempt, &seq));
      ack.set_seq(seq);
      result.acks.push_back(ack);
    }
    return Status::Ok();
  }));
  *applied = std::move(result);
  return Status::Ok();
}

Status ExperimentStore::FinishAttempt(int64_t worker_id, const xv::v1::Finished& f,
                                      xv::v1::EventAck* ack) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  const int64_t exp = f.experiment_id();
  const int attempt = f.attempt();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement own;
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT state, failure_kind, failure_detail FROM attempts WHERE experiment_id "
                   "= ? AND attempt = ? AND worker_id = ?",
                   &own));
    own.Bind(1, exp).Bind(2, attempt).Bind(3, worker_id);
    bool row = false;
    XV_RETURN_IF_ERROR(own.Step(&row));
    if (!row) {
      return Status::FailedPrecondition("experiment " + std::to_string(exp) + " attempt " +
                                        std::to_string(attempt) + " is not held by this worker");
    }
    const std::string attempt_state = own.ColumnText(0);
    const bool marked_implausible = own.ColumnText(1) == kImplausibleResult;
    const std::string implausible_detail = own.ColumnText(2);
    // The acknowledgement ends the worker's resending whether or not the report is applied.
    auto acknowledge = [&]() -> Status {
      SqliteStatement ws;
      XV_RETURN_IF_ERROR(c->Prepare("UPDATE workers SET state = 'idle', last_heartbeat = " XV_NOW
                                    " WHERE id = ? AND state = 'busy'",
                                    &ws));
      ws.Bind(1, worker_id);
      XV_RETURN_IF_ERROR(ws.Run());
      int64_t seq = 0;
      XV_RETURN_IF_ERROR(HighestContiguousSeqLocked(exp, attempt, &seq));
      ack->set_experiment_id(exp);
      ack->set_attempt(attempt);
      ack->set_seq(seq);
      ack->set_finished(true);
      return Status::Ok();
    };
    // Attempt rows change only from a live state: assigned, running, or lost (the worker's own
    // report of a lost attempt, arriving late, replaces the daemon's verdict once). A second or
    // late Finished for an attempt that already ended is recorded, not applied.
    const bool attempt_live =
        attempt_state == "assigned" || attempt_state == "running" || attempt_state == "lost";
    if (!attempt_live) {
      XV_RETURN_IF_ERROR(RecordIgnoredFinished(c, worker_id, f, attempt_state,
                                               "the attempt had already ended " + attempt_state));
      return acknowledge();
    }
    std::string state = f.state();
    std::string kind = f.failure_kind();
    std::string detail = f.failure_detail();
    if (!TerminalStatesFromWorker().count(state)) {
      detail =
          "worker reported unknown state '" + state + "'" + (detail.empty() ? "" : ": " + detail);
      state = "failed";
      if (kind.empty()) kind = "crashed";
    }
    if (marked_implausible && state != "cancelled") {
      // The trainer reported figures that cannot be true: whatever it says now, the run is
      // invalid and is never kept.
      state = "invalid";
      kind = kImplausibleResult;
      detail = implausible_detail;
    }
    if (state == "succeeded") {
      SqliteStatement has;
      XV_RETURN_IF_ERROR(c->Prepare(
          "SELECT val_bpb IS NOT NULL FROM results WHERE experiment_id = ? AND attempt = ?", &has));
      has.Bind(1, exp).Bind(2, attempt);
      XV_RETURN_IF_ERROR(has.Step(&row));
      if (!row) {
        state = "failed";
        kind = "crashed";
        detail = "the trainer exited successfully without a summary event";
      } else if (has.ColumnInt(0) == 0) {
        state = "invalid";
        kind = kImplausibleResult;
        detail = "val_bpb: the summary has none (a succeeded run needs a positive finite val_bpb)";
      }
    }
    const std::string tail = Tail(f.stderr_tail(), kMaxStderrTail);
    // The experiment moves when this attempt is its active one, or when this attempt was lost (the
    // experiment requeued but not yet reassigned, or out of attempts) and it brings a success: a
    // late result is accepted while no other attempt is running or has finished, even when a later
    // attempt was lost too (the experiment then takes this attempt's number and result). A
    // cancelled experiment keeps its state but gains the attempt's log tail.
    SqliteStatement up;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE experiments SET state = ?1, "
        "failure_kind = CASE WHEN ?1 = 'succeeded' THEN '' WHEN ?2 = '' THEN failure_kind ELSE ?2 "
        "END, failure_detail = CASE WHEN ?1 = 'succeeded' THEN '' WHEN ?3 = '' THEN failure_detail "
        "ELSE ?3 END, stderr_tail = ?4, progress = CASE WHEN ?1 = 'succeeded' THEN 1 ELSE "
        "progress END, worker_id = ?7, attempt = ?6, finished_at = " XV_NOW
        " WHERE id = ?5 AND ((attempt = ?6 AND state IN ('assigned', 'running')) OR "
        "(attempt >= ?6 AND state IN ('queued', 'lost') AND ?1 = 'succeeded'))",
        &up));
    up.Bind(1, state)
        .Bind(2, kind)
        .Bind(3, detail)
        .Bind(4, tail)
        .Bind(5, exp)
        .Bind(6, attempt)
        .Bind(7, worker_id);
    XV_RETURN_IF_ERROR(up.Run());
    const bool experiment_moved = c->Changes() > 0;
    SqliteStatement at;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE attempts SET state = ?, exit_code = ?, signal = ?, failure_kind = ?, "
                   "failure_detail = ?, stderr_tail = ?, wall_seconds = ?, finished_at = " XV_NOW
                   " WHERE experiment_id = ? AND attempt = ?",
                   &at));
    at.Bind(1, state)
        .Bind(2, f.exit_code())
        .Bind(3, f.signal())
        .Bind(4, kind)
        .Bind(5, detail)
        .Bind(6, tail)
        .Bind(7, f.wall_seconds())
        .Bind(8, exp)
        .Bind(9, attempt);
    XV_RETURN_IF_ERROR(at.Run());
    XV_RETURN_IF_ERROR(StoreAttemptHealth(c, worker_id, f));
    if (experiment_moved) {
      XV_RETURN_IF_ERROR(InsertStateEvent(
          c, exp, kind.empty() ? detail : kind + (detail.empty() ? "" : ": " + detail)));
    }
    SqliteStatement tail_only;
    XV_RETURN_IF_ERROR(c->Prepare(
        "UPDATE experiments SET stderr_tail = ? WHERE id = ? AND attempt = ? AND state = "
        "'cancelled'",
        &tail_only));
    tail_only.Bind(1, tail).Bind(2, exp).Bind(3, attempt);
    XV_RETURN_IF_ERROR(tail_only.Run());
    return acknowledge();
  });
}

Status ExperimentStore::AppendAudit(const std::string& type, const std::string& json_text) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("INSERT INTO events(source, type, json) VALUES ('daemon', ?, ?)", &st));
  st.Bind(1, type).Bind(2, json_text);
  return st.Run();
}

}  // namespace xv::store
