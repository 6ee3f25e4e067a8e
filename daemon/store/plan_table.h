// PlanTable: plans and the rounds built for their phases (migrations/0003_plans.sql).
// Threading contract: as Database; writes are one BEGIN IMMEDIATE transaction each.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/run_states.h"
#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/store_rows.h"

namespace xv::store {

class PlanTable {
 public:
  explicit PlanTable(Database* db) : db_(db) {}

  // Stores a new plan (state running, phase 0) of an existing campaign; *id receives its id.
  Status InsertPlan(const StoredPlan& plan, int64_t* id);
  // By id, or the newest plan of that name when id is 0. NotFound names what was asked.
  Status GetPlan(int64_t id, const std::string& name, StoredPlan* out);
  // Every plan (state "" = all), oldest first.
  Status ListPlans(const std::string& state, std::vector<StoredPlan>* out);
  // The rounds built for the plan, by phase.
  Status ListPlanRounds(int64_t plan_id, std::vector<PlanRound>* out);
  // Records progress when the plan is still in `expected_state` (*updated = false otherwise, e.g.
  // cancelled meanwhile): state, current phase, outcomes and reason in one write.
  Status UpdatePlan(int64_t plan_id, PlanState expected_state, PlanState state, int current_phase,
                    const std::string& outcomes_json, const std::string& reason, bool* updated);

 private:
  Database* db_;
};

}  // namespace xv::store
