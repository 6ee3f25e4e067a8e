#include "daemon/store/migration_runner.h"

#include <filesystem>
#include <string>

namespace xv::store {

Status ReadSchemaVersion(SqliteConnection* conn, int* version) {
  SqliteStatement st;
  XV_RETURN_IF_ERROR(conn->Prepare("PRAGMA user_version", &st));
  bool row = false;
  XV_RETURN_IF_ERROR(st.Step(&row));
  *version = row ? static_cast<int>(st.ColumnInt(0)) : 0;
  return Status::Ok();
}

Status ApplyMigrations(SqliteConnection* conn, const std::vector<Migration>& migrations, int* from,
                       int* to) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return Status::InvalidArgument(std::string("migrations: ") + migrations[i].name +
                                     ": expected version " + std::to_string(i + 1) +
                                     " (versions must be 1..N without gaps)");
    }
  }
  const int newest = static_cast<int>(migrations.size());
  int current = 0;
  XV_RETURN_IF_ERROR(ReadSchemaVersion(conn, &current));
  if (from) *from = current;
  if (to) *to = current;
  if (current > newest) {
    return Status::FailedPrecondition(conn->path() + ": database schema version " +
                                      std::to_string(current) + " is newer than this xvd (knows " +
                                      std::to_string(newest) + "); run a newer xvd");
  }
  if (current == newest) return Status::Ok();
  if (current > 0) {
    // A copy of the old schema and data before touching it (replacing the copy a failed earlier
    // attempt left: the failed migration rolled back, so the data is the same).
    const std::string backup = conn->path() + ".before-v" + std::to_string(newest);
    std::error_code ec;
    std::filesystem::remove(backup, ec);
    SqliteStatement st;
    XV_RETURN_IF_ERROR(conn->Prepare("VACUUM INTO ?", &st));
    st.Bind(1, backup);
    XV_RETURN_IF_ERROR(st.Run().WithContext("backup before migration: "));
  }
  for (int v = current + 1; v <= newest; ++v) {
    const Migration& m = migrations[v - 1];
    Status s = InWriteTransaction(conn, [&]() -> Status {
      XV_RETURN_IF_ERROR(conn->Exec(m.sql));
      // user_version takes no bound parameter; v is an integer of this binary, not input.
      return conn->Exec("PRAGMA user_version = " + std::to_string(v));
    });
    if (!s.ok()) return s.WithContext(std::string("migration ") + m.name + ": ");
    if (to) *to = v;
  }
  return Status::Ok();
}

}  // namespace xv::store
