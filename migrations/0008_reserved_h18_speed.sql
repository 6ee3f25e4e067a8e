-- Placeholder so that 0009 applies on this branch (versions run 1..N without gaps). The lead drops
-- this file when merging: branch h18-speed holds the real migration 0008.
SELECT 1;
