-- Console sessions and one-time login tickets. Append-only, like every migration.
-- Neither secret is stored: `hash` is the SHA-256 of the session id or the ticket.
-- A grant is only as good as the token it came from: lookups join `tokens` and
-- refuse a revoked one.

CREATE TABLE console_grants (
    hash        BLOB PRIMARY KEY,
    kind        TEXT NOT NULL,             -- session | ticket
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    token_hash  BLOB NOT NULL REFERENCES tokens(hash),
    scopes      TEXT NOT NULL,             -- space separated; never more than the token's
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX console_grants_expiry ON console_grants (expires_at);
