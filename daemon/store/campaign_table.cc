// CampaignTable: campaigns and their heads (migrations/0002_campaign_rounds.sql). See
// campaign_table.h.
#include "daemon/store/campaign_table.h"

#include <algorithm>
#include <map>

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/run_states.h"
#include "daemon/store/event_log.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

// Positions in kCampaignSelect.
struct CampaignColumn {
  enum : int {
    kId,
    kName,
    kState,
    kObjective,
    kPolicyJson,
    kDeviceFilter,
    kTrainer,
    kBudgetJson,
    kBaseHash,
    kHeadHash,
    kHeadRecipeJson,
    kCreatedAt,
    kMaxAttempts,
    kCount
  };
};

constexpr SelectColumn kCampaignSelect[] = {
    {CampaignColumn::kId, "c.id"},
    {CampaignColumn::kName, "c.name"},
    {CampaignColumn::kState, "c.state"},
    {CampaignColumn::kObjective, "c.objective"},
    {CampaignColumn::kPolicyJson, "c.policy_json"},
    {CampaignColumn::kDeviceFilter, "c.device_filter"},
    {CampaignColumn::kTrainer, "c.trainer"},
    {CampaignColumn::kBudgetJson, "c.budget_json"},
    {CampaignColumn::kBaseHash, "COALESCE(b.hash, '')"},
    {CampaignColumn::kHeadHash, "COALESCE(h.hash, '')"},
    {CampaignColumn::kHeadRecipeJson, "COALESCE(h.recipe_json, '')"},
    {CampaignColumn::kCreatedAt, "c.created_at"},
    {CampaignColumn::kMaxAttempts, "c.max_attempts"},
};
static_assert(ColumnsInOrder(kCampaignSelect, CampaignColumn::kCount),
              "kCampaignSelect lists CampaignColumn in order");

const std::string& CampaignSelectSql() {
  static const std::string kSql = SelectList(kCampaignSelect) +
                                  "FROM campaigns c LEFT JOIN recipes b ON b.id = c.base_recipe_id "
                                  "LEFT JOIN recipes h ON h.id = c.head_recipe_id ";
  return kSql;
}

void RowToCampaign(const SqliteStatement& st, xv::v1::Campaign* c) {
  c->set_id(st.ColumnInt(CampaignColumn::kId));
  c->set_name(st.ColumnText(CampaignColumn::kName));
  c->set_state(st.ColumnText(CampaignColumn::kState));
  c->set_objective(st.ColumnText(CampaignColumn::kObjective));
  c->set_policy_json(st.ColumnText(CampaignColumn::kPolicyJson));
  c->set_device_filter(st.ColumnText(CampaignColumn::kDeviceFilter));
  c->set_trainer(st.ColumnText(CampaignColumn::kTrainer));
  c->set_budget_json(st.ColumnText(CampaignColumn::kBudgetJson));
  c->set_base_recipe_hash(st.ColumnText(CampaignColumn::kBaseHash));
  c->set_head_recipe_hash(st.ColumnText(CampaignColumn::kHeadHash));
  c->set_head_recipe_json(st.ColumnText(CampaignColumn::kHeadRecipeJson));
  c->set_created_at(st.ColumnText(CampaignColumn::kCreatedAt));
  c->set_max_attempts(static_cast<int32_t>(st.ColumnInt(CampaignColumn::kMaxAttempts)));
}

}  // namespace

Status CampaignTable::CreateCampaign(const NewCampaign& nc, int64_t* id) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  XV_RETURN_IF_ERROR(db_->CheckAcceptsNewWorkLocked());
  SqliteConnection* c = db_->conn();
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

