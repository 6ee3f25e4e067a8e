// RoundTable: rounds, the runs a decision reads and the decision itself
// (migrations/0002_campaign_rounds.sql). See round_table.h.
#include "daemon/store/round_table.h"

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "common/run_states.h"
#include "daemon/store/event_log.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

// Positions in kRunSelect.
struct RunColumn {
  enum : int {
    kExperimentId,
    kRecipeId,
    kReusedFromId,
    kName,
    kRole,
    kState,
    kConfigHash,
    kDeviceName,
    kCandidateIndex,
    kReplicate,
    kValBpb,
    kHasResult,
    kTokPerSec,
    kNumSteps,
    kStartedS,
    kOverridesJson,
    kCount
  };
};

constexpr SelectColumn kRunSelect[] = {
    {RunColumn::kExperimentId, "e.id"},
    {RunColumn::kRecipeId, "e.recipe_id"},
    {RunColumn::kReusedFromId, "COALESCE(e.reused_from_id, 0)"},
    {RunColumn::kName, "e.name"},
    {RunColumn::kRole, "e.role"},
    {RunColumn::kState, "e.state"},
    {RunColumn::kConfigHash, "e.config_hash"},
    {RunColumn::kDeviceName, "e.device_name"},
    {RunColumn::kCandidateIndex, "e.candidate_index"},
    {RunColumn::kReplicate, "e.replicate"},
    {RunColumn::kValBpb, "res.val_bpb"},
    {RunColumn::kHasResult, "res.experiment_id IS NOT NULL"},
    {RunColumn::kTokPerSec, "COALESCE(res.tok_per_sec, 0)"},
    {RunColumn::kNumSteps, "COALESCE(res.num_steps, 0)"},
    // Seconds since the epoch with milliseconds (the stored times are ISO-8601 UTC).
    {RunColumn::kStartedS,
     "COALESCE((julianday(COALESCE(e.started_at, e.assigned_at)) - 2440587.5) * 86400.0, 0)"},
    {RunColumn::kOverridesJson, "e.overrides_json"},
};
static_assert(ColumnsInOrder(kRunSelect, RunColumn::kCount), "kRunSelect lists RunColumn in order");

const std::string& RunSelectSql() {
  static const std::string kSql = SelectList(kRunSelect) +
                                  "FROM experiments e LEFT JOIN results res ON res.experiment_id = "
                                  "e.id AND res.attempt = e.attempt ";
  return kSql;
}

// A row of RunSelectSql().
Status RowToRun(const SqliteStatement& st, RoundRun* r) {
  r->experiment_id = st.ColumnInt(RunColumn::kExperimentId);
  r->recipe_id = st.ColumnInt(RunColumn::kRecipeId);
  r->reused_from_id = st.ColumnInt(RunColumn::kReusedFromId);
  r->name = st.ColumnText(RunColumn::kName);
  XV_RETURN_IF_ERROR(ColumnEnum(st, RunColumn::kRole, ParseRunRole, "experiments.role", &r->role));
  XV_RETURN_IF_ERROR(
      ColumnEnum(st, RunColumn::kState, ParseExperimentState, "experiments.state", &r->state));
  r->config_hash = st.ColumnText(RunColumn::kConfigHash);
  r->device_name = st.ColumnText(RunColumn::kDeviceName);
  r->candidate_index = static_cast<int>(st.ColumnInt(RunColumn::kCandidateIndex));
  r->replicate = static_cast<int>(st.ColumnInt(RunColumn::kReplicate));
  r->has_val_bpb = !st.IsNull(RunColumn::kValBpb);
  r->val_bpb = r->has_val_bpb ? st.ColumnDouble(RunColumn::kValBpb) : 0.0;
  r->has_result = st.ColumnInt(RunColumn::kHasResult) != 0;
  r->tok_per_sec = st.ColumnDouble(RunColumn::kTokPerSec);
  r->num_steps = st.ColumnInt(RunColumn::kNumSteps);
  r->started_s = st.ColumnDouble(RunColumn::kStartedS);
  r->overrides_json = st.ColumnText(RunColumn::kOverridesJson);
  return Status::Ok();
}

Status ReadRuns(SqliteStatement* st, std::vector<RoundRun>* out) {
  return ForEachRow(
      st, [out](const SqliteStatement& row) { return RowToRun(row, &out->emplace_back()); });
}

