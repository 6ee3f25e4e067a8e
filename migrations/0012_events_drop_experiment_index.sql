-- xv schema, version 12: one index write less per stored event (issue 18, event ingestion).
-- events_experiment (experiment_id, attempt) repeats the leading columns of the events table's
-- UNIQUE (experiment_id, attempt, seq) index, which serves every lookup by experiment and attempt
-- as well (the seq scan of an attempt's events, the exactly-once check, Watch's experiment
-- filter goes by id). Every trainer event paid for both.
DROP INDEX IF EXISTS events_experiment;
