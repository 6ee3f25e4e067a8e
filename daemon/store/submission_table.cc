// SubmissionTable: a submission's recipes, campaign, round and experiments. See
// submission_table.h.
#include "daemon/store/submission_table.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <spdlog/spdlog.h>
#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/run_states.h"
#include "daemon/sched/attempt_outcome.h"
#include "daemon/store/event_log.h"
#include "daemon/store/source_table.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

using nlohmann::json;

// A staging transaction of InsertSubmission ends after this many rows or this long, whichever
// comes first, so that an event batch or an assignment waits at most about that long for the
// writer while a big submission is written.
constexpr size_t kStageChunkMaxRows = 256;
constexpr std::chrono::microseconds kStageChunkBudget(4000);
// Between two of those transactions the mutex is free this long, for the threads waiting on it.
constexpr std::chrono::microseconds kStageChunkPause(1000);
// A submission of at most this many rows is staged, published and its staged rows deleted in one
// transaction (one commit instead of three: a small Submit's reply, and the dispatch of what it
// queued, wait for each commit's fsync); its hold is about that of one staging transaction.
constexpr size_t kOneTransactionMaxRows = 64;
double MillisSince(std::chrono::steady_clock::time_point from) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - from).count();
}

// Staged rows deleted per transaction once a submission is published (or refused).
constexpr int kDropChunkRows = 1000;

// The recipe row of `hash`, inserted unless it exists; *id receives the row id either way,
// *inserted (when given) whether this call added the row. `source_id` is the row's code candidate
// source (migration 10; none: the configured file). The statements come from the connection's
// cache, so a row costs one lookup by hash and, for a new config, one insert.
Status InsertRecipe(SqliteConnection* conn, const std::string& hash, const std::string& recipe_json,
                    const std::string& resolved_json, const std::string& name,
                    std::optional<int64_t> source_id, int64_t* id, bool* inserted = nullptr) {
  SqliteStatement sel;
  XV_RETURN_IF_ERROR(conn->Prepare("SELECT id FROM recipes WHERE hash = ?", &sel));
  sel.Bind(1, hash);
  bool row = false;
  XV_RETURN_IF_ERROR(sel.Step(&row));
  if (inserted != nullptr) *inserted = !row;
  if (row) {
    *id = sel.ColumnInt(0);
    return Status::Ok();
  }
  SqliteStatement ins;
  XV_RETURN_IF_ERROR(
      conn->Prepare("INSERT INTO recipes(hash, recipe_json, resolved_json, name, source_id) "
                    "VALUES (?, ?, ?, ?, ?)",
                    &ins));
  ins.Bind(1, hash).Bind(2, recipe_json).Bind(3, resolved_json).Bind(4, name).Bind(5, source_id);
  XV_RETURN_IF_ERROR(ins.Run());
  *id = conn->LastInsertRowId();
  return Status::Ok();
}

// Identity and reuse (DESIGN.md § Keep/discard semantics): when the campaign already has a
// succeeded run of the same recipe row (same resolved config and seed), the new experiment
// `new_id` takes its result instead of running again: it becomes succeeded, marked with
// reused_from_id (the original run, never a reuse row), and gets a copy of the result.
Status ReuseEarlierResult(SqliteConnection* c, int64_t campaign_id, int64_t recipe_id,
                          int64_t new_id, const std::string& reason) {
  // The campaign's earlier runs of this recipe row, oldest first: the first that
  // sched::MayReuseResult accepts stands in.
  SqliteStatement find;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT e.id, e.attempt, e.device_name, e.state, e.reused_from_id IS NOT NULL, "
                 "res.experiment_id IS NOT NULL FROM experiments e "
                 "LEFT JOIN results res ON res.experiment_id = e.id AND res.attempt = e.attempt "
                 "WHERE e.campaign_id = ? AND e.recipe_id = ? AND e.id <> ? ORDER BY e.id",
                 &find));
  find.Bind(1, campaign_id).Bind(2, recipe_id).Bind(3, new_id);
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(find.Step(&row));
    if (!row) return Status::Ok();
    sched::EarlierRun earlier;
    earlier.is_reuse = find.ColumnInt(4) != 0;
    earlier.has_result = find.ColumnInt(5) != 0;
    if (ParseExperimentState(find.ColumnText(3), &earlier.state) &&
        sched::MayReuseResult(earlier)) {
      break;
    }
  }
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
  XV_RETURN_IF_ERROR(c->Prepare(
      "UPDATE experiments SET state = 'succeeded', attempt = 0, reused_from_id = ?, "
      "device_name = ?, progress = 1, reuse_reason = ?, finished_at = " XV_NOW " WHERE id = ?",
      &upd));
  upd.Bind(1, from)
      .Bind(2, find.ColumnText(2))
      .Bind(3, "result of #" + std::to_string(from) + ": " + reason)
      .Bind(4, new_id);
  return upd.Run();
}

