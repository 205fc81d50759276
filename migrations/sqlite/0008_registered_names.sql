-- The registry of canonical agent names, service-wide, keyed by confusable
-- skeleton (filled by `switchboard names import`).
CREATE TABLE registered_names (
    skeleton   TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    original   TEXT NOT NULL,
    tenant_id  TEXT NOT NULL REFERENCES tenants(id),
    created_at INTEGER NOT NULL
);
