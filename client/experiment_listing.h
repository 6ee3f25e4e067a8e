// ExperimentListing: fetches the experiments matching a filter, page by page, from xvd, or (when
// no daemon answers and a database file exists) straight from the SQLite file opened read-only:
// every one of them (List*), or one page and what follows it (Page*).
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
  int64_t round_id = 0;   // 0 = every round
  int64_t before_id = 0;  // id order, with a limit: only ids below this (0 = from the newest)
  int64_t after_id = 0;   // ListPage* in id order: the first `limit` ids above this instead
  int offset = 0;         // val_bpb order: skip the `offset` best
};

// One page of a filter (ListPage*): `filter.limit` rows (0: 50) at the filter's cursor.
struct ExperimentPage {
  // Id order: the `limit` highest ids below before_id, oldest first (with after_id: the `limit`
  // lowest ids above it); val_bpb order: `limit` rows from `offset`, best first.
  std::vector<v1::Experiment> rows;
  bool more = false;        // rows past this page match
  int64_t matching = -1;    // rows matching from this page on (its own included); -1 unknown
  int64_t next_before = 0;  // id order with more: before_id of the next (older) page
  int next_offset = 0;      // val_bpb order with more: offset of the next page
  int64_t next_after = 0;   // after_id pages with more: after_id of the next page
};

// The page size when the filter's limit is 0.
inline constexpr int kDefaultPageRows = 50;

// Fills `req` with the filter (campaign id when numeric, else the name).
void ApplyFilter(const ExperimentFilter& filter, v1::ListExperimentsRequest* req);

// One page of the filter from the daemon, and whether more match (counted by the daemon).
Status PageFromDaemon(DaemonClient* client, const ExperimentFilter& filter, ExperimentPage* page);
// The same from `db_path` opened read-only.
Status PageFromDatabase(const std::string& db_path, const ExperimentFilter& filter,
                        ExperimentPage* page);

// Every matching experiment from the daemon, in id order.
Status ListFromDaemon(DaemonClient* client, const ExperimentFilter& filter,
                      std::vector<v1::Experiment>* out);

// The same from `db_path` opened read-only (works beside a live daemon; WAL).
Status ListFromDatabase(const std::string& db_path, const ExperimentFilter& filter,
                        std::vector<v1::Experiment>* out);

}  // namespace xv::client