// Step 2's parts, each inside the one transaction that makes a submission visible.

// The campaign, created on first use (its base recipe is its head, with a 'base' head_history
// row); *campaign_id receives its id either way.
Status InsertCampaignOnFirstUse(SqliteConnection* c, const NewSubmission& sub,
                                int64_t base_recipe_id, int64_t* campaign_id) {
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
  *campaign_id = sel.ColumnInt(0);
  return Status::Ok();
}

// The round; AlreadyExists when the plan phase it is built for already has one.
Status InsertRound(SqliteConnection* c, const NewSubmission& sub, int64_t campaign_id,
                   int64_t base_recipe_id, int64_t* round_id) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      c->Prepare("INSERT INTO rounds(campaign_id, kind, base_recipe_id, recipe_name, "
                 "recipe_yaml, submitter, head_config_hash, plan_id, plan_phase, keep_rule, "
                 "order_seed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 &st));
  st.Bind(1, campaign_id)
      .Bind(2, std::string(ToString(sub.kind)))
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
  st.Bind(10, std::string(ToString(sub.keep_rule)));
  st.Bind(11,
          sub.order_seed != 0 ? std::optional<int64_t>(sub.order_seed) : std::optional<int64_t>());
  XV_RETURN_IF_ERROR(st.Run());
  *round_id = c->LastInsertRowId();
  return Status::Ok();
}

// The recipe rows among `recipe_ids` that have a succeeded run in the campaign: only new rows of
// those can reuse a result (rows of this submission are all queued). Rows this submission added
// (`added`) have no run anywhere, so only the others are looked up, one index probe each
// (experiments_recipe): the cost follows the submission, not the campaign's succeeded runs.
Status ReusableRecipes(SqliteConnection* c, int64_t campaign_id,
                       const std::vector<int64_t>& recipe_ids, const std::vector<int64_t>& added,
                       std::set<int64_t>* out) {
  std::set<int64_t> earlier(recipe_ids.begin(), recipe_ids.end());
  for (int64_t id : added) earlier.erase(id);
  if (earlier.empty()) return Status::Ok();
  SqliteStatement st;
  // A superset of what sched::MayReuseResult accepts (it needs a success); ReuseEarlierResult
  // decides.
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT EXISTS (SELECT 1 FROM experiments WHERE campaign_id = ? AND "
                 "recipe_id = ? AND state = 'succeeded')",
                 &st));
  for (int64_t id : earlier) {
    XV_RETURN_IF_ERROR(st.Reset());
    st.Bind(1, campaign_id).Bind(2, id);
    bool row = false;
    XV_RETURN_IF_ERROR(st.Step(&row));
    if (row && st.ColumnInt(0) != 0) out->insert(id);
  }
  return Status::Ok();
}

