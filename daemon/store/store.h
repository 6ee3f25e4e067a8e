// Store: xvd's database and its tables, composed (DESIGN.md § Data model). Store opens the
// Database and owns one object per table or concern, each holding the Database*:
//   submissions()  SubmissionTable    what one Submit stores
//   experiments()  ExperimentQueries  lists, lookups, counts, the queue, the failure summary
//   attempts()     AttemptLedger      assign, lose, cancel, trainer events, finish, reclaim
//   workers()      WorkerTable        registration, state and heartbeats of workers
//   campaigns()    CampaignTable      campaigns and their heads
//   rounds()       RoundTable         rounds to decide, their runs, the decision
//   plans()        PlanTable          plans and their rounds
//   events()       EventLog           the event log Watch reads, audit events
//   tokens()       TokenTable         bearer tokens (hashed) and the worker names they own
//   audit()        AuditLog           state-changing and refused calls
//   sources()      SourceTable        code candidates' sources, content-addressed (issue 16)
//   database()     Database           the connection, write faults, WAL upkeep, integrity check
// Threading contract: every table may be used from any thread (Database serialises them). A
// read-only Store (OpenReadOnly) answers reads and fails every write with FailedPrecondition.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "daemon/store/attempt_ledger.h"
#include "daemon/store/audit_log.h"
#include "daemon/store/campaign_table.h"
#include "daemon/store/database.h"
#include "daemon/store/event_log.h"
#include "daemon/store/experiment_queries.h"
#include "daemon/store/plan_table.h"
#include "daemon/store/round_table.h"
#include "daemon/store/source_table.h"
#include "daemon/store/store_rows.h"
#include "daemon/store/submission_table.h"
#include "daemon/store/token_table.h"
#include "daemon/store/worker_table.h"

namespace xv::store {

class Store {
 public:
  // Opens (creating) the database at `path` read-write, checks its integrity and applies the
  // embedded migrations, then deletes what a submission interrupted by a crash staged
  // (SubmissionTable::DiscardStagedRows). Fails when the file is corrupt or newer than this binary.
  static Status Open(const std::string& path, std::unique_ptr<Store>* out);
  // Opens an existing database read-only. Fails when it does not exist, or has no/a newer schema.
  static Status OpenReadOnly(const std::string& path, std::unique_ptr<Store>* out);

  Database& database() { return *db_; }
  SubmissionTable& submissions() { return submissions_; }
  ExperimentQueries& experiments() { return experiments_; }
  AttemptLedger& attempts() { return attempts_; }
  WorkerTable& workers() { return workers_; }
  CampaignTable& campaigns() { return campaigns_; }
  RoundTable& rounds() { return rounds_; }
  PlanTable& plans() { return plans_; }
  EventLog& events() { return events_; }
  TokenTable& tokens() { return tokens_; }
  AuditLog& audit() { return audit_; }
  SourceTable& sources() { return sources_; }

 private:
  explicit Store(std::unique_ptr<Database> db);

  std::unique_ptr<Database> db_;
  SubmissionTable submissions_;
  ExperimentQueries experiments_;
  AttemptLedger attempts_;
  WorkerTable workers_;
  CampaignTable campaigns_;
  RoundTable rounds_;
  PlanTable plans_;
  EventLog events_;
  TokenTable tokens_;
  AuditLog audit_;
  SourceTable sources_;
};

}  // namespace xv::store
