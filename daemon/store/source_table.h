// SourceTable: the sources and trainer_sources tables (migrations/0010_code_sources.sql): the text
// of every train.py a code candidate runs, stored once by its sha256, and the source each
// code-candidate trainer's workers registered (the base a submitted patch applies to; issue 16,
// docs/autoresearch.md § Code candidates). Which experiment runs which source is the recipe row's
// source_id, written by SubmissionTable through InsertSourceRow.
// Threading contract: as Database; every method holds its mutex for one statement or transaction.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/sqlite_connection.h"

namespace xv::store {

// The largest source stored: upstream's train.py is ~25 KiB.
inline constexpr size_t kMaxSourceBytes = 512 * 1024;

struct StoredSource {
  std::string sha256;  // lower-case hex
  std::string text;
};

// Checks `text` as a source to store: at most kMaxSourceBytes, valid UTF-8, not empty, no NUL.
// INVALID_ARGUMENT starting with `field` ("candidate 2: source: 600000 bytes, at most 524288").
Status CheckSourceText(const std::string& field, const std::string& text);

// Inserts `text` (already checked) unless a row of its sha256 exists; *id receives the row id
// either way, *inserted whether this call added it. For SubmissionTable, inside its transaction.
Status InsertSourceRow(SqliteConnection* conn, const std::string& sha256, const std::string& text,
                       int64_t* id, bool* inserted);

class SourceTable {
 public:
  explicit SourceTable(Database* db) : db_(db) {}

  // Stores `text` as `trainer`'s registered source, reported by worker `worker_name` (the latest
  // report wins). `text` must pass CheckSourceText and hash to `sha256` (else INVALID_ARGUMENT).
  Status RecordTrainerSource(const std::string& trainer, const std::string& worker_name,
                             const std::string& sha256, const std::string& text);
  // The registered source of `trainer`; *found false when no worker registered one.
  Status FindTrainerSource(const std::string& trainer, bool* found, StoredSource* out);
  // The source of hash `sha256`; *found false when none is stored.
  Status FindSource(const std::string& sha256, bool* found, StoredSource* out);

 private:
  Database* db_;
};

}  // namespace xv::store
