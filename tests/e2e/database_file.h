// DatabaseFile: the daemon's SQLite file opened with the sqlite3 C API for end-to-end assertions,
// read-only by default (WAL: it reads while xvd writes), read-write for a test that edits a row.
// A failing open or query is a test failure naming the query. Thread-safety: one thread.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <string>
#include <vector>

namespace xv::e2e {

class DatabaseFile {
 public:
  explicit DatabaseFile(const std::string& path, bool writable = false);
  ~DatabaseFile();
  DatabaseFile(const DatabaseFile&) = delete;
  DatabaseFile& operator=(const DatabaseFile&) = delete;

  // Every row, every column as text (NULL -> "").
  std::vector<std::vector<std::string>> Rows(const std::string& sql);
  // The first column of the first row ("" when there is none, or it is NULL).
  std::string Value(const std::string& sql);
  // Value() as an integer (0 when there is no value).
  int64_t Int(const std::string& sql);

 private:
  sqlite3* db_ = nullptr;
  std::string error_;  // why the open failed, if it did
};

}  // namespace xv::e2e
