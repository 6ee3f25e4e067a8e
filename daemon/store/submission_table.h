// SubmissionTable: what one Submit stores (recipes, the campaign on first use, the round, the
// experiments and their first state events, the audit event).
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
  // Step 1 of InsertSubmission: the recipe rows in transactions of kSubmissionChunkRows, the
  // mutex released in between. *recipe_ids[i] is experiment i's row; *added_recipes receives the
  // rows this call added.
  Status InsertRecipesInChunks(const NewSubmission& sub, int64_t* base_recipe_id,
                               std::vector<int64_t>* recipe_ids,
                               std::vector<int64_t>* added_recipes);
  // InsertSubmission's two steps; *added_recipes receives the recipe rows committed by step 1.
  Status InsertSubmissionSteps(const NewSubmission& sub, SubmissionIds* ids,
                               std::vector<int64_t>* added_recipes);
  Database* db_;
};

}  // namespace xv::store
