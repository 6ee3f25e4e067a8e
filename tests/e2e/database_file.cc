#include "tests/e2e/database_file.h"

#include <gtest/gtest.h>

namespace xv::e2e {

DatabaseFile::DatabaseFile(const std::string& path, bool writable) {
  const int flags = writable ? SQLITE_OPEN_READWRITE : SQLITE_OPEN_READONLY;
  if (sqlite3_open_v2(path.c_str(), &db_, flags, nullptr) != SQLITE_OK) {
    error_ = path + ": " + (db_ ? sqlite3_errmsg(db_) : "out of memory");
  }
  if (db_) sqlite3_busy_timeout(db_, 5000);
}

DatabaseFile::~DatabaseFile() { sqlite3_close(db_); }

std::vector<std::vector<std::string>> DatabaseFile::Rows(const std::string& sql) {
  std::vector<std::vector<std::string>> rows;
  sqlite3_stmt* st = nullptr;
  if (!error_.empty() || sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) {
    ADD_FAILURE() << "sqlite: " << (error_.empty() ? sqlite3_errmsg(db_) : error_) << " in " << sql;
    return rows;
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    std::vector<std::string> row;
    for (int i = 0; i < sqlite3_column_count(st); ++i) {
      const unsigned char* t = sqlite3_column_text(st, i);
      row.push_back(t ? reinterpret_cast<const char*>(t) : "");
    }
    rows.push_back(std::move(row));
  }
  if (rc != SQLITE_DONE) ADD_FAILURE() << "sqlite: " << sqlite3_errmsg(db_) << " in " << sql;
  sqlite3_finalize(st);
  return rows;
}

std::string DatabaseFile::Value(const std::string& sql) {
  auto rows = Rows(sql);
  return rows.empty() || rows[0].empty() ? "" : rows[0][0];
}

int64_t DatabaseFile::Int(const std::string& sql) {
  const std::string v = Value(sql);
  return v.empty() ? 0 : std::stoll(v);
}

}  // namespace xv::e2e
