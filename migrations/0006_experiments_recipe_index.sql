-- xv schema, version 6: an index for result reuse at submission (ExperimentStore::InsertSubmission
-- looks, for every new experiment, for a succeeded run of the same recipe row in its campaign).
-- Without it that lookup walked every experiment of the campaign, once per new row: a submission
-- of 10,240 rows held the writer for tens of seconds (issue 11).
CREATE INDEX experiments_recipe ON experiments(campaign_id, recipe_id);
