// SubmissionTable: what one Submit stores (recipes, the campaign on first use, the round, the
// experiments and their first state events, the audit event), and the sources of its code
// candidates (content-addressed, SourceTable).
// Threading contract: as Database; one submission at a time (Database::submissions_mu()).
#pragma once

#include <cstdint>
#include <vector>

#include "common/status.h"
#include "daemon/store/database.h"
#include "daemon/store/store_rows.h"

namespace xv::store {

class SubmissionTable {
 public:
  explicit SubmissionTable(Database* db) : db_(db) {}

  // Stores the campaign (created on first use), a round, the recipes (deduplicated by hash) and
  // every experiment, plus an audit event, in two steps so that a large submission does not hold
  // the database: the recipes in transactions of a few hundred rows with the mutex released in
  // between, then everything that refers to them in one transaction. Readers see all of the
  // submission or none of it. On failure nothing of it remains (the recipes it added are deleted
  // again); a crash between the steps leaves only unreferenced, content-addressed recipe rows.
  Status InsertSubmission(const NewSubmission& sub, SubmissionIds* ids);

 private:
  // The content-addressed rows a submission added (recipes, and sources of code candidates),
  // deleted again when it fails.
  struct AddedRows {
    std::vector<int64_t> recipes;
    std::vector<int64_t> sources;
  };
  // Step 1 of InsertSubmission: the sources (sub.sources, with the first chunk), then the recipe
  // rows in transactions of kSubmissionChunkRows, the mutex released in between. *recipe_ids[i]
  // is experiment i's row; *added receives the rows this call added.
  Status InsertRecipesInChunks(const NewSubmission& sub, int64_t* base_recipe_id,
                               std::vector<int64_t>* recipe_ids, AddedRows* added);
  // InsertSubmission's two steps; *added receives the rows committed by step 1.
  Status InsertSubmissionSteps(const NewSubmission& sub, SubmissionIds* ids, AddedRows* added);
  Database* db_;
};

}  // namespace xv::store
