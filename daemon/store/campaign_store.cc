// ExperimentStore's campaign, round and decision operations (migrations/0002_campaign_rounds.sql).
// Same threading contract as experiment_store.cc: every method holds mu_; writes are one
// BEGIN IMMEDIATE transaction each.
#include <map>
#include <set>
#include <utility>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/bounded_json_or_discarded.h"
#include "daemon/store/event_log.h"
#include "daemon/store/experiment_store.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

#define XV_NOW "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')"

constexpr const char* kCampaignColumns =
    "SELECT c.id, c.name, c.state, c.objective, c.policy_json, c.device_filter, c.trainer, "
    "c.budget_json, COALESCE(b.hash, ''), COALESCE(h.hash, ''), COALESCE(h.recipe_json, ''), "
    "c.created_at, c.max_attempts FROM campaigns c LEFT JOIN recipes b ON b.id = c.base_recipe_id "
    "LEFT JOIN recipes h ON h.id = c.head_recipe_id ";

void RowToCampaign(const SqliteStatement& st, xv::v1::Campaign* c) {
  c->set_id(st.ColumnInt(0));
  c->set_name(st.ColumnText(1));
  c->set_state(st.ColumnText(2));
  c->set_objective(st.ColumnText(3));
  c->set_policy_json(st.ColumnText(4));
  c->set_device_filter(st.ColumnText(5));
  c->set_trainer(st.ColumnText(6));
  c->set_budget_json(st.ColumnText(7));
  c->set_base_recipe_hash(st.ColumnText(8));
  c->set_head_recipe_hash(st.ColumnText(9));
  c->set_head_recipe_json(st.ColumnText(10));
  c->set_created_at(st.ColumnText(11));
  c->set_max_attempts(static_cast<int32_t>(st.ColumnInt(12)));
}

constexpr const char* kTerminalStatesSql =
    "('succeeded', 'diverged', 'failed', 'invalid', 'cancelled', 'timed_out', 'lost')";

constexpr const char* kRunColumns =
    "SELECT e.id, e.recipe_id, COALESCE(e.reused_from_id, 0), e.name, e.role, e.state, "
    "e.config_hash, e.device_name, e.candidate_index, e.replicate, res.val_bpb "
    "FROM experiments e "
    "LEFT JOIN results res ON res.experiment_id = e.id AND res.attempt = e.attempt ";

// A row of kRunColumns.
void RowToRun(const SqliteStatement& st, RoundRun* r) {
  r->experiment_id = st.ColumnInt(0);
  r->recipe_id = st.ColumnInt(1);
  r->reused_from_id = st.ColumnInt(2);
  r->name = st.ColumnText(3);
  r->role = st.ColumnText(4);
  r->state = st.ColumnText(5);
  r->config_hash = st.ColumnText(6);
  r->device_name = st.ColumnText(7);
  r->candidate_index = static_cast<int>(st.ColumnInt(8));
  r->replicate = static_cast<int>(st.ColumnInt(9));
  r->has_val_bpb = !st.IsNull(10);
  r->val_bpb = r->has_val_bpb ? st.ColumnDouble(10) : 0.0;
}

Status ReadRuns(SqliteStatement* st, std::vector<RoundRun>* out) {
  return ForEachRow(st, [out](const SqliteStatement& row) { RowToRun(row, &out->emplace_back()); });
}

Status LookupCampaignId(SqliteConnection* c, int64_t id, const std::string& name, int64_t* out) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      SelectOneByIdOrName(c, "SELECT id FROM campaigns ", "id", "name", "campaign", id, name, &st));
  *out = st.ColumnInt(0);
  return Status::Ok();
}

}  // namespace