// The kept candidate becomes the campaign's head: its recipe, a head_history row and a 'head'
// daemon event. InvalidArgument when the kept experiment is not of this round.
Status MoveHeadToKept(SqliteConnection* c, int64_t campaign_id, const RoundDecisionRecord& rec) {
  bool row = false;
  SqliteStatement kept;
  XV_RETURN_IF_ERROR(
      c->Prepare("SELECT recipe_id, campaign_id, round_id FROM experiments WHERE id = ?", &kept));
  kept.Bind(1, rec.kept_experiment_id);
  XV_RETURN_IF_ERROR(kept.Step(&row));
  if (!row || kept.ColumnInt(1) != campaign_id || kept.ColumnInt(2) != rec.round_id) {
    return Status::InvalidArgument("keep_experiment_id: " + std::to_string(rec.kept_experiment_id) +
                                   " is not an experiment of round " +
                                   std::to_string(rec.round_id));
  }
  const int64_t recipe_id = kept.ColumnInt(0);
  SqliteStatement head;
  XV_RETURN_IF_ERROR(c->Prepare("UPDATE campaigns SET head_recipe_id = ? WHERE id = ?", &head));
  head.Bind(1, recipe_id).Bind(2, campaign_id);
  XV_RETURN_IF_ERROR(head.Run());
  SqliteStatement hist;
  XV_RETURN_IF_ERROR(c->Prepare(
      "INSERT INTO head_history(campaign_id, recipe_id, round_id, experiment_id, candidate, "
      "reason) VALUES (?, ?, ?, ?, ?, ?)",
      &hist));
  hist.Bind(1, campaign_id)
      .Bind(2, recipe_id)
      .Bind(3, rec.round_id)
      .Bind(4, rec.kept_experiment_id)
      .Bind(5, rec.kept_candidate)
      .Bind(6, rec.head_reason);
  XV_RETURN_IF_ERROR(hist.Run());
  return InsertDaemonEvent(
      c, 0, 0, "head",
      DumpJsonLossless(nlohmann::json{{"campaign_id", campaign_id},
                                      {"round_id", rec.round_id},
                                      {"candidate", rec.kept_candidate},
                                      {"experiment_id", rec.kept_experiment_id},
                                      {"reason", rec.head_reason}}));
}

}  // namespace

Status RoundTable::ListRoundsToDecide(std::vector<RoundToDecide>* out) {
  out->clear();
  ReadLease read = db_->Read();  // a decision re-reads the round's state in its transaction
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      "SELECT rd.id, rd.campaign_id, c.policy_json, rd.head_config_hash, rd.kind, rd.keep_rule "
      // From the campaigns with a policy to their open rounds (migration 8's rounds_open): rounds
      // of campaigns without a policy stay open for good and are never read here.
      "FROM campaigns c CROSS JOIN rounds rd INDEXED BY rounds_open ON rd.campaign_id = c.id "
      "WHERE rd.state = 'open' AND c.policy_json <> '{}' "
      "AND EXISTS (SELECT 1 FROM experiments x WHERE x.round_id = rd.id) "
      "AND NOT EXISTS (SELECT 1 FROM experiments x WHERE x.round_id = rd.id AND x.state NOT IN " +
          std::string(kTerminalStatesSql) + ") ORDER BY rd.id",
      &st));
  return ForEachRow(&st, [out](const SqliteStatement& row) -> Status {
    RoundToDecide& r = out->emplace_back();
    r.round_id = row.ColumnInt(0);
    r.campaign_id = row.ColumnInt(1);
    r.policy_json = row.ColumnText(2);
    r.head_config_hash = row.ColumnText(3);
    XV_RETURN_IF_ERROR(ColumnEnum(row, 4, ParseRoundKind, "rounds.kind", &r.kind));
    return ColumnEnum(row, 5, ParseKeepRule, "rounds.keep_rule", &r.keep_rule);
  });
}

Status RoundTable::GetRoundState(int64_t round_id, RoundToDecide* round, RoundState* state,
                                 int* unfinished) {
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      "SELECT rd.campaign_id, c.policy_json, rd.head_config_hash, rd.state, "
      "(SELECT COUNT(*) FROM experiments x WHERE x.round_id = rd.id AND x.state NOT IN " +
          std::string(kTerminalStatesSql) +
          "), rd.kind, rd.keep_rule FROM rounds rd JOIN campaigns c ON c.id = rd.campaign_id "
          "WHERE rd.id = ?",
      &st));
  st.Bind(1, round_id);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (!row) return Status::NotFound("round_id " + std::to_string(round_id) + ": no such round");
  round->round_id = round_id;
  round->campaign_id = st.ColumnInt(0);
  round->policy_json = st.ColumnText(1);
  round->head_config_hash = st.ColumnText(2);
  XV_RETURN_IF_ERROR(ColumnEnum(st, 3, ParseRoundState, "rounds.state", state));
  *unfinished = static_cast<int>(st.ColumnInt(4));
  XV_RETURN_IF_ERROR(ColumnEnum(st, 5, ParseRoundKind, "rounds.kind", &round->kind));
  return ColumnEnum(st, 6, ParseKeepRule, "rounds.keep_rule", &round->keep_rule);
}

