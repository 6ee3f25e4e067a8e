-- xv schema, version 3: plans, YAML lists of phases that xvd runs as successive rounds of one
-- campaign without an agent (issue 5, docs/plans.md).

CREATE TABLE plans (
  id            INTEGER PRIMARY KEY,
  campaign_id   INTEGER NOT NULL REFERENCES campaigns(id),
  name          TEXT NOT NULL,
  yaml          TEXT NOT NULL,            -- the plan as submitted; parsed again at each step
  state         TEXT NOT NULL DEFAULT 'running'
                CHECK (state IN ('running', 'paused', 'done', 'failed', 'cancelled')),
  current_phase INTEGER NOT NULL DEFAULT 0,   -- 0-based; = number of phases once done
  -- One object per phase reached: {"state": running|decided|skipped|stopped, "round_id",
  -- "outcome" (one line), "kept" (candidate name or null)}.
  outcomes_json TEXT NOT NULL DEFAULT '[]',
  reason        TEXT NOT NULL DEFAULT '',    -- why the plan ended (done, failed, cancelled)
  submitter     TEXT NOT NULL DEFAULT '',
  created_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  updated_at    TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);
CREATE INDEX plans_state ON plans(state);
CREATE INDEX plans_name ON plans(name, id);

-- The plan phase a round was built for. One round per (plan, phase): a daemon restarted between
-- storing a phase's round and recording it in the plan finds the round instead of making another.
ALTER TABLE rounds ADD COLUMN plan_id INTEGER REFERENCES plans(id);
ALTER TABLE rounds ADD COLUMN plan_phase INTEGER;
CREATE UNIQUE INDEX rounds_plan_phase ON rounds(plan_id, plan_phase) WHERE plan_id IS NOT NULL;
-- best: the policy may keep the best passing candidate (the head moves); none: the round only
-- records (failure maps), nothing is kept.
ALTER TABLE rounds ADD COLUMN keep_rule TEXT NOT NULL DEFAULT 'best'
  CHECK (keep_rule IN ('best', 'none'));