Status ExperimentStore::CreateCampaign(const NewCampaign& nc, int64_t* id) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  XV_RETURN_IF_ERROR(CheckAcceptsNewWorkLocked());
  SqliteConnection* c = conn_.get();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement exists;
    XV_RETURN_IF_ERROR(c->Prepare("SELECT id FROM campaigns WHERE name = ?", &exists));
    exists.Bind(1, nc.name);
    bool row = false;
    XV_RETURN_IF_ERROR(exists.Step(&row));
    if (row) return Status::AlreadyExists("name: campaign '" + nc.name + "' already exists");
    SqliteStatement ins_recipe;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT OR IGNORE INTO recipes(hash, recipe_json, resolved_json, name) VALUES (?, ?, ?, ?)",
        &ins_recipe));
    ins_recipe.Bind(1, nc.base_hash)
        .Bind(2, nc.base_recipe_json)
        .Bind(3, nc.base_resolved_json)
        .Bind(4, nc.recipe_name);
    XV_RETURN_IF_ERROR(ins_recipe.Run());
    SqliteStatement sel;
    XV_RETURN_IF_ERROR(c->Prepare("SELECT id FROM recipes WHERE hash = ?", &sel));
    sel.Bind(1, nc.base_hash);
    XV_RETURN_IF_ERROR(sel.Step(&row));
    if (!row) return Status::Internal("recipe " + nc.base_hash + " vanished after insert");
    const int64_t recipe_id = sel.ColumnInt(0);
    SqliteStatement ins;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO campaigns(name, base_recipe_id, head_recipe_id, budget_json, policy_json, "
        "device_filter, trainer, recipe_name, max_attempts) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        &ins));
    ins.Bind(1, nc.name)
        .Bind(2, recipe_id)
        .Bind(3, recipe_id)
        .Bind(4, nc.budget_json)
        .Bind(5, nc.policy_json)
        .Bind(6, nc.device_filter)
        .Bind(7, nc.trainer)
        .Bind(8, nc.recipe_name)
        .Bind(9, nc.max_attempts);
    XV_RETURN_IF_ERROR(ins.Run());
    *id = c->LastInsertRowId();
    SqliteStatement hist;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO head_history(campaign_id, recipe_id, reason) VALUES (?, ?, 'base')", &hist));
    hist.Bind(1, *id).Bind(2, recipe_id);
    XV_RETURN_IF_ERROR(hist.Run());
    SqliteStatement ev;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO events(source, type, json) VALUES ('audit', 'create_campaign', ?)", &ev));
    ev.Bind(1, DumpJsonLossless(nlohmann::json{{"campaign", nc.name}, {"policy", nc.policy_json}}));
    return ev.Run();
  });
}

Status ExperimentStore::GetCampaign(int64_t id, const std::string& name, bool detail,
                                    xv::v1::Campaign* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  int64_t cid = 0;
  XV_RETURN_IF_ERROR(LookupCampaignId(c, id, name, &cid));
  SqliteStatement st;
  XV_RETURN_IF_ERROR(c->Prepare(std::string(kCampaignColumns) + "WHERE c.id = ?", &st));
  st.Bind(1, cid);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (!row) return Status::NotFound("campaign id " + std::to_string(cid) + " vanished");
  RowToCampaign(st, out);
  if (!detail) return Status::Ok();
  SqliteStatement rounds;
  XV_RETURN_IF_ERROR(c->Prepare(
      "SELECT rd.id, rd.kind, rd.state, rd.decision_summary, rd.decision_json, "
      "COALESCE(rd.kept_experiment_id, 0), COALESCE(k.name, ''), COALESCE(b.hash, ''), "
      "(SELECT COUNT(*) FROM experiments x WHERE x.round_id = rd.id), "
      "(SELECT COUNT(*) FROM experiments x WHERE x.round_id = rd.id AND x.state NOT IN " +
          std::string(kTerminalStatesSql) +
          "), rd.created_at, COALESCE(rd.decided_at, '') FROM rounds rd "
          "LEFT JOIN experiments k ON k.id = rd.kept_experiment_id "
          "LEFT JOIN recipes b ON b.id = rd.base_recipe_id WHERE rd.campaign_id = ? ORDER BY rd.id",
      &rounds));
  rounds.Bind(1, cid);
  XV_RETURN_IF_ERROR(ForEachRow(&rounds, [out](const SqliteStatement& row) {
    xv::v1::RoundInfo* r = out->add_rounds();
    r->set_id(row.ColumnInt(0));
    r->set_kind(row.ColumnText(1));
    r->set_state(row.ColumnText(2));
    r->set_decision_summary(row.ColumnText(3));
    r->set_decision_json(row.ColumnText(4));
    r->set_kept_experiment_id(row.ColumnInt(5));
    r->set_kept_candidate(row.ColumnText(6));
    r->set_head_recipe_hash(row.ColumnText(7));
    r->set_experiments(static_cast<int32_t>(row.ColumnInt(8)));
    r->set_unfinished(static_cast<int32_t>(row.ColumnInt(9)));
    r->set_created_at(row.ColumnText(10));
    r->set_decided_at(row.ColumnText(11));
  }));
  SqliteStatement hist;
  XV_RETURN_IF_ERROR(c->Prepare(
      "SELECT r.hash, COALESCE(h.round_id, 0), COALESCE(h.experiment_id, 0), h.candidate, "
      "h.reason, h.created_at FROM head_history h JOIN recipes r ON r.id = h.recipe_id "
      "WHERE h.campaign_id = ? ORDER BY h.id",
      &hist));
  hist.Bind(1, cid);
  return ForEachRow(&hist, [out](const SqliteStatement& row) {
    xv::v1::HeadChange* h = out->add_head_history();
    h->set_recipe_hash(row.ColumnText(0));
    h->set_round_id(row.ColumnInt(1));
    h->set_experiment_id(row.ColumnInt(2));
    h->set_candidate(row.ColumnText(3));
    h->set_reason(row.ColumnText(4));
    h->set_created_at(row.ColumnText(5));
  });
}