namespace {

// Each round's runs in their recorded order (rounds stored with one; migration 7). `all`: every
// round of the campaign is in `out`; otherwise only the runs of out's rounds are read.
Status AddRunOrders(SqliteConnection* c, int64_t campaign_id, bool all, xv::v1::Campaign* out) {
  std::map<int64_t, xv::v1::RoundInfo*> rounds;
  nlohmann::json ids = nlohmann::json::array();
  for (auto& r : *out->mutable_rounds()) {
    rounds[r.id()] = &r;
    ids.push_back(r.id());
  }
  if (rounds.empty()) return Status::Ok();
  SqliteStatement st;
  if (all) {
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT round_id, run_order, COALESCE(run_block, 0), id, name FROM experiments "
                   "WHERE campaign_id = ? AND run_order IS NOT NULL ORDER BY round_id, run_order",
                   &st));
    st.Bind(1, campaign_id);
  } else {
    // By the round index (experiments_round), one round at a time: `+campaign_id` keeps the
    // planner off the campaign's indexes, which would read every experiment of the campaign.
    XV_RETURN_IF_ERROR(
        c->Prepare("SELECT round_id, run_order, COALESCE(run_block, 0), id, name FROM experiments "
                   "WHERE round_id IN (SELECT value FROM json_each(?)) AND +campaign_id = ? AND "
                   "run_order IS NOT NULL ORDER BY round_id, run_order",
                   &st));
    st.Bind(1, ids.dump()).Bind(2, campaign_id);
  }
  return ForEachRow(&st, [&rounds](const SqliteStatement& row) {
    const auto it = rounds.find(row.ColumnInt(0));
    if (it == rounds.end()) return;
    xv::v1::RunSlot* slot = it->second->add_run_order();
    slot->set_position(static_cast<int32_t>(row.ColumnInt(1)));
    slot->set_block(static_cast<int32_t>(row.ColumnInt(2)));
    slot->set_experiment_id(row.ColumnInt(3));
    slot->set_arm(row.ColumnText(4));
  });
}

}  // namespace

Status CampaignTable::GetCampaign(int64_t id, const std::string& name, bool detail,
                                  xv::v1::Campaign* out) {
  if (detail) return GetCampaign(id, name, CampaignDetail(), out);
  CampaignDetail none;
  none.rounds = false;
  none.newest_head_changes = 0;
  return GetCampaign(id, name, none, out);
}

Status CampaignTable::GetCampaign(int64_t id, const std::string& name, const CampaignDetail& what,
                                  xv::v1::Campaign* out) {
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  int64_t cid = 0;
  XV_RETURN_IF_ERROR(LookupCampaignId(c, id, name, &cid));
  SqliteStatement st;
  XV_RETURN_IF_ERROR(c->Prepare(CampaignSelectSql() + "WHERE c.id = ?", &st));
  st.Bind(1, cid);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  if (!row) return Status::NotFound("campaign id " + std::to_string(cid) + " vanished");
  RowToCampaign(st, out);
  const bool all_rounds = what.round_ids.empty() && what.newest_rounds <= 0;
  if (what.rounds) {
    // ?1 campaign; ?2 a JSON array of round ids or NULL (every round); ?3 the newest N or 0.
    SqliteStatement rounds;
    XV_RETURN_IF_ERROR(c->Prepare(
        "SELECT rd.id, rd.kind, rd.state, rd.decision_summary, rd.decision_json, "
        "COALESCE(rd.kept_experiment_id, 0), COALESCE(k.name, ''), COALESCE(b.hash, ''), "
        "(SELECT COUNT(*) FROM experiments x WHERE x.round_id = rd.id), "
        "(SELECT COUNT(*) FROM experiments x WHERE x.round_id = rd.id AND x.state NOT IN " +
            std::string(kTerminalStatesSql) +
            "), rd.created_at, COALESCE(rd.decided_at, ''), COALESCE(rd.order_seed, 0), "
            "rd.drift_json FROM rounds rd "
            "LEFT JOIN experiments k ON k.id = rd.kept_experiment_id "
            "LEFT JOIN recipes b ON b.id = rd.base_recipe_id WHERE rd.campaign_id = ?1 "
            "AND (?2 IS NULL OR rd.id IN (SELECT value FROM json_each(?2))) "
            "AND (?3 = 0 OR rd.id IN (SELECT id FROM rounds WHERE campaign_id = ?1 "
            "ORDER BY id DESC LIMIT ?3)) ORDER BY rd.id",
        &rounds));
    rounds.Bind(1, cid);
    if (what.round_ids.empty()) {
      rounds.BindNull(2);
    } else {
      rounds.Bind(2, nlohmann::json(what.round_ids).dump());
    }
    rounds.Bind(3, static_cast<int64_t>(std::max(0, what.newest_rounds)));
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
      r->set_order_seed(row.ColumnInt(12));
      r->set_drift_json(row.ColumnText(13));
    }));
    XV_RETURN_IF_ERROR(AddRunOrders(c, cid, all_rounds, out));
  }
  if (what.newest_head_changes == 0) return Status::Ok();
  SqliteStatement hist;
  XV_RETURN_IF_ERROR(c->Prepare(
      "SELECT * FROM (SELECT r.hash, COALESCE(h.round_id, 0), COALESCE(h.experiment_id, 0), "
      "h.candidate, h.reason, h.created_at, h.id FROM head_history h "
      "JOIN recipes r ON r.id = h.recipe_id WHERE h.campaign_id = ? ORDER BY h.id DESC LIMIT ?) "
      "ORDER BY 7",
      &hist));
  hist.Bind(1, cid).Bind(2, static_cast<int64_t>(what.newest_head_changes));  // -1: no limit
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

