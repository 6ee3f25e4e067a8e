-- xv schema, version 8: the daemon at lab scale (issue 18). With 100k experiments and 10M metrics
-- rows, reads must touch what they return, not the table.

-- The queue in dispatch order (ExperimentQueries::ListQueued), queued rows only: a scheduling pass
-- reads the head of the queue from this index and stops, instead of sorting every queued row.
CREATE INDEX experiments_queue
  ON experiments(priority DESC, round_id, COALESCE(run_order, -1), id) WHERE state = 'queued';

-- Newest-first pages and id pages of one campaign (xvctl results, the dashboard) walk this index.
CREATE INDEX experiments_campaign_id ON experiments(campaign_id, id);

-- Open rounds only (the rounds to decide on every tick): decided rounds are never read there.
CREATE INDEX rounds_open ON rounds(campaign_id, id) WHERE state = 'open';

-- val_bpb of the experiment's current attempt, the same value as results.val_bpb of
-- (experiment_id, attempt = experiments.attempt), kept so by the triggers below: "best by val_bpb"
-- pages walk an index instead of joining and sorting every result of the campaign.
ALTER TABLE experiments ADD COLUMN val_bpb REAL;
UPDATE experiments SET val_bpb = (SELECT r.val_bpb FROM results r
                                  WHERE r.experiment_id = experiments.id
                                    AND r.attempt = experiments.attempt);

CREATE TRIGGER results_val_bpb_insert AFTER INSERT ON results BEGIN
  UPDATE experiments SET val_bpb = NEW.val_bpb
   WHERE id = NEW.experiment_id AND attempt = NEW.attempt;
END;

CREATE TRIGGER results_val_bpb_update AFTER UPDATE OF val_bpb, experiment_id, attempt ON results
BEGIN
  UPDATE experiments SET val_bpb = (SELECT r.val_bpb FROM results r
                                    WHERE r.experiment_id = experiments.id
                                      AND r.attempt = experiments.attempt)
   WHERE id IN (OLD.experiment_id, NEW.experiment_id);
END;

CREATE TRIGGER results_val_bpb_delete AFTER DELETE ON results BEGIN
  UPDATE experiments SET val_bpb = NULL WHERE id = OLD.experiment_id AND attempt = OLD.attempt;
END;

CREATE TRIGGER experiments_val_bpb_attempt AFTER UPDATE OF attempt ON experiments BEGIN
  UPDATE experiments SET val_bpb = (SELECT r.val_bpb FROM results r
                                    WHERE r.experiment_id = NEW.id AND r.attempt = NEW.attempt)
   WHERE id = NEW.id;
END;

CREATE INDEX experiments_val_bpb ON experiments(campaign_id, val_bpb IS NULL, val_bpb, id);
CREATE INDEX experiments_val_bpb_all ON experiments(val_bpb IS NULL, val_bpb, id);
