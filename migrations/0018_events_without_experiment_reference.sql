-- xv schema, version 18: events without the foreign key on experiment_id (issue 18, event
-- ingestion at 200k rows/s).
-- With foreign_keys=ON, SQLite looked up the experiments row of every event it inserted: 0.24 us
-- of the 3.5 us of CPU that a one-row insert costs, 0.47 us of the 2.9 us of a row in a 64-row
-- insert (SQLite 3.40, 64 streams, 8,192 events per transaction; bench/README.md), on the one
-- thread that stores every worker's events. The reference guarded nothing the daemon can write:
-- a trainer event is stored only for an attempt its worker holds (a row of attempts, whose
-- experiment_id keeps its own reference), a daemon or audit event names an experiment that the
-- same transaction read or wrote, and no experiments row is ever deleted.
-- SQLite cannot drop a constraint, so the table is rebuilt as in version 16: the same columns,
-- ids, defaults and UNIQUE index. The metrics view and its trigger read and name events, so they
-- are dropped first (ALTER TABLE .. RENAME checks every view) and made again as version 17 made
-- them.
DROP VIEW metrics;  -- and its INSTEAD OF trigger, metrics_insert

CREATE TABLE events_v18 (
  id            INTEGER PRIMARY KEY,
  source        TEXT NOT NULL,
  experiment_id INTEGER,
  attempt       INTEGER,
  seq           INTEGER,
  type          TEXT NOT NULL,
  json          TEXT NOT NULL DEFAULT '{}',
  unix_ms       INTEGER,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  step          INTEGER,
  loss          REAL,
  lrm           REAL,
  dt_ms         REAL,
  tok_per_sec   REAL,
  mfu_percent   REAL,
  progress      REAL,
  UNIQUE (experiment_id, attempt, seq)
);
INSERT INTO events_v18 (id, source, experiment_id, attempt, seq, type, json, unix_ms, created_at,
                        step, loss, lrm, dt_ms, tok_per_sec, mfu_percent, progress)
  SELECT id, source, experiment_id, attempt, seq, type, json, unix_ms, created_at,
         step, loss, lrm, dt_ms, tok_per_sec, mfu_percent, progress FROM events;
DROP TABLE events;
ALTER TABLE events_v18 RENAME TO events;

CREATE VIEW metrics (id, experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec,
                     mfu_percent, progress) AS
  SELECT id, experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec, mfu_percent, progress
    FROM stored_metrics
  UNION ALL
  SELECT id, experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec, mfu_percent, progress
    FROM events WHERE step IS NOT NULL;

CREATE TRIGGER metrics_insert INSTEAD OF INSERT ON metrics
BEGIN
  INSERT INTO stored_metrics (experiment_id, attempt, step, loss, lrm, dt_ms, tok_per_sec,
                              mfu_percent, progress)
    VALUES (NEW.experiment_id, NEW.attempt, NEW.step, NEW.loss, NEW.lrm, NEW.dt_ms,
            NEW.tok_per_sec, NEW.mfu_percent, NEW.progress);
END;
