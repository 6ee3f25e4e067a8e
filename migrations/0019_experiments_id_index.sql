-- xv schema, version 19: counting a page's remaining rows reads an index, not the table (issue 18,
-- results-style queries at 100k experiments).
-- `xvctl results --before ID` (and every paged list that asks how many rows are left) counts the
-- experiments with an id below (or above) a cursor. The id is the table's rowid, so SQLite counted
-- them by walking the table's own pages, whole experiment rows: 9 ms for 50,000 of 100,000
-- experiments, 20 ms for all of them (SQLite 3.40, 2-core machine). An index of the id alone is
-- about 10 bytes an experiment, and the same counts read it in 1.2 and 2.6 ms. Filtered counts
-- keep their own indexes (campaign, state, decision), which already hold the id.
CREATE INDEX experiments_id ON experiments(id);
