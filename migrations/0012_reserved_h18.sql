-- xv schema, version 12: reserved on branch h18-query for another issue-18 branch's migration (this
-- file only keeps versions 1..N without gaps there; the merge replaces it with that migration).
SELECT 1;
