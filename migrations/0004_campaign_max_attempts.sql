-- xv schema, version 4: the per-campaign attempt limit (issue 6). A lost attempt (no contact with
-- its worker within the lease) is requeued while the experiment has made fewer than max_attempts
-- attempts; then the experiment ends lost. Existing campaigns keep the old fixed limit of 2.
ALTER TABLE campaigns ADD COLUMN max_attempts INTEGER NOT NULL DEFAULT 2
  CHECK (max_attempts BETWEEN 1 AND 10);
