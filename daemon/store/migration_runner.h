// Applies schema migrations in order, tracked by PRAGMA user_version.
#pragma once

#include <vector>

#include "common/status.h"
#include "daemon/store/embedded_migrations.h"
#include "daemon/store/sqlite_connection.h"

namespace xv::store {

// Reads PRAGMA user_version.
Status ReadSchemaVersion(SqliteConnection* conn, int* version);

// Brings the database at `conn` to the newest version in `migrations`. Each migration runs in its
// own BEGIN IMMEDIATE transaction together with the user_version update, so a crash leaves the
// database at a whole version. Before migrating a database that already has a schema, copies it
// with VACUUM INTO to
// "<db path>.before-v<N>" (N = the newest version). Fails with FailedPrecondition when the database
// is newer than the newest migration (an older binary must not touch a newer schema), and with
// InvalidArgument when `migrations` are not numbered 1..N. *from / *to (optional) receive the
// versions.
Status ApplyMigrations(SqliteConnection* conn, const std::vector<Migration>& migrations, int* from,
                       int* to);

}  // namespace xv::store
