-- xv schema, version 11: experiments counted per state and trainer, kept by triggers, and indexes
-- for placement and filtered result pages (issue 18).
-- Status and the dashboard read these few rows instead of counting 100k experiments on every
-- call. The trainer is stored as the status line names it: '' counts as 'libtorch'.
CREATE TABLE experiment_counts (
  state   TEXT NOT NULL,
  trainer TEXT NOT NULL,
  n       INTEGER NOT NULL,
  PRIMARY KEY (state, trainer)
) WITHOUT ROWID;

INSERT INTO experiment_counts (state, trainer, n)
  SELECT state, COALESCE(NULLIF(trainer, ''), 'libtorch'), COUNT(*) FROM experiments
   GROUP BY 1, 2;

-- One upsert per new experiment and per change of state: a few microseconds each, inside the
-- writer's transaction that made the change.
CREATE TRIGGER experiment_counts_insert AFTER INSERT ON experiments BEGIN
  INSERT INTO experiment_counts (state, trainer, n)
    VALUES (NEW.state, COALESCE(NULLIF(NEW.trainer, ''), 'libtorch'), 1)
    ON CONFLICT (state, trainer) DO UPDATE SET n = n + 1;
END;

CREATE TRIGGER experiment_counts_delete AFTER DELETE ON experiments BEGIN
  UPDATE experiment_counts SET n = n - 1
   WHERE state = OLD.state AND trainer = COALESCE(NULLIF(OLD.trainer, ''), 'libtorch');
END;

CREATE TRIGGER experiment_counts_update AFTER UPDATE OF state, trainer ON experiments
  WHEN OLD.state IS NOT NEW.state OR OLD.trainer IS NOT NEW.trainer BEGIN
  UPDATE experiment_counts SET n = n - 1
   WHERE state = OLD.state AND trainer = COALESCE(NULLIF(OLD.trainer, ''), 'libtorch');
  INSERT INTO experiment_counts (state, trainer, n)
    VALUES (NEW.state, COALESCE(NULLIF(NEW.trainer, ''), 'libtorch'), 1)
    ON CONFLICT (state, trainer) DO UPDATE SET n = n + 1;
END;

-- The experiments of a round that were ever assigned (ExperimentQueries::CountCandidateAttempts,
-- on every scheduling pass): placement reads the attempts of the rounds at the queue's head
-- without walking their queued rows.
CREATE INDEX experiments_round_attempted ON experiments(round_id) WHERE attempt > 0;

-- `xvctl results --campaign C --state S` and `--decision D` pages (newest first, or after an id):
-- without these they walked every experiment of the campaign for the few that match (a page of
-- keep decisions in a campaign of 100k rows read all 100k: 0.7 s).
CREATE INDEX experiments_campaign_state ON experiments(campaign_id, state, id);
CREATE INDEX experiments_campaign_decision ON experiments(campaign_id, decision, id);

-- A confirm round's fresh seeds start past the campaign's largest (CampaignTable::MaxCampaignSeed).
CREATE INDEX experiments_campaign_seed ON experiments(campaign_id, seed);