Status RoundTable::ListRoundRuns(int64_t round_id, std::vector<RoundRun>* out) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      read.conn()->Prepare(RunSelectSql() + "WHERE e.round_id = ? ORDER BY e.id", &st));
  st.Bind(1, round_id);
  return ReadRuns(&st, out);
}

Status RoundTable::ListEarlierConfigRuns(int64_t campaign_id, const std::string& config_hash,
                                         int64_t round_id, std::vector<RoundRun>* out) {
  out->clear();
  ReadLease read = db_->Read();
  SqliteStatement st;
  XV_RETURN_IF_ERROR(read.conn()->Prepare(
      RunSelectSql() +
          "WHERE e.campaign_id = ? AND e.config_hash = ? AND e.round_id <> ? "
          "AND e.reused_from_id IS NULL AND e.state IN ('succeeded', 'diverged') ORDER BY e.id",
      &st));
  st.Bind(1, campaign_id).Bind(2, config_hash).Bind(3, round_id);
  return ReadRuns(&st, out);
}

Status RoundTable::StoreRoundDecision(const RoundDecisionRecord& rec) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement rd;
    XV_RETURN_IF_ERROR(c->Prepare("SELECT campaign_id, state FROM rounds WHERE id = ?", &rd));
    rd.Bind(1, rec.round_id);
    bool row = false;
    XV_RETURN_IF_ERROR(rd.Step(&row));
    if (!row)
      return Status::NotFound("round_id " + std::to_string(rec.round_id) + ": no such round");
    const int64_t campaign_id = rd.ColumnInt(0);
    RoundState state = RoundState::kOpen;
    XV_RETURN_IF_ERROR(ColumnEnum(rd, 1, ParseRoundState, "rounds.state", &state));
    if (state != RoundState::kOpen) {
      return Status::FailedPrecondition("round " + std::to_string(rec.round_id) + " is already " +
                                        rd.ColumnText(1));
    }
    SqliteStatement up;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE rounds SET state = 'decided', decision_summary = ?, decision_json = ?, "
                   "kept_experiment_id = ?, drift_json = ?, decided_at = " XV_NOW " WHERE id = ?",
                   &up));
    up.Bind(1, rec.summary).Bind(2, rec.decision_json).Bind(4, rec.drift_json);
    if (rec.kept_experiment_id != 0) {
      up.Bind(3, rec.kept_experiment_id);
    } else {
      up.Bind(3, std::optional<int64_t>());
    }
    up.Bind(5, rec.round_id);
    XV_RETURN_IF_ERROR(up.Run());
    // The event carries the round's drift figures (issue 14) so that `xvctl watch` shows them.
    nlohmann::json decision_event = {{"campaign_id", campaign_id},
                                     {"round_id", rec.round_id},
                                     {"summary", rec.summary},
                                     {"kept_candidate", rec.kept_candidate},
                                     {"kept_experiment_id", rec.kept_experiment_id}};
    const nlohmann::json drift = ParseBoundedJsonOrDiscarded(rec.drift_json);
    if (drift.is_object()) decision_event["drift"] = drift;
    XV_RETURN_IF_ERROR(InsertDaemonEvent(c, 0, 0, "decision", DumpJsonLossless(decision_event)));
    SqliteStatement dec;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE experiments SET decision = ?, decision_reason = ? "
                   "WHERE round_id = ? AND name = ? AND role = 'candidate'",
                   &dec));
    for (const auto& [name, d] : rec.candidates) {
      // Reset re-reports the previous Run's error, which was already returned.
      (void)dec.Reset();
      dec.Bind(1, std::string(ToString(d.first)))
          .Bind(2, d.second)
          .Bind(3, rec.round_id)
          .Bind(4, name);
      XV_RETURN_IF_ERROR(dec.Run());
    }
    if (rec.kept_experiment_id == 0) return Status::Ok();
    return MoveHeadToKept(c, campaign_id, rec);
  });
}

}  // namespace xv::store
