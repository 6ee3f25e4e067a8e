// SubmissionTable: what one Submit stores (recipes, the campaign on first use, the round, the
// experiments and their first state events, the audit event), and the sources of its code
// candidates (content-addressed, SourceTable).
// Threading contract: as Database; one submission at a time (Database::submissions_mu()).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/store_rows.h"

namespace xv::store {

class SubmissionTable {
 public:
  explicit SubmissionTable(Database* db) : db_(db) {}

  // Stores the campaign (created on first use), a round, the recipes (deduplicated by hash) and
  // every experiment, plus an audit event, so that a large submission never holds the writer
  // long (issue 18): the recipes and the experiment rows are staged (staged_experiments, which
  // nothing else reads) in transactions of at most kStageChunkMaxRows rows or about 4 ms, the
  // writer free in between for event batches, assignments and other writes; then one transaction
  // publishes them: the campaign, the round, the experiments (copied from the staged rows in one
  // statement), their state events and the audit event. Readers, the scheduler and a crash see
  // all of the submission or none of it; it returns after the publish. On failure nothing of it
  // remains (the recipes and sources it added are deleted again); a crash before the publish
  // leaves only unreferenced, content-addressed recipe rows and staged rows, which
  // DiscardStagedRows deletes at the next start. A small submission (a few dozen rows) goes
  // through the same steps in one transaction.
  Status InsertSubmission(const NewSubmission& sub, SubmissionIds* ids);

  // Deletes every staged row (a submission interrupted by a crash: it was never published nor
  // acknowledged). Store::Open calls it once, before anything is submitted.
  Status DiscardStagedRows();

 private:
  // What staging one submission wrote (submission_table.cc).
  struct Staged;
  // Writes the sources, recipes and staged experiment rows in bounded transactions, the mutex
  // released in between.
  Status StageRows(const NewSubmission& sub, Staged* staged);
  // The first staging transaction's rows: a staging number, the sources (*source_ids: sha256 ->
  // row) and the base recipe; rows it added are appended to *added_recipes / *added_sources.
  Status StageFirstRows(SqliteConnection* c, const NewSubmission& sub, Staged* staged,
                        std::map<std::string, int64_t>* source_ids,
                        std::vector<int64_t>* added_recipes, std::vector<int64_t>* added_sources)
      EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // Stages sub.experiments[*next ..] (their recipe rows, then their staged rows) until max_rows
  // rows or `deadline` (at least one row), advancing *next; recipe rows it added are appended to
  // *added_recipes. Inside the caller's transaction.
  Status StageChunk(SqliteConnection* c, const NewSubmission& sub, Staged* staged,
                    const std::map<std::string, int64_t>& source_ids, size_t* next, size_t max_rows,
                    std::chrono::steady_clock::time_point deadline,
                    std::vector<int64_t>* added_recipes) EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // A small submission (kOneTransactionMaxRows): staged, published and its staged rows deleted
  // in one transaction, so that a small Submit waits for one commit, not three.
  Status StoreInOneTransaction(const NewSubmission& sub, Staged* staged, SubmissionIds* ids);
  // The one transaction that makes the staged submission visible (its hold: staged->publish_ms).
  Status Publish(const NewSubmission& sub, Staged* staged, SubmissionIds* ids);
  // What that transaction writes: the campaign on first use, the round, the experiments copied
  // from the staged rows, their state events and the audit event.
  Status PublishStaged(SqliteConnection* c, const NewSubmission& sub, const Staged& staged,
                       SubmissionIds* ids) EXCLUSIVE_LOCKS_REQUIRED(db_->mu());
  // Deletes the staged rows of `staging_id` in transactions of a thousand rows (a failure is
  // logged: DiscardStagedRows deletes them at the next start).
  void DropStagedRows(int64_t staging_id);
  // Deletes the recipes and sources a refused submission added, unless something uses them.
  void DeleteAddedRows(const Staged& staged);

  Database* db_;
};

}  // namespace xv::store
