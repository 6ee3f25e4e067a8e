// Reading the rows of a SqliteStatement, the shape every list and lookup of the store shares:
// ForEachRow steps a prepared statement to its end handing each row to a callback, and
// SelectOneByIdOrName prepares, binds and steps the lookup of one row by id or by name with the
// NotFound error that names what was asked for ("plan id 3: no such plan"); LookupCampaignId and
// the SQL list of terminal states, shared by the tables that read campaigns and rounds.
// Thread-safety: as SqliteStatement and SqliteConnection (the caller holds the store's mutex).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

#include "common/status.h"
#include "daemon/store/sqlite_connection.h"

namespace xv::store {

// Steps `st` (prepared and bound) through all its rows, calling on_row(const SqliteStatement&)
// for each; returns the first Step error (or, when on_row returns Status, its first error), else
// OK after the last row.
template <typename OnRow>
Status ForEachRow(SqliteStatement* st, OnRow&& on_row) {
  bool row = false;
  while (true) {
    XV_RETURN_IF_ERROR(st->Step(&row));
    if (!row) return Status::Ok();
    const SqliteStatement& current = *st;
    if constexpr (std::is_same_v<decltype(on_row(current)), Status>) {
      XV_RETURN_IF_ERROR(on_row(current));  // a row it cannot read ends the walk
    } else {
      on_row(current);
    }
  }
}

// Column `col` as one of the enums of common/run_states.h, through its parser
// (ParseExperimentState, ...). DataLoss naming `what` and the text when it is none of the names
// (the schema's CHECK constraints allow only those: the file was changed behind the daemon).
template <typename Enum>
Status ColumnEnum(const SqliteStatement& st, int col, bool (*parse)(std::string_view, Enum*),
                  const char* what, Enum* out) {
  const std::string text = st.ColumnText(col);
  if (parse(text, out)) return Status::Ok();
  return Status::DataLoss(std::string(what) + ": unknown value '" + text + "' in the database");
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

// One column of a SELECT list: its position and its SQL expression. A table of these, listed in
// the order of the positions (ColumnsInOrder checks it at compile time), is the one place where a
// position and its expression are written, so that reads by name cannot drift from the list:
//   struct PlanColumn { enum : int { kId, kName, kCount }; };
//   constexpr SelectColumn kPlanSelect[] = {{PlanColumn::kId, "p.id"}, {PlanColumn::kName,
//   "p.name"}}; static_assert(ColumnsInOrder(kPlanSelect, PlanColumn::kCount));
struct SelectColumn {
  int position;
  const char* sql;
};

// True when columns[i].position == i for every column and there are exactly `count`.
template <size_t N>
constexpr bool ColumnsInOrder(const SelectColumn (&columns)[N], int count) {
  if (static_cast<int>(N) != count) return false;
  for (size_t i = 0; i < N; ++i) {
    if (columns[i].position != static_cast<int>(i)) return false;
  }
  return true;
}

// "SELECT <expr>, <expr>, ... " over `columns`, in order, ready for its FROM clause.
template <size_t N>
std::string SelectList(const SelectColumn (&columns)[N]) {
  std::string sql = "SELECT ";
  for (size_t i = 0; i < N; ++i) {
    if (i > 0) sql += ", ";
    sql += columns[i].sql;
  }
  return sql + " ";
}

// The experiment states that end an experiment, as an SQL list for `state IN ...`.
constexpr const char* kTerminalStatesSql =
    "('succeeded', 'diverged', 'failed', 'invalid', 'cancelled', 'timed_out', 'lost')";

// The id of the campaign with this id, or with this name when id is 0; NotFound names what was
// asked ("campaign 'x': no such campaign").
Status LookupCampaignId(SqliteConnection* c, int64_t id, const std::string& name, int64_t* out);

}  // namespace xv::store
