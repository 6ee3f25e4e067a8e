// DatabaseFill: makes an xvd database large fast, for the bench's scale phase. xvd must be stopped.
// The database is one xvd made (its schema is the store's own migrations) and already holds one
// campaign of finished runs made through the RPCs (the bench's event phase). The fill copies that
// campaign's rows with plain SQLite inserts, not RPCs: its rounds, experiments, attempts and
// results again and again (ids shifted, same campaign) until the campaign holds `experiments`
// experiments, then gives every copied experiment `metrics_per_experiment` metrics rows (steps
// 0..n-1, a falling loss) and, when the schema has it (migration 14), the latest_metrics row those
// rows imply, so the tables look like a campaign that ran for months. The copies have no event-log
// rows (a replay of one, as `xvctl show` does, finds none). Columns are
// read from the schema (PRAGMA table_info), so a later migration's columns are copied too.
//
// Thread-safety: a plain function over its own connection.
#pragma once

#include <cstdint>
#include <string>

namespace xv::bench {

struct FillFigures {
  int64_t experiments_added = 0;
  int64_t metrics_added = 0;
  int64_t source_max_id = 0;  // experiments 1..this were made through the RPCs (events stored)
  double seconds = 0;
};

// Copies campaign `campaign`'s rows as described above. Returns "" on success, else what failed.
std::string FillDatabase(const std::string& db_path, const std::string& campaign,
                         int64_t experiments, int64_t metrics_per_experiment, FillFigures* out);

}  // namespace xv::bench
