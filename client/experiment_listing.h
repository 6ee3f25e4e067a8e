// ExperimentListing: fetches every experiment matching a filter, page by page, from xvd, or (when
// no daemon answers and a database file exists) straight from the SQLite file opened read-only.
// Thread-safety: functions without shared state.
#pragma once

#include <string>
#include <vector>

#include "client/daemon_client.h"
#include "common/status.h"
#include "xv/v1/experiments.pb.h"

namespace xv::client {

struct ExperimentFilter {
  std::string campaign;  // a name, or a numeric campaign id; "" = all
  std::string state;     // "" = all
  int limit = 0;         // keep only the last `limit` (highest ids); 0 = all
  std::string decision;  // keep | discard | pending | control; "" = all
  // "" or "id": id order, `limit` keeps the most recent; "val_bpb": best first (experiments
  // without a result last), `limit` keeps the N best.
  std::string sort;
};

// Fills `req` with the filter (campaign id when numeric, else the name).
void ApplyFilter(const ExperimentFilter& filter, v1::ListExperimentsRequest* req);

// Every matching experiment from the daemon, in id order.
Status ListFromDaemon(DaemonClient* client, const ExperimentFilter& filter,
                      std::vector<v1::Experiment>* out);

// The same from `db_path` opened read-only (works beside a live daemon; WAL).
Status ListFromDatabase(const std::string& db_path, const ExperimentFilter& filter,
                        std::vector<v1::Experiment>* out);

}  // namespace xv::client