Status CampaignTable::CountRounds(std::map<int64_t, RoundCounts>* out) {
  out->clear();
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT campaign_id, COUNT(*), SUM(state = 'open') FROM rounds GROUP BY campaign_id", &st));
  return ForEachRow(&st, [out](const SqliteStatement& row) {
    (*out)[row.ColumnInt(0)] = RoundCounts{row.ColumnInt(1), row.ColumnInt(2)};
  });
}

Status CampaignTable::ListCampaigns(std::vector<xv::v1::Campaign>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(CampaignSelectSql() + "ORDER BY c.id", &st));
  return ForEachRow(
      &st, [out](const SqliteStatement& row) { RowToCampaign(row, &out->emplace_back()); });
}

Status CampaignTable::SetCampaignState(int64_t id, const std::string& name, CampaignState state) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  if (state != CampaignState::kActive && state != CampaignState::kPaused) {
    return Status::InvalidArgument("state: must be active or paused, got '" +
                                   std::string(ToString(state)) + "'");
  }
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    int64_t cid = 0;
    XV_RETURN_IF_ERROR(LookupCampaignId(c, id, name, &cid));
    SqliteStatement st;
    XV_RETURN_IF_ERROR(c->Prepare("UPDATE campaigns SET state = ? WHERE id = ?", &st));
    st.Bind(1, std::string(ToString(state))).Bind(2, cid);
    return st.Run();
  });
}

Status CampaignTable::FindCampaignHead(const std::string& name, bool* found, CampaignHead* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT c.id, c.state, c.policy_json, c.trainer, COALESCE(h.recipe_json, ''), "
      "COALESCE(b.recipe_json, ''), c.name, c.budget_json, COALESCE(hs.sha256, '') "
      "FROM campaigns c LEFT JOIN recipes h ON h.id = c.head_recipe_id "
      "LEFT JOIN sources hs ON hs.id = h.source_id "
      "LEFT JOIN recipes b ON b.id = c.base_recipe_id WHERE c.name = ?",
      &st));
  st.Bind(1, name);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *found = row;
  if (!row) return Status::Ok();
  out->id = st.ColumnInt(0);
  XV_RETURN_IF_ERROR(ColumnEnum(st, 1, ParseCampaignState, "campaigns.state", &out->state));
  out->policy_json = st.ColumnText(2);
  out->trainer = st.ColumnText(3);
  out->head_recipe_json = st.ColumnText(4);
  out->base_recipe_json = st.ColumnText(5);
  out->name = st.ColumnText(6);
  out->budget_json = st.ColumnText(7);
  out->head_source_sha256 = st.ColumnText(8);
  return Status::Ok();
}

Status CampaignTable::MaxCampaignSeed(int64_t campaign_id, bool* any, int64_t* max_seed) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      db_->conn()->Prepare("SELECT MAX(seed) FROM experiments WHERE campaign_id = ?", &st));
  st.Bind(1, campaign_id);
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *any = row && !st.IsNull(0);
  *max_seed = *any ? st.ColumnInt(0) : 0;
  return Status::Ok();
}

}  // namespace xv::store
