-- xv schema, version 10: code candidates (issue 16).

-- The text of a train.py that experiments run, stored once by its sha256 (content-addressed): two
-- candidates with the same text share one row, and so one recipe row and one config.
-- text is at most 512 KiB (daemon/store/source_table.h kMaxSourceBytes), valid UTF-8.
CREATE TABLE sources (
  id          INTEGER PRIMARY KEY,
  sha256      TEXT NOT NULL UNIQUE,     -- lower-case hex SHA-256 of text
  text        TEXT NOT NULL,
  bytes       INTEGER NOT NULL,
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- The source a worker allowing code candidates registered for a trainer: the base a submitted
-- patch applies to. One row per trainer name; the latest Register wins.
CREATE TABLE trainer_sources (
  trainer       TEXT PRIMARY KEY,
  source_id     INTEGER NOT NULL REFERENCES sources(id),
  worker_name   TEXT NOT NULL DEFAULT '',
  registered_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- A recipe row of a code candidate names its source; NULL: the trainer's configured file. The
-- row's hash covers the source (daemon/engine/submission_builder.h CodeIdentityHash).
ALTER TABLE recipes ADD COLUMN source_id INTEGER REFERENCES sources(id);
