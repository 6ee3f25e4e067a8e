// RoundTable: rounds, the runs their decision reads, and the decision itself
// (migrations/0002_campaign_rounds.sql).
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

class RoundTable {
 public:
  explicit RoundTable(Database* db) : db_(db) {}

  // Open rounds of campaigns with a policy whose experiments are all terminal.
  Status ListRoundsToDecide(std::vector<RoundToDecide>* out);
  // The round's campaign id, policy, state and the number of unfinished experiments.
  Status GetRoundState(int64_t round_id, RoundToDecide* round, RoundState* state, int* unfinished);
  // Every experiment of the round.
  Status ListRoundRuns(int64_t round_id, std::vector<RoundRun>* out);
  // Finished (succeeded or diverged) runs of `config_hash` in the campaign outside `round_id`,
  // originals only (not reuse rows), for pooling earlier head runs.
  Status ListEarlierConfigRuns(int64_t campaign_id, const std::string& config_hash,
                               int64_t round_id, std::vector<RoundRun>* out);
  // Stores the decision when the round is still open (FailedPrecondition otherwise): the round
  // becomes decided, candidate experiments get decision/decision_reason, and when a candidate is
  // kept the campaign head becomes its recipe with a head_history row.
  Status StoreRoundDecision(const RoundDecisionRecord& record);

 private:
  Database* db_;
};

}  // namespace xv::store