// Stages experiment `e` of the submission `staging_id` (its recipe row `recipe_id`): the
// columns of its experiments row that do not depend on the campaign, round or submission.
Status StageExperimentRow(SqliteConnection* c, int64_t staging_id, const NewExperiment& e,
                          int64_t recipe_id) {
  SqliteStatement ins;
  XV_RETURN_IF_ERROR(
      c->Prepare("INSERT INTO staged_experiments(staging_id, recipe_id, name, candidate_index, "
                 "replicate, overrides_json, seed, device_requirement, time_budget_s, "
                 "hard_deadline_s, role, config_hash, run_order, run_block) "
                 "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                 &ins));
  ins.Bind(1, staging_id)
      .Bind(2, recipe_id)
      .Bind(3, e.name)
      .Bind(4, e.candidate_index)
      .Bind(5, e.replicate)
      .Bind(6, e.overrides_json)
      .Bind(7, e.seed)
      .Bind(8, e.device_requirement)
      .Bind(9, e.time_budget_s)
      .Bind(10, e.hard_deadline_s)
      .Bind(11, std::string(ToString(e.role)))
      .Bind(12, e.config_hash)
      .Bind(13, e.run_order >= 0 ? std::optional<int64_t>(e.run_order) : std::optional<int64_t>())
      .Bind(14, e.run_block >= 0 ? std::optional<int64_t>(e.run_block) : std::optional<int64_t>());
  return ins.Run().WithContext("experiment " + e.name + ": ");
}

// The experiments rows of the submission staged as `staging_id` (sub.experiments.size() rows,
// recipe_ids[i] the recipe row of the i-th), copied in their order in one statement, so that
// ids->experiment_ids[i] is sub.experiments[i]'s row; each takes an earlier run's result when
// one may be reused.
Status PublishExperimentRows(SqliteConnection* c, const NewSubmission& sub, int64_t staging_id,
                             const std::vector<int64_t>& recipe_ids,
                             const std::vector<int64_t>& added_recipes, SubmissionIds* ids) {
  // Reuse never crosses rounds for the arms of a decided round (issue 14): they all run fresh.
  std::set<int64_t> reusable;
  if (sub.reuse == ResultReuse::kAcrossRounds) {
    XV_RETURN_IF_ERROR(ReusableRecipes(c, ids->campaign_id, recipe_ids, added_recipes, &reusable));
  }
  SqliteStatement copy;
  XV_RETURN_IF_ERROR(c->Prepare(
      "INSERT INTO experiments(campaign_id, round_id, recipe_id, name, candidate_index, "
      "replicate, overrides_json, seed, trainer, device_requirement, priority, time_budget_s, "
      "hard_deadline_s, role, config_hash, run_order, run_block) "
      "SELECT ?1, ?2, recipe_id, name, candidate_index, replicate, overrides_json, seed, ?3, "
      "device_requirement, ?4, time_budget_s, hard_deadline_s, role, config_hash, run_order, "
      "run_block FROM staged_experiments WHERE staging_id = ?5 ORDER BY id",
      &copy));
  copy.Bind(1, ids->campaign_id)
      .Bind(2, ids->round_id)
      .Bind(3, sub.trainer)
      .Bind(4, sub.priority)
      .Bind(5, staging_id);
  XV_RETURN_IF_ERROR(copy.Run());
  SqliteStatement rows;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT id FROM experiments WHERE round_id = ? ORDER BY id", &rows));
  rows.Bind(1, ids->round_id);
  XV_RETURN_IF_ERROR(ForEachRow(
      &rows, [&](const SqliteStatement& row) { ids->experiment_ids.push_back(row.ColumnInt(0)); }));
  if (ids->experiment_ids.size() != sub.experiments.size()) {
    return Status::Internal("submission: " + std::to_string(sub.experiments.size()) +
                            " experiments staged, " + std::to_string(ids->experiment_ids.size()) +
                            " published");
  }
  for (size_t i = 0; i < recipe_ids.size() && !reusable.empty(); ++i) {
    if (reusable.count(recipe_ids[i]) == 0) continue;
    XV_RETURN_IF_ERROR(ReuseEarlierResult(c, ids->campaign_id, recipe_ids[i],
                                          ids->experiment_ids[i], sub.reuse_reason));
  }
  return Status::Ok();
}

// One 'state' event per experiment of the round (queued, or succeeded when reused), in id order
// (what InsertStateEvent writes, in one statement), and the 'submit' audit event.
Status InsertSubmissionEvents(SqliteConnection* c, const NewSubmission& sub,
                              const SubmissionIds& ids) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      c->Prepare("INSERT INTO events(source, experiment_id, attempt, type, json) "
                 "SELECT 'daemon', id, attempt, 'state', json_object('state', state, 'detail', '') "
                 "FROM experiments WHERE round_id = ? ORDER BY id",
                 &st));
  st.Bind(1, ids.round_id);
  XV_RETURN_IF_ERROR(st.Run());
  json audit = {{"campaign", sub.campaign},       {"round_id", ids.round_id},
                {"recipe_name", sub.recipe_name}, {"submitter", sub.submitter},
                {"trainer", sub.trainer},         {"experiments", ids.experiment_ids}};
  SqliteStatement ev;
  XV_RETURN_IF_ERROR(
      c->Prepare("INSERT INTO events(source, type, json) VALUES ('audit', 'submit', ?)", &ev));
  ev.Bind(1, DumpJsonLossless(audit));
  return ev.Run();
}

}  // namespace

