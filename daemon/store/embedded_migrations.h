// The schema migrations of xv.db, embedded at build time from migrations/NNNN_name.sql.
// Thread-safety: immutable after first use.
#pragma once

#include <string>
#include <vector>

namespace xv::store {

struct Migration {
  int version;       // NNNN of the file name; versions are 1, 2, 3, ... without gaps
  const char* name;  // "0001_initial"
  const char* sql;   // the file's text
};

// Every migration of this build, sorted by version.
const std::vector<Migration>& EmbeddedMigrations();

}  // namespace xv::store
