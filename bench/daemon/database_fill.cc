#include "bench/daemon/database_fill.h"

#include <sqlite3.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace xv::bench {
namespace {

// One statement with int64 parameters ?1, ?2, ...; returns "" or the error, *first the first
// column of the first row (when asked).
std::string Run(sqlite3* db, const std::string& sql, const std::vector<int64_t>& params,
                int64_t* first = nullptr) {
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    return std::string(sqlite3_errmsg(db)) + " in: " + sql.substr(0, 120);
  }
  // A parameter the statement does not use is skipped (SQLITE_RANGE, ignored).
  for (size_t i = 0; i < params.size(); ++i)
    sqlite3_bind_int64(st, static_cast<int>(i + 1), params[i]);
  int rc = sqlite3_step(st);
  if (rc == SQLITE_ROW && first != nullptr) *first = sqlite3_column_int64(st, 0);
  while (rc == SQLITE_ROW) rc = sqlite3_step(st);
  std::string err =
      rc == SQLITE_DONE ? "" : std::string(sqlite3_errmsg(db)) + " in: " + sql.substr(0, 120);
  sqlite3_finalize(st);
  return err;
}

// The table's column names in schema order.
std::vector<std::string> Columns(sqlite3* db, const std::string& table) {
  std::vector<std::string> cols;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db, ("PRAGMA table_info(" + table + ")").c_str(), -1, &st, nullptr) !=
      SQLITE_OK) {
    return cols;
  }
  while (sqlite3_step(st) == SQLITE_ROW) {
    cols.emplace_back(reinterpret_cast<const char*>(sqlite3_column_text(st, 1)));
  }
  sqlite3_finalize(st);
  return cols;
}

// INSERT INTO table(cols) SELECT <cols, each replaced by its expression in `exprs` when listed>
// FROM table `tail`. A column mapped to "" is left out (an INTEGER PRIMARY KEY gets a new id).
std::string CopySql(sqlite3* db, const std::string& table,
                    const std::map<std::string, std::string>& exprs, const std::string& tail) {
  std::string into, select;
  for (const std::string& c : Columns(db, table)) {
    auto it = exprs.find(c);
    if (it != exprs.end() && it->second.empty()) continue;
    into += (into.empty() ? "" : ", ") + c;
    select += (select.empty() ? "" : ", ") + (it == exprs.end() ? c : it->second);
  }
  return "INSERT INTO " + table + "(" + into + ") SELECT " + select + " FROM " + table + " " + tail;
}

}  // namespace

