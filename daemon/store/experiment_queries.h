// ExperimentQueries: the reads of experiments: lists and lookups for the API and xvctl, counts for
// the status line, the queue and active attempts for the scheduler, and the failure summary.
// Every method replaces what `out` held. Reads run on a connection lent by Database::Read (never
// behind the writer's mutex) and see what was committed when they started.
// Threading contract: as Database; every method may be called from any thread.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/store_rows.h"
#include "xv/v1/experiments.pb.h"

namespace xv::store {

class ExperimentQueries {
 public:
  explicit ExperimentQueries(Database* db) : db_(db) {}

  // Filters of `req` as documented in experiments.proto; ordered by id.
  Status ListExperiments(const xv::v1::ListExperimentsRequest& req,
                         std::vector<xv::v1::Experiment>* out);
  // How many experiments match the filters of `req` past its cursor (after_id, in the direction
  // of `descending`), ignoring limit and offset: the rows of this page and of every page after
  // it. Counted in SQL through the same indexes as ListExperiments.
  Status CountExperiments(const xv::v1::ListExperimentsRequest& req, int64_t* out);
  // NotFound when no experiment has this id.
  Status GetExperiment(int64_t id, xv::v1::Experiment* out);
  // The submitter recorded with the round of experiment `id` (the caller's token label,
  // "token:ID", when a token submitted it; see daemon/api/authorizer.h). NotFound for no such id.
  Status SubmitterOf(int64_t id, std::string* submitter);
  // Experiments per state ("queued" -> 3, ...; states without experiments are left out), from
  // migration 11's counters: a few rows, whatever the size of the table.
  Status CountByState(std::map<std::string, int64_t>* out);
  // Queued experiments per trainer ("libtorch" -> 3, ...; an empty trainer counts as "libtorch"):
  // from migration 11's counters, for the status line about trainers no connected worker offers.
  Status CountQueuedByTrainer(std::map<std::string, int64_t>* out);
  // Queued experiments of active campaigns in dispatch order (priority, round, the round's run
  // order, id); the first `limit` of them (0: all). Read from migration 8's queue index, so the
  // cost follows `limit`, not the length of the queue.
  Status ListQueued(std::vector<QueuedExperiment>* out, size_t limit = 0);
  // Attempts in state assigned or running.
  Status ListActive(std::vector<ActiveAttempt>* out);
  // How many attempts each worker ran of each of `candidates` (round id, candidate name: those
  // of the queue's head that a scheduling pass places). One read per candidate through migration
  // 15's index of attempted experiments by round and name: the cost follows the attempts of
  // those candidates, not the table, the queue or the size of their rounds.
  Status CountCandidateAttempts(const std::set<std::pair<int64_t, std::string>>& candidates,
                                std::vector<CandidateWorkerCount>* out);
  // Per knob value of the overrides: runs ending diverged, failed/invalid/lost, timed_out, and
  // the NaN rate. campaign_id 0 and name "" = every campaign.
  Status FailureSummary(int64_t campaign_id, const std::string& name,
                        std::vector<xv::v1::KnobFailure>* out);

 private:
  Database* db_;
};

}  // namespace xv::store
