// PlanTable: plans and the rounds built for them (migrations/0003_plans.sql). See plan_table.h.
#include "daemon/store/plan_table.h"

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "common/run_states.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

// Positions in kPlanSelect.
struct PlanColumn {
  enum : int {
    kId,
    kCampaignId,
    kCampaign,
    kName,
    kYaml,
    kState,
    kCurrentPhase,
    kOutcomesJson,
    kReason,
    kSubmitter,
    kCreatedAt,
    kUpdatedAt,
    kCount
  };
};

constexpr SelectColumn kPlanSelect[] = {
    {PlanColumn::kId, "p.id"},
    {PlanColumn::kCampaignId, "p.campaign_id"},
    {PlanColumn::kCampaign, "c.name"},
    {PlanColumn::kName, "p.name"},
    {PlanColumn::kYaml, "p.yaml"},
    {PlanColumn::kState, "p.state"},
    {PlanColumn::kCurrentPhase, "p.current_phase"},
    {PlanColumn::kOutcomesJson, "p.outcomes_json"},
    {PlanColumn::kReason, "p.reason"},
    {PlanColumn::kSubmitter, "p.submitter"},
    {PlanColumn::kCreatedAt, "p.created_at"},
    {PlanColumn::kUpdatedAt, "p.updated_at"},
};
static_assert(ColumnsInOrder(kPlanSelect, PlanColumn::kCount),
              "kPlanSelect lists PlanColumn in order");

const std::string& PlanSelectSql() {
  static const std::string kSql =
      SelectList(kPlanSelect) + "FROM plans p JOIN campaigns c ON c.id = p.campaign_id ";
  return kSql;
}

Status RowToPlan(const SqliteStatement& st, StoredPlan* p) {
  p->id = st.ColumnInt(PlanColumn::kId);
  p->campaign_id = st.ColumnInt(PlanColumn::kCampaignId);
  p->campaign = st.ColumnText(PlanColumn::kCampaign);
  p->name = st.ColumnText(PlanColumn::kName);
  p->yaml = st.ColumnText(PlanColumn::kYaml);
  XV_RETURN_IF_ERROR(ColumnEnum(st, PlanColumn::kState, ParsePlanState, "plans.state", &p->state));
  p->current_phase = static_cast<int>(st.ColumnInt(PlanColumn::kCurrentPhase));
  p->outcomes_json = st.ColumnText(PlanColumn::kOutcomesJson);
  p->reason = st.ColumnText(PlanColumn::kReason);
  p->submitter = st.ColumnText(PlanColumn::kSubmitter);
  p->created_at = st.ColumnText(PlanColumn::kCreatedAt);
  p->updated_at = st.ColumnText(PlanColumn::kUpdatedAt);
  return Status::Ok();
}

}  // namespace

Status PlanTable::InsertPlan(const StoredPlan& plan, int64_t* id) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement ins;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO plans(campaign_id, name, yaml, submitter) VALUES (?, ?, ?, ?)", &ins));
    ins.Bind(1, plan.campaign_id).Bind(2, plan.name).Bind(3, plan.yaml).Bind(4, plan.submitter);
    XV_RETURN_IF_ERROR(ins.Run());
    *id = c->LastInsertRowId();
    SqliteStatement ev;
    XV_RETURN_IF_ERROR(c->Prepare(
        "INSERT INTO events(source, type, json) VALUES ('audit', 'submit_plan', ?)", &ev));
    ev.Bind(1, DumpJsonLossless(nlohmann::json{{"plan_id", *id},
                                               {"name", plan.name},
                                               {"campaign_id", plan.campaign_id},
                                               {"submitter", plan.submitter}}));
    return ev.Run();
  });
}

Status PlanTable::GetPlan(int64_t id, const std::string& name, StoredPlan* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(
      SelectOneByIdOrName(db_->conn(), PlanSelectSql(), "p.id", "p.name", "plan", id, name, &st));
  return RowToPlan(st, out);
}

Status PlanTable::ListPlans(const std::string& state, std::vector<StoredPlan>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  if (state.empty()) {
    XV_RETURN_IF_ERROR(db_->conn()->Prepare(PlanSelectSql() + "ORDER BY p.id", &st));
  } else {
    XV_RETURN_IF_ERROR(
        db_->conn()->Prepare(PlanSelectSql() + "WHERE p.state = ? ORDER BY p.id", &st));
    st.Bind(1, state);
  }
  return ForEachRow(
      &st, [out](const SqliteStatement& row) { return RowToPlan(row, &out->emplace_back()); });
}

Status PlanTable::ListPlanRounds(int64_t plan_id, std::vector<PlanRound>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  XV_RETURN_IF_ERROR(db_->conn()->Prepare(
      "SELECT rd.id, rd.plan_phase, rd.state, rd.decision_summary, rd.decision_json, "
      "COALESCE(k.name, ''), (SELECT COUNT(*) FROM experiments x WHERE x.round_id = rd.id AND "
      "x.state IN ('queued', 'assigned', 'running')) FROM rounds rd "
      "LEFT JOIN experiments k ON k.id = rd.kept_experiment_id "
      "WHERE rd.plan_id = ? ORDER BY rd.plan_phase",
      &st));
  st.Bind(1, plan_id);
  return ForEachRow(&st, [out](const SqliteStatement& row) -> Status {
    PlanRound& r = out->emplace_back();
    r.round_id = row.ColumnInt(0);
    r.phase = static_cast<int>(row.ColumnInt(1));
    XV_RETURN_IF_ERROR(ColumnEnum(row, 2, ParseRoundState, "rounds.state", &r.state));
    r.decision_summary = row.ColumnText(3);
    r.decision_json = row.ColumnText(4);
    r.kept_candidate = row.ColumnText(5);
    r.unfinished = static_cast<int>(row.ColumnInt(6));
    return Status::Ok();
  });
}

Status PlanTable::UpdatePlan(int64_t plan_id, PlanState expected_state, PlanState state,
                             int current_phase, const std::string& outcomes_json,
                             const std::string& reason, bool* updated) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement up;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE plans SET state = ?, current_phase = ?, outcomes_json = ?, reason = ?, "
                   "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ? AND state = ?",
                   &up));
    up.Bind(1, std::string(ToString(state)))
        .Bind(2, current_phase)
        .Bind(3, outcomes_json)
        .Bind(4, reason)
        .Bind(5, plan_id)
        .Bind(6, std::string(ToString(expected_state)));
    XV_RETURN_IF_ERROR(up.Run());
    *updated = c->Changes() > 0;
    return Status::Ok();
  });
}

}  // namespace xv::store
