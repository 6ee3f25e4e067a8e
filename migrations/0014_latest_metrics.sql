-- xv schema, version 14: the latest step figures of each experiment (issue 18). Reads that show a
-- run's latest step, loss, tok/s or MFU, or how many step rows it has, read this one row instead of
-- that run's metrics rows (10M rows at lab scale). AttemptLedger writes it in the transaction that
-- stores the step events: one upsert per experiment per event batch (UpsertLatestMetrics).
-- The row follows the experiment's newest attempt: a step of an older attempt (a late event of
-- a lost attempt) leaves it unchanged, the first step of a newer one replaces it.
CREATE TABLE latest_metrics (
  experiment_id INTEGER PRIMARY KEY REFERENCES experiments(id),
  attempt       INTEGER NOT NULL,
  step          INTEGER NOT NULL,   -- the highest step stored of that attempt
  loss          REAL,               -- the figures of that step's row
  lrm           REAL,
  dt_ms         REAL,
  tok_per_sec   REAL,
  mfu_percent   REAL,
  progress      REAL,
  rows          INTEGER NOT NULL    -- metrics rows of that attempt
);

-- Backfill: one walk of the metrics index (experiment_id, attempt, step); per experiment its
-- newest attempt that has rows.
INSERT INTO latest_metrics (experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec,
                            mfu_percent, progress, rows)
  SELECT m.experiment_id, m.attempt, m.step, m.loss, m.lrm, m.dt_ms, m.tok_per_sec,
         m.mfu_percent, m.progress, a.rows
    FROM (SELECT experiment_id, attempt, COUNT(*) AS rows,
                 (SELECT id FROM metrics l
                   WHERE l.experiment_id = g.experiment_id AND l.attempt = g.attempt
                   ORDER BY l.step DESC, l.id DESC LIMIT 1) AS last_id
            FROM metrics g
           GROUP BY experiment_id, attempt) a
    JOIN metrics m ON m.id = a.last_id
   WHERE a.attempt = (SELECT MAX(attempt) FROM metrics x WHERE x.experiment_id = a.experiment_id);