// Its staging number, its base recipe's and every experiment's recipe row (recipe_ids[i] for
// sub.experiments[i]), the content-addressed rows it added (deleted again when it fails), and how
// long it held the writer.
struct SubmissionTable::Staged {
  int64_t staging_id = 0;
  int64_t base_recipe_id = 0;
  std::vector<int64_t> recipe_ids;
  std::vector<int64_t> added_recipes;
  std::vector<int64_t> added_sources;
  int transactions = 0;   // staging transactions
  double longest_ms = 0;  // the longest of them
  double publish_ms = 0;
};

Status SubmissionTable::InsertSubmission(const NewSubmission& sub, SubmissionIds* ids) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock one_submission(db_->submissions_mu());
  Staged staged;
  SubmissionIds result;
  Status s;
  if (sub.experiments.size() <= kOneTransactionMaxRows) {
    s = StoreInOneTransaction(sub, &staged, &result);
  } else {
    s = StageRows(sub, &staged);
    if (s.ok()) s = Publish(sub, &staged, &result);
    // Published or refused, the staged rows have served (a failure to drop them is logged: they
    // are invisible, and the next start deletes them).
    if (staged.staging_id != 0) DropStagedRows(staged.staging_id);
  }
  if (s.ok()) {
    if (sub.experiments.size() >= kStageChunkMaxRows) {
      spdlog::info(
          "stored {} experiment rows: {} staging transaction(s), the longest {:.1f} ms; "
          "published in {:.1f} ms",
          sub.experiments.size(), staged.transactions, staged.longest_ms, staged.publish_ms);
    }
    *ids = std::move(result);
    return s;
  }
  if (!staged.added_recipes.empty() || !staged.added_sources.empty()) DeleteAddedRows(staged);
  return s;
}

Status SubmissionTable::DiscardStagedRows() {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock one_submission(db_->submissions_mu());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    XV_RETURN_IF_ERROR(c->Exec("DELETE FROM staged_experiments"));
    if (c->Changes() > 0) {
      spdlog::warn(
          "deleted {} staged experiment row(s) of a submission that was never published "
          "(xvd stopped while writing it)",
          c->Changes());
    }
    return Status::Ok();
  });
}

Status SubmissionTable::StageRows(const NewSubmission& sub, Staged* staged) {
  staged->recipe_ids.assign(sub.experiments.size(), 0);
  std::map<std::string, int64_t> source_ids;  // sha256 -> sources.id
  size_t next = 0;                            // the first experiment not staged yet
  bool first = true;
  while (first || next < sub.experiments.size()) {
    if (!first) std::this_thread::sleep_for(kStageChunkPause);  // Mutex is not fair
    MutexLock lock(db_->mu());
    const auto held_from = std::chrono::steady_clock::now();
    XV_RETURN_IF_ERROR(db_->CheckAcceptsNewWorkLocked());
    SqliteConnection* c = db_->conn();
    std::vector<int64_t> added, added_sources;
    Status chunk = InWriteTransaction(c, [&]() -> Status {
      db_->mu()->AssertHeld();  // the lambda runs inside InWriteTransaction, under `lock`
      if (first) {
        XV_RETURN_IF_ERROR(StageFirstRows(c, sub, staged, &source_ids, &added, &added_sources));
      }
      return StageChunk(c, sub, staged, source_ids, &next, kStageChunkMaxRows,
                        std::chrono::steady_clock::now() + kStageChunkBudget, &added);
    });
    if (!chunk.ok()) return chunk;
    ++staged->transactions;
    staged->longest_ms = std::max(staged->longest_ms, MillisSince(held_from));
    // Only committed rows are listed: a rolled-back chunk added nothing.
    staged->added_recipes.insert(staged->added_recipes.end(), added.begin(), added.end());
    staged->added_sources.insert(staged->added_sources.end(), added_sources.begin(),
                                 added_sources.end());
    first = false;
  }
  return Status::Ok();
}

