-- The lease audit trail stores no names and no memory ids: only
-- SHA-256(value || tenant salt), so entries of one name or memory can be matched
-- with each other (and with a value an operator already knows) but not read back.
ALTER TABLE tenants ADD COLUMN audit_salt BLOB;

CREATE TABLE lease_audit (
    id            INTEGER PRIMARY KEY AUTOINCREMENT,
    tenant_id     TEXT NOT NULL,
    event         TEXT NOT NULL,   -- acquired renewed released expired taken_over force_released fence_rejected
    name_hash     TEXT,            -- hex SHA-256(canonical name || salt)
    memory_hash   TEXT NOT NULL,   -- hex SHA-256(memory id || salt)
    fencing_token INTEGER NOT NULL,
    actor         TEXT NOT NULL,
    at            INTEGER NOT NULL
);
CREATE INDEX lease_audit_tenant ON lease_audit (tenant_id, id);
