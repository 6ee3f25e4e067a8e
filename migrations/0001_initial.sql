-- xv schema, version 1 (DESIGN.md § Data model). Applied by xvd's migration runner in one transaction;
-- PRAGMA user_version is set by the runner, never here. Timestamps are UTC ISO-8601 text.

CREATE TABLE campaigns (
  id            INTEGER PRIMARY KEY,
  name          TEXT NOT NULL UNIQUE,
  objective     TEXT NOT NULL DEFAULT 'val_bpb',
  base_recipe_id INTEGER REFERENCES recipes(id),
  head_recipe_id INTEGER REFERENCES recipes(id),
  budget_json   TEXT NOT NULL DEFAULT '{}',
  policy_json   TEXT NOT NULL DEFAULT '{}',
  device_filter TEXT NOT NULL DEFAULT '',
  state         TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused', 'done')),
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- One row per distinct resolved config: identical configs (seed included) share one row.
CREATE TABLE recipes (
  id            INTEGER PRIMARY KEY,
  hash          TEXT NOT NULL UNIQUE,   -- hex SHA-256 of the canonical resolved config
  recipe_json   TEXT NOT NULL,          -- every knob (common/recipe.h RecipeToJson), what the trainer gets
  resolved_json TEXT NOT NULL,          -- knobs + derived sizes (ResolvedConfigJson)
  name          TEXT NOT NULL DEFAULT '',
  parent_id     INTEGER REFERENCES recipes(id),
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE rounds (
  id            INTEGER PRIMARY KEY,
  campaign_id   INTEGER NOT NULL REFERENCES campaigns(id),
  kind          TEXT NOT NULL DEFAULT 'candidates'
                CHECK (kind IN ('candidates', 'sweep', 'ablation', 'confirm', 'plan-phase')),
  state         TEXT NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'decided', 'cancelled')),
  base_recipe_id INTEGER REFERENCES recipes(id),
  recipe_name   TEXT NOT NULL DEFAULT '',
  recipe_yaml   TEXT NOT NULL DEFAULT '',
  decision_summary TEXT NOT NULL DEFAULT '',
  submitter     TEXT NOT NULL DEFAULT '',
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

CREATE TABLE workers (
  id            INTEGER PRIMARY KEY,
  name          TEXT NOT NULL UNIQUE,
  device_json   TEXT NOT NULL DEFAULT '{}',       -- xv.v1.Device as JSON
  capabilities_json TEXT NOT NULL DEFAULT '{}',   -- xv.v1.Capabilities as JSON
  backend       TEXT NOT NULL DEFAULT 'cpu',      -- cuda | rocm | cpu
  device_name   TEXT NOT NULL DEFAULT '',
  state         TEXT NOT NULL DEFAULT 'offline'
                CHECK (state IN ('idle', 'busy', 'draining', 'offline')),
  version       TEXT NOT NULL DEFAULT '',
  registered_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  last_heartbeat TEXT
);

-- State machine: queued -> assigned -> running -> {succeeded, diverged, failed, invalid, cancelled,
-- timed_out, lost}. A lost attempt may be requeued (attempt + 1); the attempts table keeps each one.
CREATE TABLE experiments (
  id            INTEGER PRIMARY KEY,
  campaign_id   INTEGER NOT NULL REFERENCES campaigns(id),
  round_id      INTEGER NOT NULL REFERENCES rounds(id),
  recipe_id     INTEGER NOT NULL REFERENCES recipes(id),
  name          TEXT NOT NULL,              -- candidate name: "matrix_lr=0.03" or "base"
  candidate_index INTEGER NOT NULL DEFAULT 0,
  replicate     INTEGER NOT NULL DEFAULT 0,
  overrides_json TEXT NOT NULL DEFAULT '{}',
  seed          INTEGER NOT NULL,
  trainer       TEXT NOT NULL DEFAULT 'libtorch',
  device_requirement TEXT NOT NULL DEFAULT 'any' CHECK (device_requirement IN ('any', 'gpu')),
  priority      INTEGER NOT NULL DEFAULT 0,
  time_budget_s REAL NOT NULL,
  hard_deadline_s REAL NOT NULL,
  state         TEXT NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'assigned', 'running', 'succeeded', 'diverged', 'failed',
                                 'invalid', 'cancelled', 'timed_out', 'lost')),
  attempt       INTEGER NOT NULL DEFAULT 0,  -- 0 while never assigned; 1-based afterwards
  worker_id     INTEGER REFERENCES workers(id),
  decision      TEXT NOT NULL DEFAULT 'pending' CHECK (decision IN ('keep', 'discard', 'pending')),
  decision_reason TEXT NOT NULL DEFAULT '',
  failure_kind  TEXT NOT NULL DEFAULT '',
  failure_detail TEXT NOT NULL DEFAULT '',
  stderr_tail   TEXT NOT NULL DEFAULT '',
  device_name   TEXT NOT NULL DEFAULT '',
  progress      REAL NOT NULL DEFAULT 0,
  last_loss     REAL,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  assigned_at   TEXT,
  started_at    TEXT,
  finished_at   TEXT
);
CREATE INDEX experiments_state ON experiments(state, priority DESC, id);
CREATE INDEX experiments_round ON experiments(round_id);
CREATE INDEX experiments_worker ON experiments(worker_id, state);