Status SubmissionTable::StageChunk(SqliteConnection* c, const NewSubmission& sub, Staged* staged,
                                   const std::map<std::string, int64_t>& source_ids, size_t* next,
                                   size_t max_rows, std::chrono::steady_clock::time_point deadline,
                                   std::vector<int64_t>* added_recipes) {
  const size_t chunk_start = *next;
  const size_t end = std::min(sub.experiments.size(), *next + max_rows);
  // At least one row per chunk, however slow the machine.
  for (; *next < end && (*next == chunk_start || std::chrono::steady_clock::now() < deadline);
       ++*next) {
    const NewExperiment& e = sub.experiments[*next];
    std::optional<int64_t> source_id;
    if (!e.source_sha256.empty()) {
      auto it = source_ids.find(e.source_sha256);
      if (it == source_ids.end()) {
        return Status::Internal("experiment " + e.name + ": source " + e.source_sha256 +
                                " is not among the submission's sources");
      }
      source_id = it->second;
    }
    bool inserted = false;
    int64_t* recipe_id = &staged->recipe_ids[*next];
    XV_RETURN_IF_ERROR(InsertRecipe(c, e.recipe_hash, e.recipe_json, e.resolved_json, e.name,
                                    source_id, recipe_id, &inserted));
    if (inserted) added_recipes->push_back(*recipe_id);
    XV_RETURN_IF_ERROR(StageExperimentRow(c, staged->staging_id, e, *recipe_id));
  }
  return Status::Ok();
}

Status SubmissionTable::StoreInOneTransaction(const NewSubmission& sub, Staged* staged,
                                              SubmissionIds* ids) {
  staged->recipe_ids.assign(sub.experiments.size(), 0);
  MutexLock lock(db_->mu());
  const auto held_from = std::chrono::steady_clock::now();
  XV_RETURN_IF_ERROR(db_->CheckAcceptsNewWorkLocked());
  SqliteConnection* c = db_->conn();
  // Rolled back as a whole on failure: nothing it added remains, so nothing is listed to delete.
  std::vector<int64_t> added_sources;
  Status s = InWriteTransaction(c, [&]() -> Status {
    db_->mu()->AssertHeld();  // the lambda runs inside InWriteTransaction, under `lock`
    std::map<std::string, int64_t> source_ids;
    XV_RETURN_IF_ERROR(
        StageFirstRows(c, sub, staged, &source_ids, &staged->added_recipes, &added_sources));
    size_t next = 0;
    XV_RETURN_IF_ERROR(StageChunk(c, sub, staged, source_ids, &next, sub.experiments.size(),
                                  std::chrono::steady_clock::time_point::max(),
                                  &staged->added_recipes));
    XV_RETURN_IF_ERROR(PublishStaged(c, sub, *staged, ids));
    SqliteStatement del;
    XV_RETURN_IF_ERROR(c->Prepare("DELETE FROM staged_experiments WHERE staging_id = ?", &del));
    del.Bind(1, staged->staging_id);
    return del.Run();
  });
  staged->added_recipes.clear();
  staged->transactions = 1;
  staged->publish_ms = MillisSince(held_from);
  return s;
}

Status SubmissionTable::StageFirstRows(SqliteConnection* c, const NewSubmission& sub,
                                       Staged* staged, std::map<std::string, int64_t>* source_ids,
                                       std::vector<int64_t>* added_recipes,
                                       std::vector<int64_t>* added_sources) {
  // One submission at a time (submissions_mu), so a fresh number is one above any left.
  SqliteStatement id;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT COALESCE(MAX(staging_id), 0) + 1 FROM staged_experiments", &id));
  bool row = false;
  XV_RETURN_IF_ERROR(id.Step(&row));
  staged->staging_id = id.ColumnInt(0);
  // The sources first (a few rows): the recipe rows name them.
  for (const auto& [sha256, text] : sub.sources) {
    int64_t source_id = 0;
    bool inserted = false;
    XV_RETURN_IF_ERROR(InsertSourceRow(c, sha256, text, &source_id, &inserted));
    (*source_ids)[sha256] = source_id;
    if (inserted) added_sources->push_back(source_id);
  }
  std::optional<int64_t> base_source;
  if (!sub.base_source_sha256.empty()) {
    auto it = source_ids->find(sub.base_source_sha256);
    if (it != source_ids->end()) base_source = it->second;
  }
  bool inserted = false;
  XV_RETURN_IF_ERROR(InsertRecipe(c, sub.base_hash, sub.base_recipe_json, sub.base_resolved_json,
                                  sub.recipe_name, base_source, &staged->base_recipe_id,
                                  &inserted));
  if (inserted) added_recipes->push_back(staged->base_recipe_id);
  return Status::Ok();
}

