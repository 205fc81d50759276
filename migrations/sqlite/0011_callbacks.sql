-- Webhook callbacks (issue 14). At most one per agent: a new registration that
-- passes its challenge replaces the agent's old one.
CREATE TABLE callbacks (
    id               TEXT PRIMARY KEY,
    tenant_id        TEXT NOT NULL REFERENCES tenants(id),
    agent_id         TEXT NOT NULL UNIQUE REFERENCES agents(id),
    url              TEXT NOT NULL,
    -- The secret sealed with the server's webhook key (XChaCha20-Poly1305, the
    -- callback id as associated data), and which key sealed it (its fingerprint).
    secret_sealed    BLOB NOT NULL,
    key_id           TEXT NOT NULL,
    state            TEXT NOT NULL,
    disabled_reason  TEXT,
    created_at       INTEGER NOT NULL,
    last_delivery_at INTEGER,
    last_status      INTEGER,
    last_error       TEXT,
    failure_streak   INTEGER NOT NULL DEFAULT 0,
    failing_since    INTEGER,
    -- No delivery before this (the retry schedule, or a Retry-After).
    next_attempt_at  INTEGER NOT NULL DEFAULT 0,
    -- One delivery at a time per callback, across instances (per-agent order): the
    -- instance delivering holds the row until `leased_until`.
    lease_token      TEXT,
    leased_until     INTEGER
);
CREATE INDEX callbacks_tenant ON callbacks (tenant_id, created_at);
CREATE INDEX callbacks_due ON callbacks (state, next_attempt_at);

-- Each delivery attempt, for the console (the event's timeline has them too).
CREATE TABLE callback_attempts (
    id          INTEGER PRIMARY KEY AUTOINCREMENT,
    callback_id TEXT NOT NULL,
    event_id    TEXT,
    kind        TEXT NOT NULL,
    at          INTEGER NOT NULL,
    status      INTEGER,
    error       TEXT,
    latency_ms  INTEGER NOT NULL
);
CREATE INDEX callback_attempts_callback ON callback_attempts (callback_id, id);