Status ExperimentStore::ListCampaigns(std::vector<xv::v1::Campaign>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(std::string(kCampaignColumns) + "ORDER BY c.id", &st));
  return ForEachRow(
      &st, [out](const SqliteStatement& row) { RowToCampaign(row, &out->emplace_back()); });
}

Status ExperimentStore::SetCampaignState(int64_t id, const std::string& name,
                                         const std::string& state) {
  XV_RETURN_IF_ERROR(CheckWritable());
  if (state != "active" && state != "paused") {
    return Status::InvalidArgument("state: must be active or paused, got '" + state + "'");
  }
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  return InWriteTransaction(c, [&]() -> Status {
    int64_t cid = 0;
    XV_RETURN_IF_ERROR(LookupCampaignId(c, id, name, &cid));
    SqliteStatement st;
    XV_RETURN_IF_ERROR(c->Prepare("UPDATE campaigns SET state = ? WHERE id = ?", &st));
    st.Bind(1, state).Bind(2, cid);
    return st.Run();
  });
}

Status ExperimentStore::FindCampaignHead(const std::string& name, bool* found, CampaignHead* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("SELECT c.id, c.state, c.policy_json, c.trainer, COALESCE(h.recipe_json, ''), "
                     "COALESCE(b.recipe_json, ''), c.name, c.budget_json FROM campaigns c "
                     "LEFT JOIN recipes h ON h.id = c.head_recipe_id "
                     "LEFT JOIN recipes b ON b.id = c.base_recipe_id WHERE c.name = ?",
                     &st));
  st.Bind(1, name);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *found = row;
  if (!row) return Status::Ok();
  out->id = st.ColumnInt(0);
  out->state = st.ColumnText(1);
  out->policy_json = st.ColumnText(2);
  out->trainer = st.ColumnText(3);
  out->head_recipe_json = st.ColumnText(4);
  out->base_recipe_json = st.ColumnText(5);
  out->name = st.ColumnText(6);
  out->budget_json = st.ColumnText(7);
  return Status::Ok();
}

Status ExperimentStore::ListRoundsToDecide(std::vector<RoundToDecide>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
      "SELECT rd.id, rd.campaign_id, c.policy_json, rd.head_config_hash, rd.kind, rd.keep_rule "
      "FROM rounds rd JOIN campaigns c ON c.id = rd.campaign_id "
      "WHERE rd.state = 'open' AND c.policy_json <> '{}' "
      "AND EXISTS (SELECT 1 FROM experiments x WHERE x.round_id = rd.id) "
      "AND NOT EXISTS (SELECT 1 FROM experiments x WHERE x.round_id = rd.id AND x.state NOT IN " +
          std::string(kTerminalStatesSql) + ") ORDER BY rd.id",
      &st));
  return ForEachRow(&st, [out](const SqliteStatement& row) {
    RoundToDecide& r = out->emplace_back();
    r.round_id = row.ColumnInt(0);
    r.campaign_id = row.ColumnInt(1);
    r.policy_json = row.ColumnText(2);
    r.head_config_hash = row.ColumnText(3);
    r.kind = row.ColumnText(4);
    r.keep_rule = row.ColumnText(5);
  });
}

Status ExperimentStore::GetRoundState(int64_t round_id, RoundToDecide* round, std::string* state,
                                      int* unfinished) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
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
  *state = st.ColumnText(3);
  *unfinished = static_cast<int>(st.ColumnInt(4));
  round->kind = st.ColumnText(5);
  round->keep_rule = st.ColumnText(6);
  return Status::Ok();
}

