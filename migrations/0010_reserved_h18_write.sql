-- Placeholder so that 0011 applies on this branch (versions run 1..N without gaps). The lead drops
-- this file when merging: branch h18-write holds the real migration 0010.
SELECT 1;
