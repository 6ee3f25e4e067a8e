-- xv schema, version 15: fewer index writes when a submission is published (issue 18). Publishing
-- a submission inserts its rows into experiments in one transaction, and every index of the table
-- takes each row: the more an index takes, and the more scattered its keys, the longer the writer
-- is held (4 000 rows at 100k experiments: ~75 ms before, most of it the pages of the config-hash
-- index, whose random keys dirty a page per distinct config; bench/README.md, branch
-- h18-publish). Each index below is narrowed to the rows its queries read, so that a queued row
-- enters it only when it gets there; every other index of experiments is read by a query that
-- needs it (the list is in bench/README.md).

-- RoundTable::ListEarlierConfigRuns (the head's earlier runs pooled into a decision) reads ended,
-- measured, non-reused runs of one config only: a new queued row enters this index when it ends
-- succeeded or diverged (one row per Finished), not at publish.
DROP INDEX IF EXISTS experiments_config;
CREATE INDEX IF NOT EXISTS experiments_config_measured ON experiments(campaign_id, config_hash)
  WHERE reused_from_id IS NULL AND state IN ('succeeded', 'diverged');

-- The worker's current experiment (WorkerTable::List) and the check that a worker has none
-- before it is forgotten (WorkerTable::ForgetOffline) always name a worker: rows never assigned
-- (worker_id NULL, every row at publish) stay out.
DROP INDEX IF EXISTS experiments_worker;
CREATE INDEX IF NOT EXISTS experiments_worker_assigned ON experiments(worker_id, state)
  WHERE worker_id IS NOT NULL;

-- Placement's history (ExperimentQueries::CountCandidateAttempts): the attempts of each
-- candidate at the queue's head, by round and candidate name, instead of every attempted row of
-- the head's rounds (a 4 000-row round read whole on every scheduling pass). Never-assigned rows
-- (attempt 0, every row at publish) stay out, as before.
DROP INDEX IF EXISTS experiments_round_attempted;
CREATE INDEX IF NOT EXISTS experiments_round_name_attempted ON experiments(round_id, name) WHERE attempt > 0;
