-- xv schema, version 17: one row per step event (issue 18, event ingestion at 200k rows/s).
-- Until now a plausible step event was stored twice: verbatim in events (the exactly-once log
-- that Watch, the event listing and the acknowledgements read) and as a metrics row (its figures,
-- for curves and summaries). Each row paid for its own table and index B-trees, and with many
-- workers streaming at once the two interleaved indexes cost more than the rows (measured with
-- SQLite 3.40, 64 streams, 8,192 events per transaction, synchronous=FULL: 5.9 us per event for
-- both rows, 3.7 us for one events row that carries the figures; bench/README.md).
--
-- So a step event's figures now live in its own events row (NULL for every other event, and for
-- a step event whose figures were implausible), and metrics is a view with the columns it always
-- had: those rows, and the rows of stored_metrics.
ALTER TABLE events ADD COLUMN step INTEGER;
ALTER TABLE events ADD COLUMN loss REAL;
ALTER TABLE events ADD COLUMN lrm REAL;
ALTER TABLE events ADD COLUMN dt_ms REAL;
ALTER TABLE events ADD COLUMN tok_per_sec REAL;
ALTER TABLE events ADD COLUMN mfu_percent REAL;
ALTER TABLE events ADD COLUMN progress REAL;

-- stored_metrics: the metric rows that are no events row. The rows stored before this version
-- stay where they are (the table is renamed, its index metrics_experiment follows: no row is
-- copied and no event JSON parsed again), and a row written into metrics directly (a tool or a
-- test that fills a database) lands here through the trigger below. The daemon no longer writes
-- it. Ids of the two parts may repeat each other: nothing reads metrics by id.
ALTER TABLE metrics RENAME TO stored_metrics;

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
