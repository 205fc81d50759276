-- Memory instances and name + memory leases with fencing tokens (issue 5).

-- Identities minted by the control plane. `fence` is the memory's current fencing
-- token (the last one issued); the data plane refuses any lower one. `quiet_until`
-- is the lock delay after an expiry or a force-release.
CREATE TABLE memories (
    id                TEXT PRIMARY KEY,
    tenant_id         TEXT NOT NULL REFERENCES tenants(id),
    label             TEXT,
    parent_id         TEXT REFERENCES memories(id),
    branched_at_token INTEGER,
    fence             INTEGER NOT NULL DEFAULT 0,
    quiet_until       INTEGER NOT NULL DEFAULT 0,
    created_at        INTEGER NOT NULL
);
CREATE INDEX memories_parent ON memories (parent_id);
CREATE INDEX memories_tenant ON memories (tenant_id, id);

-- Names are unique service-wide by their UTS #39 skeleton, across tenants: the fence
-- and lock delay per skeleton outlive any one lease.
CREATE TABLE name_fences (
    skeleton    TEXT PRIMARY KEY,
    fence       INTEGER NOT NULL,
    quiet_until INTEGER NOT NULL DEFAULT 0
);

-- Live (or expired, not yet taken over) leases: one per skeleton, one per memory.
CREATE TABLE leases (
    id            TEXT PRIMARY KEY,
    tenant_id     TEXT NOT NULL REFERENCES tenants(id),
    name          TEXT NOT NULL,
    skeleton      TEXT NOT NULL UNIQUE,
    memory_id     TEXT NOT NULL UNIQUE REFERENCES memories(id),
    fence         INTEGER NOT NULL,
    holder        TEXT NOT NULL,
    owner_client  TEXT,
    ttl_ms        INTEGER NOT NULL,
    lock_delay_ms INTEGER NOT NULL,
    acquired_at   INTEGER NOT NULL,
    expires_at    INTEGER NOT NULL
);
CREATE INDEX leases_tenant ON leases (tenant_id, expires_at);
