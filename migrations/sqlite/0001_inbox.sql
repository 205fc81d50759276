-- Switchboard schema, SQLite. Append-only: never edit a migration that has shipped.
-- Times are integer milliseconds since the Unix epoch, from the server's clock
-- (on SQLite the server process is the database host; see ARCHITECTURE.md).

CREATE TABLE tenants (
    id          TEXT PRIMARY KEY,
    name        TEXT NOT NULL UNIQUE,
    created_at  INTEGER NOT NULL
);

CREATE TABLE agents (
    id           TEXT PRIMARY KEY,
    tenant_id    TEXT NOT NULL REFERENCES tenants(id),
    name         TEXT NOT NULL,
    -- Last allocated per-agent sequence number. Allocated inside the write
    -- transaction, and writes are serialized, so commit order = sequence order (I2).
    head_seq     INTEGER NOT NULL DEFAULT 0,
    -- Retention low-water mark: every event with seq <= low_water is gone (I6).
    low_water    INTEGER NOT NULL DEFAULT 0,
    created_at   INTEGER NOT NULL,
    last_seen_at INTEGER,
    UNIQUE (tenant_id, name)
);

CREATE TABLE tokens (
    hash        BLOB PRIMARY KEY,          -- SHA-256 of the bearer token; never the token
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    agent_id    TEXT REFERENCES agents(id),
    scopes      TEXT NOT NULL,             -- space separated
    label       TEXT NOT NULL,
    created_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);

CREATE TABLE events (
    id               TEXT PRIMARY KEY,     -- UUIDv7
    tenant_id        TEXT NOT NULL,
    agent_id         TEXT NOT NULL REFERENCES agents(id),
    seq              INTEGER NOT NULL,
    sender_agent_id  TEXT,                 -- NULL: the operator
    sender_name      TEXT,
    room_id          TEXT,
    room_seq         INTEGER,
    correlation_id   TEXT,
    priority         INTEGER NOT NULL DEFAULT 0,
    status           TEXT NOT NULL,        -- pending|claimed|completed|quarantined|expired|purged
    payload          TEXT,                 -- JSON; NULL once terminal
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL,
    created_at       INTEGER NOT NULL,
    available_at     INTEGER NOT NULL,
    expires_at       INTEGER,
    claim_token      TEXT,
    lease_expires_at INTEGER,
    last_error       TEXT,
    updated_at       INTEGER NOT NULL,
    UNIQUE (agent_id, seq)
);
-- Claims: recipient first, then status, then the claim order.
CREATE INDEX events_claim ON events (agent_id, status, priority DESC, seq);
-- The scavenger's scan of expired leases.
CREATE INDEX events_lease ON events (lease_expires_at) WHERE status = 'claimed';
-- Expiry of unclaimed events past expires_at.
CREATE INDEX events_expiry ON events (expires_at) WHERE status = 'pending' AND expires_at IS NOT NULL;
CREATE INDEX events_tenant ON events (tenant_id, id);

-- Each step in an event's life, for the event inspector.
CREATE TABLE event_history (
    id        INTEGER PRIMARY KEY,
    event_id  TEXT NOT NULL,
    at        INTEGER NOT NULL,
    action    TEXT NOT NULL,
    actor     TEXT NOT NULL,
    detail    TEXT
);
CREATE INDEX event_history_event ON event_history (event_id, id);

CREATE TABLE rooms (
    id          TEXT PRIMARY KEY,
    tenant_id   TEXT NOT NULL REFERENCES tenants(id),
    name        TEXT NOT NULL,
    head_seq    INTEGER NOT NULL DEFAULT 0,
    created_at  INTEGER NOT NULL,
    UNIQUE (tenant_id, name)
);

CREATE TABLE room_members (
    room_id    TEXT NOT NULL REFERENCES rooms(id),
    agent_id   TEXT NOT NULL REFERENCES agents(id),
    joined_at  INTEGER NOT NULL,
    PRIMARY KEY (room_id, agent_id)
);

-- The room's own append-only log.
CREATE TABLE room_messages (
    room_id          TEXT NOT NULL REFERENCES rooms(id),
    seq              INTEGER NOT NULL,
    sender_agent_id  TEXT,
    payload          TEXT NOT NULL,
    correlation_id   TEXT,
    created_at       INTEGER NOT NULL,
    PRIMARY KEY (room_id, seq)
);

-- Idempotency records (I8). The key itself is never stored, only its hash.
CREATE TABLE idempotency_keys (
    tenant_id    TEXT NOT NULL,
    principal    TEXT NOT NULL,
    key_hash     BLOB NOT NULL,
    fingerprint  BLOB NOT NULL,
    state        TEXT NOT NULL,            -- in_flight | done
    status_code  INTEGER,
    response     TEXT,
    created_at   INTEGER NOT NULL,
    locked_until INTEGER NOT NULL,         -- an in_flight record older than this was abandoned
    expires_at   INTEGER NOT NULL,
    PRIMARY KEY (tenant_id, principal, key_hash)
);
CREATE INDEX idempotency_expiry ON idempotency_keys (expires_at);

-- Every operator action.
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id  TEXT NOT NULL,
    actor      TEXT NOT NULL,
    action     TEXT NOT NULL,
    ids        TEXT,                       -- JSON array of event ids
    filter     TEXT,                       -- JSON filter
    count      INTEGER NOT NULL,
    at         INTEGER NOT NULL
);
CREATE INDEX audit_log_tenant ON audit_log (tenant_id, id);
