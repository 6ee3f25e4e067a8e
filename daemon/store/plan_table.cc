// PlanTable: plans and the rounds built for them (migrations/0003_plans.sql). See plan_table.h.
#include "daemon/store/plan_table.h"

#include <nlohmann/json.hpp>

#include "common/bounded_json.h"
#include "daemon/store/statement_rows.h"

namespace xv::store {
namespace {

constexpr const char* kPlanColumns =
    "SELECT p.id, p.campaign_id, c.name, p.name, p.yaml, p.state, p.current_phase, "
    "p.outcomes_json, p.reason, p.submitter, p.created_at, p.updated_at "
    "FROM plans p JOIN campaigns c ON c.id = p.campaign_id ";

void RowToPlan(const SqliteStatement& st, StoredPlan* p) {
  p->id = st.ColumnInt(0);
  p->campaign_id = st.ColumnInt(1);
  p->campaign = st.ColumnText(2);
  p->name = st.ColumnText(3);
  p->yaml = st.ColumnText(4);
  p->state = st.ColumnText(5);
  p->current_phase = static_cast<int>(st.ColumnInt(6));
  p->outcomes_json = st.ColumnText(7);
  p->reason = st.ColumnText(8);
  p->submitter = st.ColumnText(9);
  p->created_at = st.ColumnText(10);
  p->updated_at = st.ColumnText(11);
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
      SelectOneByIdOrName(db_->conn(), kPlanColumns, "p.id", "p.name", "plan", id, name, &st));
  RowToPlan(st, out);
  return Status::Ok();
}

Status PlanTable::ListPlans(const std::string& state, std::vector<StoredPlan>* out) {
  MutexLock lock(db_->mu());
  SqliteStatement st;
  if (state.empty()) {
    XV_RETURN_IF_ERROR(db_->conn()->Prepare(std::string(kPlanColumns) + "ORDER BY p.id", &st));
  } else {
    XV_RETURN_IF_ERROR(
        db_->conn()->Prepare(std::string(kPlanColumns) + "WHERE p.state = ? ORDER BY p.id", &st));
    st.Bind(1, state);
  }
  return ForEachRow(&st,
                    [out](const SqliteStatement& row) { RowToPlan(row, &out->emplace_back()); });
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
  return ForEachRow(&st, [out](const SqliteStatement& row) {
    PlanRound& r = out->emplace_back();
    r.round_id = row.ColumnInt(0);
    r.phase = static_cast<int>(row.ColumnInt(1));
    r.state = row.ColumnText(2);
    r.decision_summary = row.ColumnText(3);
    r.decision_json = row.ColumnText(4);
    r.kept_candidate = row.ColumnText(5);
    r.unfinished = static_cast<int>(row.ColumnInt(6));
  });
}

Status PlanTable::UpdatePlan(int64_t plan_id, const std::string& expected_state,
                                   const std::string& state, int current_phase,
                                   const std::string& outcomes_json, const std::string& reason,
                                   bool* updated) {
  XV_RETURN_IF_ERROR(db_->CheckWritable());
  MutexLock lock(db_->mu());
  SqliteConnection* c = db_->conn();
  return InWriteTransaction(c, [&]() -> Status {
    SqliteStatement up;
    XV_RETURN_IF_ERROR(
        c->Prepare("UPDATE plans SET state = ?, current_phase = ?, outcomes_json = ?, reason = ?, "
                   "updated_at = strftime('%Y-%m-%dT%H:%M:%fZ', 'now') WHERE id = ? AND state = ?",
                   &up));
    up.Bind(1, state)
        .Bind(2, current_phase)
        .Bind(3, outcomes_json)
        .Bind(4, reason)
        .Bind(5, plan_id)
        .Bind(6, expected_state);
    XV_RETURN_IF_ERROR(up.Run());
    *updated = c->Changes() > 0;
    return Status::Ok();
  });
}

}  // namespace xv::store