Status ExperimentStore::ListRoundRuns(int64_t round_id, std::vector<RoundRun>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare(std::string(kRunColumns) + "WHERE e.round_id = ? ORDER BY e.id", &st));
  st.Bind(1, round_id);
  return ReadRuns(&st, out);
}

Status ExperimentStore::ListEarlierConfigRuns(int64_t campaign_id, const std::string& config_hash,
                                              int64_t round_id, std::vector<RoundRun>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn_->Prepare(
      std::string(kRunColumns) +
          "WHERE e.campaign_id = ? AND e.config_hash = ? AND e.round_id <> ? "
          "AND e.reused_from_id IS NULL AND e.state IN ('succeeded', 'diverged') ORDER BY e.id",
      &st));
  st.Bind(1, campaign_id).Bind(2, config_hash).Bind(3, round_id);
  return ReadRuns(&st, out);
}

Status ExperimentStore::StoreRoundDecision(const RoundDecisionRecord& rec) {
  XV_RETURN_IF_ERROR(CheckWritable());
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement rd;
    XV_RETURN_IF_ERROR(c->Prepare("SELECT campaign_id, state FROM rounds WHERE id = ?", &rd));
    rd.Bind(1, rec.round_id);
    bool row = false;
    XV_RETURN_IF_ERROR(rd.Step(&row));
    if (!row)
      return Status::NotFound("round_id " + std::to_string(rec.round_id) + ": no such round");
    const int64_t campaign_id = rd.ColumnInt(0);
    if (rd.ColumnText(1) != "open") {
      return Status::FailedPrecondition("round " + std::to_string(rec.round_id) + " is already " +
                                        rd.ColumnText(1));
    }
    SqliteStatement up;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE rounds SET state = 'decided', decision_summary = ?, decision_json = ?, "
                   "kept_experiment_id = ?, decided_at = " XV_NOW " WHERE id = ?",
                   &up));
    up.Bind(1, rec.summary).Bind(2, rec.decision_json);
    if (rec.kept_experiment_id != 0) {
      up.Bind(3, rec.kept_experiment_id);
    } else {
      up.Bind(3, std::optional<int64_t>());
    }
    up.Bind(4, rec.round_id);
    XV_RETURN_IF_ERROR(up.Run());
    XV_RETURN_IF_ERROR(InsertDaemonEvent(
        c, 0, 0, "decision",
        DumpJsonLossless(nlohmann::json{{"campaign_id", campaign_id},
                                        {"round_id", rec.round_id},
                                        {"summary", rec.summary},
                                        {"kept_candidate", rec.kept_candidate},
                                        {"kept_experiment_id", rec.kept_experiment_id}})));
    SqliteStatement dec;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE experiments SET decision = ?, decision_reason = ? "
                   "WHERE round_id = ? AND name = ? AND role = 'candidate'",
                   &dec));
    for (const auto& [name, d] : rec.candidates) {
      dec.Reset();
      dec.Bind(1, d.first).Bind(2, d.second).Bind(3, rec.round_id).Bind(4, name);
      XV_RETURN_IF_ERROR(dec.Run());
    }
    if (rec.kept_experiment_id == 0) return Status::Ok();
    SqliteStatement kept;
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT recipe_id, campaign_id, round_id FROM experiments WHERE id = ?", &kept));
    kept.Bind(1, rec.kept_experiment_id);
    XV_RETURN_IF_ERROR(kept.Step(&row));
    if (!row || kept.ColumnInt(1) != campaign_id || kept.ColumnInt(2) != rec.round_id) {
      return Status::InvalidArgument(
          "keep_experiment_id: " + std::to_string(rec.kept_experiment_id) +
          " is not an experiment of round " + std::to_string(rec.round_id));
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
  });
}

Status ExperimentStore::MaxCampaignSeed(int64_t campaign_id, bool* any, int64_t* max_seed) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      conn_->Prepare("SELECT MAX(seed) FROM experiments WHERE campaign_id = ?", &st));
  st.Bind(1, campaign_id);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *any = row && !st.IsNull(0);
  *max_seed = *any ? st.ColumnInt(0) : 0;
  return Status::Ok();
}

Status ExperimentStore::FailureSummary(int64_t campaign_id, const std::string& name,
                                       std::vector<xv::v1::KnobFailure>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  SqliteConnection* c = conn_.get();
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
