-- xv schema, version 13: a submission's experiment rows staged before they are published (issue 18).
-- SubmissionTable writes a big submission's rows here in bounded transactions (a few milliseconds
-- each, the writer free for event batches and other writes in between) and copies them into
-- experiments in one final transaction, which is what makes the submission visible. Nothing else
-- reads this table. Rows an interrupted submission left (a crash) are deleted when xvd opens the
-- database: an unpublished submission was never accepted.
CREATE TABLE staged_experiments (
  id                 INTEGER PRIMARY KEY,  -- the order of the submission's rows
  staging_id         INTEGER NOT NULL,     -- one per submission being written
  recipe_id          INTEGER NOT NULL,
  name               TEXT NOT NULL,
  candidate_index    INTEGER NOT NULL,
  replicate          INTEGER NOT NULL,
  overrides_json     TEXT NOT NULL,
  seed               INTEGER NOT NULL,
  device_requirement TEXT NOT NULL,
  time_budget_s      REAL NOT NULL,
  hard_deadline_s    REAL NOT NULL,
  role               TEXT NOT NULL,
  config_hash        TEXT NOT NULL,
  run_order          INTEGER,
  run_block          INTEGER
);
CREATE INDEX staged_experiments_staging ON staged_experiments(staging_id, id);
