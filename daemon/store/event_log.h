// The daemon's own rows of the events table: what Watch streams besides the trainer's events.
// Types written (source 'daemon'): state {"state", "detail"?} when an experiment changes state
// (queued at submission, assigned, and its end); decision {"campaign_id", "round_id", "summary",
// "kept_candidate", "kept_experiment_id"} when a round is decided; head {"campaign_id",
// "round_id", "candidate", "experiment_id", "reason"} when a kept candidate becomes the head;
// reclaimed {"state", "worker_id", "worker", "detail", "lost_detail"} when a lost attempt is
// active again (attempt_reclaim_store.cc). ExperimentStore::MarkAttemptLost writes lost
// {"detail", "requeued"}; FinishAttempt writes finished_ignored {"worker_id", "state",
// "failure_kind", "failure_detail" (<= 200 bytes), "exit_code", "attempt_state", "reason"} for a
// Finished it does not apply (its attempt had already ended).
// Thread-safety: as SqliteConnection (the caller holds the store's mutex, inside a transaction).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "daemon/store/sqlite_connection.h"

namespace xv::store {

// Inserts one daemon event; experiment_id 0 stores NULL (campaign-level events).
Status InsertDaemonEvent(SqliteConnection* c, int64_t experiment_id, int attempt,
                         const std::string& type, const std::string& json);

// Inserts a 'state' event carrying the experiment's current state as stored.
Status InsertStateEvent(SqliteConnection* c, int64_t experiment_id, const std::string& detail);

}  // namespace xv::store
