-- xv schema, version 7: decisions that survive drift (issue 14). A decided round's arms (its head
-- controls and each candidate) run fresh, in randomised blocks: each block holds one run of every
-- arm, shuffled with a seed recorded on the round, and the dispatcher follows that order.

-- The seed of the round's run order (NULL: the round was stored without one, e.g. before v7 or a
-- round of a campaign without an acceptance policy).
ALTER TABLE rounds ADD COLUMN order_seed INTEGER;
-- The round's drift figures (sched::RoundDrift as JSON): tok/s and steps per arm, the controls'
-- tok/s trend over the round, corr(val_bpb, tok/s) within the controls. Written with the decision.
ALTER TABLE rounds ADD COLUMN drift_json TEXT NOT NULL DEFAULT '';

-- The run's place in its round's order (0-based; the dispatcher's order within the round) and its
-- block (0-based). NULL for rounds stored without an order: those go by id.
ALTER TABLE experiments ADD COLUMN run_order INTEGER;
ALTER TABLE experiments ADD COLUMN run_block INTEGER;
-- Why a row with reused_from_id reuses that result instead of running ('' on rows that ran).
ALTER TABLE experiments ADD COLUMN reuse_reason TEXT NOT NULL DEFAULT '';
