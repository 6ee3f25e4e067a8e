// The daemon's own rows of the events table: what Watch streams besides the trainer's events.
// Types written (source 'daemon'): state {"state", "detail"?} when an experiment changes state
// (queued at submission, assigned, and its end); decision {"campaign_id", "round_id", "summary",
// "kept_candidate", "kept_experiment_id"} when a round is decided; head {"campaign_id",
// "round_id", "candidate", "experiment_id", "reason"} when a kept candidate becomes the head;
// reclaimed {"state", "worker_id", "worker", "detail", "lost_detail"} when a lost attempt is
// active again (attempt_reclaim.cc). AttemptLedger::MarkAttemptLost writes lost
// {"detail", "requeued"}; FinishAttempt writes finished_ignored {"worker_id", "state",
// "failure_kind", "failure_detail" (<= 200 bytes), "exit_code", "attempt_state", "reason"} for a
// Finished it does not apply (its attempt had already ended).
// EventLog reads the events table for Watch and appends audit events.
// Thread-safety: the free functions as SqliteConnection (the caller holds the database's mutex,
// inside a transaction); EventLog as Database.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/sqlite_connection.h"
#include "daemon/store/store_rows.h"

namespace xv::store {

// Inserts one daemon event; experiment_id 0 stores NULL (campaign-level events).
Status InsertDaemonEvent(SqliteConnection* c, int64_t experiment_id, int attempt,
                         const std::string& type, const std::string& json);

// Inserts a 'state' event carrying the experiment's current state as stored.
Status InsertStateEvent(SqliteConnection* c, int64_t experiment_id, const std::string& detail);

class EventLog {
 public:
  explicit EventLog(Database* db) : db_(db) {}

  // Events with after_id < id (and id <= up_to_id unless it is 0), oldest first, at most `limit`.
  Status ListEventsAfter(int64_t after_id, int64_t up_to_id, int limit,
                         std::vector<StoredEvent>* out);
  // The same, of one experiment only (every attempt): read through the events table's
  // (experiment_id, attempt, seq) index, so its cost follows the experiment's events, not the log.
  Status ListExperimentEventsAfter(int64_t experiment_id, int64_t after_id, int64_t up_to_id,
                                   int limit, std::vector<StoredEvent>* out);
  // The newest event id (0 when there is none).
  Status MaxEventId(int64_t* id);
  // True when the campaign (0 = every campaign) has no experiment queued, assigned or running and
  // no open round that the daemon decides automatically once its experiments are terminal.
  Status ScopeIdle(int64_t campaign_id, bool* idle);
  // Appends an audit/daemon event (not a trainer event).
  Status AppendAudit(const std::string& type, const std::string& json);

 private:
  Database* db_;
};

}  // namespace xv::store
