-- xv schema, version 2: campaigns with heads and policies, rounds with decisions, head controls and
-- reused results (issue 5, DESIGN.md § Keep/discard semantics).

-- The trainer the campaign's rounds use when Submit names none.
ALTER TABLE campaigns ADD COLUMN trainer TEXT NOT NULL DEFAULT 'libtorch';
-- The name the base recipe was given at creation (informational).
ALTER TABLE campaigns ADD COLUMN recipe_name TEXT NOT NULL DEFAULT '';

-- The full decision (RoundDecision::ToJson, or the manual decision) and when it was taken.
ALTER TABLE rounds ADD COLUMN decision_json TEXT NOT NULL DEFAULT '';
ALTER TABLE rounds ADD COLUMN decided_at TEXT;
-- The experiment whose candidate was kept (its replicate 0), NULL when nothing was kept.
ALTER TABLE rounds ADD COLUMN kept_experiment_id INTEGER REFERENCES experiments(id);
-- config_hash of the head the round compares with (its base recipe without the seed).
ALTER TABLE rounds ADD COLUMN head_config_hash TEXT NOT NULL DEFAULT '';

-- candidate: a run of a proposed change; control: a run of the round's head config.
ALTER TABLE experiments ADD COLUMN role TEXT NOT NULL DEFAULT 'candidate'
  CHECK (role IN ('candidate', 'control'));
-- Canonical hash of the resolved config with the seed set to 0: replicates of one config share it.
ALTER TABLE experiments ADD COLUMN config_hash TEXT NOT NULL DEFAULT '';
-- Set on a row that reuses the result of an earlier identical run (same config and seed) instead of
-- running again; such a row is created succeeded and counts as a run for the decision.
ALTER TABLE experiments ADD COLUMN reused_from_id INTEGER REFERENCES experiments(id);
CREATE INDEX experiments_config ON experiments(campaign_id, config_hash);

-- Every head a campaign has had, oldest first: the base at creation, then each kept candidate.
CREATE TABLE head_history (
  id            INTEGER PRIMARY KEY,
  campaign_id   INTEGER NOT NULL REFERENCES campaigns(id),
  recipe_id     INTEGER NOT NULL REFERENCES recipes(id),
  round_id      INTEGER REFERENCES rounds(id),
  experiment_id INTEGER REFERENCES experiments(id),
  candidate     TEXT NOT NULL DEFAULT '',
  reason        TEXT NOT NULL DEFAULT '',
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX head_history_campaign ON head_history(campaign_id, id);
INSERT INTO head_history(campaign_id, recipe_id, reason)
  SELECT id, head_recipe_id, 'base' FROM campaigns WHERE head_recipe_id IS NOT NULL;
