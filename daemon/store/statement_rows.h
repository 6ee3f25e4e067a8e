// Reading the rows of a SqliteStatement, the shape every list and lookup of the store shares:
// ForEachRow steps a prepared statement to its end handing each row to a callback, and
// SelectOneByIdOrName prepares, binds and steps the lookup of one row by id or by name with the
// NotFound error that names what was asked for ("plan id 3: no such plan"); LookupCampaignId and the
// SQL list of terminal states, shared by the tables that read campaigns and rounds.
// Thread-safety: as SqliteStatement and SqliteConnection (the caller holds the store's mutex).
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "daemon/store/sqlite_connection.h"

namespace xv::store {

// Steps `st` (prepared and bound) through all its rows, calling on_row(const SqliteStatement&)
// for each; returns the first Step error, else OK after the last row.
template <typename OnRow>
Status ForEachRow(SqliteStatement* st, OnRow&& on_row) {
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st->Step(&row));
    if (!row) return Status::Ok();
    on_row(static_cast<const SqliteStatement&>(*st));
  }
}

// One row of a table by id or, when id is 0, by name (the newest row of that name, where names
// repeat). `select` is the statement up to its WHERE ("SELECT ... FROM plans p JOIN ... "),
// `id_column` and `name_column` the columns compared ("p.id", "p.name"): constant text of the
// caller, never user input (id and name are bound parameters). On OK *st stands on the
// row, ready for its Column* reads. NotFound "<what> id 3: no such <what>" or
// "<what> 'lr': no such <what>" when there is none.
Status SelectOneByIdOrName(SqliteConnection* conn, const std::string& select,
                           const std::string& id_column, const std::string& name_column,
                           const std::string& what, int64_t id, const std::string& name,
                           SqliteStatement* st);

// The experiment states that end an experiment, as an SQL list for `state IN ...`.
constexpr const char* kTerminalStatesSql =
    "('succeeded', 'diverged', 'failed', 'invalid', 'cancelled', 'timed_out', 'lost')";

// The id of the campaign with this id, or with this name when id is 0; NotFound names what was
// asked ("campaign 'x': no such campaign").
Status LookupCampaignId(SqliteConnection* c, int64_t id, const std::string& name, int64_t* out);

}  // namespace xv::store