Status SubmissionTable::Publish(const NewSubmission& sub, Staged* staged, SubmissionIds* ids) {
  MutexLock lock(db_->mu());
  const auto held_from = std::chrono::steady_clock::now();
  XV_RETURN_IF_ERROR(db_->CheckAcceptsNewWorkLocked());
  SqliteConnection* c = db_->conn();
  Status s = InWriteTransaction(c, [&]() -> Status {
    db_->mu()->AssertHeld();  // the lambda runs inside InWriteTransaction, under `lock`
    return PublishStaged(c, sub, *staged, ids);
  });
  staged->publish_ms = MillisSince(held_from);
  return s;
}

Status SubmissionTable::PublishStaged(SqliteConnection* c, const NewSubmission& sub,
                                      const Staged& staged, SubmissionIds* ids) {
  *ids = SubmissionIds();
  XV_RETURN_IF_ERROR(InsertCampaignOnFirstUse(c, sub, staged.base_recipe_id, &ids->campaign_id));
  XV_RETURN_IF_ERROR(InsertRound(c, sub, ids->campaign_id, staged.base_recipe_id, &ids->round_id));
  XV_RETURN_IF_ERROR(PublishExperimentRows(c, sub, staged.staging_id, staged.recipe_ids,
                                           staged.added_recipes, ids));
  return InsertSubmissionEvents(c, sub, *ids);
}

void SubmissionTable::DropStagedRows(int64_t staging_id) {
  for (bool more = true; more;) {
    MutexLock lock(db_->mu());
    SqliteConnection* c = db_->conn();
    Status s = InWriteTransaction(c, [&]() -> Status {
      SqliteStatement del;
      XV_RETURN_IF_ERROR(c->Prepare(
          "DELETE FROM staged_experiments WHERE id IN (SELECT id FROM staged_experiments WHERE "
          "staging_id = ? ORDER BY id LIMIT ?)",
          &del));
      del.Bind(1, staging_id).Bind(2, kDropChunkRows);
      XV_RETURN_IF_ERROR(del.Run());
      more = c->Changes() == kDropChunkRows;
      return Status::Ok();
    });
    if (!s.ok()) {
      spdlog::warn("staged rows of submission {} stay until the next start: {}", staging_id,
                   s.ToString());
      return;
    }
  }
}

void SubmissionTable::DeleteAddedRows(const Staged& staged) {
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  Status cleanup = InWriteTransaction(c, [&]() -> Status {
    SqliteStatement del;
    XV_RETURN_IF_ERROR(c->Prepare(
        "DELETE FROM recipes WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM campaigns WHERE "
        "base_recipe_id = ?1 OR head_recipe_id = ?1) AND NOT EXISTS (SELECT 1 FROM rounds WHERE "
        "base_recipe_id = ?1) AND NOT EXISTS (SELECT 1 FROM head_history WHERE recipe_id = ?1)",
        &del));
    for (int64_t id : staged.added_recipes) {
      // Reset re-reports the previous Run's error, which was already returned.
      (void)del.Reset();
      del.Bind(1, id);
      XV_RETURN_IF_ERROR(del.Run());  // a row an experiment uses fails the foreign key: kept
    }
    SqliteStatement del_source;
    XV_RETURN_IF_ERROR(c->Prepare(
        "DELETE FROM sources WHERE id = ?1 AND NOT EXISTS (SELECT 1 FROM recipes WHERE "
        "source_id = ?1) AND NOT EXISTS (SELECT 1 FROM trainer_sources WHERE source_id = ?1)",
        &del_source));
    for (int64_t id : staged.added_sources) {
      // Reset re-reports the previous Run's error, which was already returned.
      (void)del_source.Reset();
      del_source.Bind(1, id);
      XV_RETURN_IF_ERROR(del_source.Run());
    }
    return Status::Ok();
  });
  if (!cleanup.ok()) {
    // Unreferenced recipe rows are harmless (content-addressed; a later identical config reuses
    // them): keep the submission's own error.
    spdlog::warn("submission refused; {} recipe and {} source row(s) it added stay: {}",
                 staged.added_recipes.size(), staged.added_sources.size(), cleanup.ToString());
  }
}

}  // namespace xv::store