std::string FillDatabase(const std::string& db_path, const std::string& campaign,
                         int64_t experiments, int64_t metrics_per_experiment, FillFigures* out) {
  const auto start = std::chrono::steady_clock::now();
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READWRITE, nullptr) != SQLITE_OK) {
    std::string err = db_path + ": " + sqlite3_errmsg(db);
    sqlite3_close(db);
    return err;
  }
  sqlite3_busy_timeout(db, 10000);
  std::string err;
  auto fail = [&](const std::string& e) {
    sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db);
    return "fill " + db_path + ": " + e;
  };
  // A bench fill: no fsync per commit.
  sqlite3_exec(db, "PRAGMA synchronous=OFF", nullptr, nullptr, nullptr);
  int64_t cid = 0, src_min = 0, src_max = 0, src_count = 0, have = 0;
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db,
                         "SELECT c.id, MIN(e.id), MAX(e.id), COUNT(e.id) FROM campaigns c "
                         "JOIN experiments e ON e.campaign_id = c.id WHERE c.name = ?",
                         -1, &st, nullptr) != SQLITE_OK) {
    return fail(sqlite3_errmsg(db));
  }
  sqlite3_bind_text(st, 1, campaign.c_str(), -1, SQLITE_TRANSIENT);
  if (sqlite3_step(st) == SQLITE_ROW) {
    cid = sqlite3_column_int64(st, 0);
    src_min = sqlite3_column_int64(st, 1);
    src_max = sqlite3_column_int64(st, 2);
    src_count = sqlite3_column_int64(st, 3);
  }
  sqlite3_finalize(st);
  if (cid == 0 || src_count == 0) return fail("campaign '" + campaign + "' has no experiments");
  int64_t round_min = 0, round_max = 0;
  if (!(err = Run(db, "SELECT MIN(round_id) FROM experiments WHERE campaign_id = ?1", {cid},
                  &round_min))
           .empty() ||
      !(err = Run(db, "SELECT MAX(round_id) FROM experiments WHERE campaign_id = ?1", {cid},
                  &round_max))
           .empty()) {
    return fail(err);
  }
  have = src_count;
  out->source_max_id = src_max;
  // ?1 experiment id shift, ?2 round id shift, ?3 campaign, ?4/?5 source experiment ids, ?6/?7
  // source round ids.
  const std::string rounds_sql =
      CopySql(db, "rounds", {{"id", "id + ?2"}, {"kept_experiment_id", "kept_experiment_id + ?1"}},
              "WHERE id BETWEEN ?6 AND ?7 AND campaign_id = ?3");
  const std::string experiments_sql = CopySql(
      db, "experiments",
      {{"id", "id + ?1"}, {"round_id", "round_id + ?2"}, {"reused_from_id", "reused_from_id + ?1"}},
      "WHERE campaign_id = ?3 AND id BETWEEN ?4 AND ?5");
  const std::string attempts_sql =
      CopySql(db, "attempts", {{"id", ""}, {"experiment_id", "experiment_id + ?1"}},
              "WHERE experiment_id BETWEEN ?4 AND ?5");
  const std::string results_sql =
      CopySql(db, "results", {{"id", ""}, {"experiment_id", "experiment_id + ?1"}},
              "WHERE experiment_id BETWEEN ?4 AND ?5");
  if (!(err = Run(db, "BEGIN IMMEDIATE", {})).empty()) return fail(err);
  while (have < experiments) {
    int64_t top_exp = 0, top_round = 0, last_src = src_max;
    if (!(err = Run(db, "SELECT MAX(id) FROM experiments", {}, &top_exp)).empty() ||
        !(err = Run(db, "SELECT MAX(id) FROM rounds", {}, &top_round)).empty()) {
      return fail(err);
    }
    const int64_t n = std::min(src_count, experiments - have);
    if (n < src_count) {
      if (!(err = Run(db,
                      "SELECT id FROM experiments WHERE campaign_id = ?1 ORDER BY id LIMIT 1 "
                      "OFFSET ?2",
                      {cid, n - 1}, &last_src))
               .empty()) {
        return fail(err);
      }
    }
    const std::vector<int64_t> p = {top_exp + 1 - src_min,
                                    top_round + 1 - round_min,
                                    cid,
                                    src_min,
                                    last_src,
                                    round_min,
                                    round_max};
    for (const std::string* sql : {&rounds_sql, &experiments_sql, &attempts_sql, &results_sql}) {
      if (!(err = Run(db, *sql, p)).empty()) return fail(err);
    }
    have += n;
    out->experiments_added += n;
  }
  if (metrics_per_experiment > 0) {
    // From schema 17 on, metrics is a view; its rows that are no events row live in
    // stored_metrics (a direct table insert, so sqlite3_changes counts them).
    // How many tables named `name` the schema has (0 or 1), in *n.
    auto count_tables = [db](const char* name, int64_t* n) {
      return Run(
          db,
          std::string("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table' AND name = '") +
              name + "'",
          {}, n);
    };
    int64_t has_stored = 0;
    if (!(err = count_tables("stored_metrics", &has_stored)).empty()) return fail(err);
    const std::string sql =
        "WITH RECURSIVE s(x) AS (SELECT 0 UNION ALL SELECT x + 1 FROM s WHERE x + 1 < ?1) "
        "INSERT INTO " +
        std::string(has_stored > 0 ? "stored_metrics" : "metrics") +
        "(experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec, "
        "mfu_percent, progress) SELECT e.id, 1, s.x, 9.0 - 0.001 * s.x, 1.0, 100.0, 20480.0, NULL, "
        "(s.x + 1.0) / ?1 FROM experiments e, s WHERE e.campaign_id = ?2 AND e.id > ?3 "
        "ORDER BY e.id, s.x";
    if (!(err = Run(db, sql, {metrics_per_experiment, cid, src_max})).empty()) return fail(err);
    out->metrics_added = sqlite3_changes(db);
    int64_t has_latest = 0;
    if (!(err = count_tables("latest_metrics", &has_latest)).empty()) return fail(err);
    if (has_latest > 0 &&
        !(err = Run(db,
                    "INSERT INTO latest_metrics(experiment_id, attempt, step, loss, lrm, dt_ms, "
                    "tok_per_sec, mfu_percent, progress, rows) SELECT e.id, 1, ?1 - 1, "
                    "9.0 - 0.001 * (?1 - 1), 1.0, 100.0, 20480.0, NULL, 1.0, ?1 FROM "
                    "experiments e WHERE e.campaign_id = ?2 AND e.id > ?3",
                    {metrics_per_experiment, cid, src_max}))
             .empty()) {
      return fail(err);
    }
  }
  if (!(err = Run(db, "COMMIT", {})).empty()) return fail(err);
  sqlite3_exec(db, "PRAGMA wal_checkpoint(TRUNCATE)", nullptr, nullptr, nullptr);
  sqlite3_close(db);
  out->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return "";
}

}  // namespace xv::bench
