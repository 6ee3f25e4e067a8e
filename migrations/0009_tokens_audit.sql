-- xv schema, version 9: tokens with roles, worker credentials and the audit table (issue 15).

-- Bearer tokens. Only the SHA-256 of a token is stored (hex); the token itself is shown once, at
-- creation. role: read < submit < admin, or worker (the worker session only). A worker token made
-- with `--worker NAME` may register as NAME only; one made without it claims each worker name it
-- registers first (worker_names). A revoked token stays (its id is in the audit rows) and never
-- authenticates again.
CREATE TABLE tokens (
  id          INTEGER PRIMARY KEY,
  name        TEXT NOT NULL DEFAULT '',
  role        TEXT NOT NULL CHECK (role IN ('read', 'submit', 'admin', 'worker')),
  worker_name TEXT NOT NULL DEFAULT '',   -- bound at creation ('' = claims names as it registers)
  hash        TEXT NOT NULL UNIQUE,       -- lower-case hex SHA-256 of the token text
  created_by  TEXT NOT NULL DEFAULT '',   -- who made it: "token:ID", "uid:N" or "local"
  created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  revoked_at  TEXT
);

-- Which worker token owns a worker name: a session registering under NAME must present this
-- token (a re-register with another credential is refused). One row per name, written when a
-- token first registers the name (or at creation with --worker NAME).
CREATE TABLE worker_credentials (
  worker_name TEXT PRIMARY KEY,
  token_id    INTEGER NOT NULL REFERENCES tokens(id),
  claimed_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
);

-- Every state-changing call and every refused call: who (token id, or NULL for a caller without
-- one), how it was known (caller: "token:ID", "uid:N" on the unix socket, "local" when no token is
-- configured), the gRPC method, its target (ids or names from the request), and the outcome
-- ("ok", or the status code and message).
CREATE TABLE audit (
  id        INTEGER PRIMARY KEY,
  at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now')),
  token_id  INTEGER,
  caller    TEXT NOT NULL DEFAULT '',
  peer      TEXT NOT NULL DEFAULT '',
  method    TEXT NOT NULL,
  target    TEXT NOT NULL DEFAULT '',
  outcome   TEXT NOT NULL,
  detail    TEXT NOT NULL DEFAULT ''
);
