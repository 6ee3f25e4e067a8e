// WorkerTable: the workers table (registration, state, heartbeats) and its listing.
// Threading contract: as Database; every method holds its mutex for one statement or transaction.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/run_states.h"
#include "common/status.h"
#include "daemon/store/database.h"
#include "xv/v1/experiments.pb.h"
#include "xv/v1/workers.pb.h"

namespace xv::store {

class WorkerTable {
 public:
  explicit WorkerTable(Database* db) : db_(db) {}

  // Creates or updates the worker row named reg.worker_name(); state becomes idle.
  Status UpsertWorker(const xv::v1::Register& reg, int64_t* worker_id);
  // Sets the worker's state; also stamps last_heartbeat.
  Status SetWorkerState(int64_t worker_id, WorkerState state);
  // Stamps last_heartbeat only.
  Status TouchWorker(int64_t worker_id);
  // At daemon start no worker is connected yet: every worker row becomes offline.
  Status MarkAllWorkersOffline();
  // Every worker ever registered, with its current experiment (0 when none).
  Status ListWorkers(std::vector<xv::v1::WorkerInfo>* out);

 private:
  Database* db_;
};

}  // namespace xv::store