-- One row per attempt handed to a worker.
CREATE TABLE attempts (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  attempt       INTEGER NOT NULL,
  worker_id     INTEGER NOT NULL REFERENCES workers(id),
  state         TEXT NOT NULL DEFAULT 'assigned',
  exit_code     INTEGER,
  signal        INTEGER,
  failure_kind  TEXT NOT NULL DEFAULT '',
  failure_detail TEXT NOT NULL DEFAULT '',
  stderr_tail   TEXT NOT NULL DEFAULT '',
  wall_seconds  REAL,
  assigned_at   TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  finished_at   TEXT,
  UNIQUE (experiment_id, attempt)
);

-- One row per finished attempt that produced a summary.
CREATE TABLE results (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  attempt       INTEGER NOT NULL,
  val_bpb       REAL,
  training_seconds REAL,
  total_seconds REAL,
  num_steps     INTEGER,
  total_tokens  INTEGER,
  tok_per_sec   REAL,
  mfu_percent   REAL,                 -- -1 when the device peak is unknown
  peak_flops    REAL,
  peak_flops_source TEXT NOT NULL DEFAULT '',
  peak_vram_mb  REAL,
  peak_reserved_mb REAL,
  num_params    INTEGER,
  flops_per_token INTEGER,
  metric_version TEXT NOT NULL DEFAULT '',
  attention_backend TEXT NOT NULL DEFAULT '',
  depth         INTEGER,
  device_json   TEXT NOT NULL DEFAULT '{}',
  summary_json  TEXT NOT NULL,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (experiment_id, attempt)
);

CREATE TABLE metrics (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  attempt       INTEGER NOT NULL,
  step          INTEGER NOT NULL,
  loss          REAL,
  lrm           REAL,
  dt_ms         REAL,
  tok_per_sec   REAL,
  mfu_percent   REAL,
  progress      REAL
);
CREATE INDEX metrics_experiment ON metrics(experiment_id, attempt, step);

CREATE TABLE nan_events (
  id            INTEGER PRIMARY KEY,
  experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  attempt       INTEGER NOT NULL,
  step          INTEGER,
  micro_step    INTEGER,
  what          TEXT NOT NULL DEFAULT '',
  value         TEXT NOT NULL DEFAULT '',
  knobs_json    TEXT NOT NULL DEFAULT '{}',
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Trainer events (source 'trainer': each (experiment_id, attempt, seq) applied exactly once) and the
-- audit log (source 'audit' / 'daemon': seq NULL, so the UNIQUE constraint does not apply to them).
CREATE TABLE events (
  id            INTEGER PRIMARY KEY,
  source        TEXT NOT NULL CHECK (source IN ('trainer', 'audit', 'daemon')),
  experiment_id INTEGER REFERENCES experiments(id),
  attempt       INTEGER,
  seq           INTEGER,
  type          TEXT NOT NULL,
  json          TEXT NOT NULL DEFAULT '{}',
  unix_ms       INTEGER,
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  UNIQUE (experiment_id, attempt, seq)
);
CREATE INDEX events_experiment ON events(experiment_id, attempt);
