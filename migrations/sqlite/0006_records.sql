-- The fenced data plane: versioned records of a memory, the refusals of stale
-- tokens, who issued which token, and which agents hear of changes.

CREATE TABLE memory_records (
    memory_id     TEXT NOT NULL REFERENCES memories(id),
    key           TEXT NOT NULL,
    value         TEXT NOT NULL,      -- JSON
    version       INTEGER NOT NULL,   -- the ETag
    fencing_token INTEGER NOT NULL,   -- of the write that made this version
    updated_at    INTEGER NOT NULL,
    PRIMARY KEY (memory_id, key)
);

-- The highest token a data-plane call has presented successfully.
ALTER TABLE memories ADD COLUMN fence_seen INTEGER NOT NULL DEFAULT 0;

-- Every token ever issued for a memory, so a refusal can name its owner client.
CREATE TABLE issued_tokens (
    memory_id    TEXT NOT NULL,
    fence        INTEGER NOT NULL,
    lease_id     TEXT NOT NULL,
    owner_client TEXT,
    holder       TEXT NOT NULL,
    issued_at    INTEGER NOT NULL,
    PRIMARY KEY (memory_id, fence)
);

CREATE TABLE fencing_rejections (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id    TEXT NOT NULL,
    memory_id    TEXT NOT NULL,
    presented    INTEGER NOT NULL,
    current      INTEGER NOT NULL,
    owner_client TEXT,
    actor        TEXT NOT NULL,
    operation    TEXT NOT NULL,
    at           INTEGER NOT NULL
);
CREATE INDEX fencing_rejections_tenant ON fencing_rejections (tenant_id, id);

CREATE TABLE memory_subscribers (
    memory_id TEXT NOT NULL REFERENCES memories(id),
    agent_id  TEXT NOT NULL REFERENCES agents(id),
    PRIMARY KEY (memory_id, agent_id)
);
