-- Correctness round 3 (issue 36): see the SQLite migration 0018.
ALTER TABLE leases ADD COLUMN holder_key TEXT NOT NULL DEFAULT '';
ALTER TABLE issued_tokens ADD COLUMN holder_key TEXT NOT NULL DEFAULT '';
UPDATE leases SET holder_key = CASE
    WHEN holder = 'operator' THEN 'operator'
    ELSE COALESCE((SELECT 'agent:' || a.id FROM agents a
                   WHERE a.tenant_id = leases.tenant_id AND a.deleted_at IS NULL
                     AND 'agent:' || a.name = leases.holder), 'nobody')
END;
-- Only the records of live leases' tokens (the ones the data plane accepts): an
-- older record keeps '' and is compared by its `holder` text, as before; it names a
-- stale token, refused by its fence anyway, and goes with the horizon.
UPDATE issued_tokens SET holder_key = CASE
    WHEN holder = 'operator' THEN 'operator'
    ELSE COALESCE((SELECT 'agent:' || a.id FROM agents a JOIN memories m ON m.tenant_id = a.tenant_id
                   WHERE m.id = issued_tokens.memory_id AND a.deleted_at IS NULL
                     AND 'agent:' || a.name = issued_tokens.holder), 'nobody')
END
WHERE EXISTS (SELECT 1 FROM leases l
              WHERE l.memory_id = issued_tokens.memory_id AND l.fence = issued_tokens.fence);
CREATE INDEX leases_holder ON leases (tenant_id, holder_key);

ALTER TABLE tokens ADD COLUMN parent_hash BYTEA;
CREATE INDEX tokens_parent ON tokens (parent_hash);
ALTER TABLE authorization_codes ADD COLUMN parent_hash BYTEA;

ALTER TABLE audit_log ADD COLUMN target TEXT;
ALTER TABLE audit_log ADD COLUMN detail TEXT;

CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX lease_audit_at ON lease_audit (at);
CREATE INDEX fencing_rejections_at ON fencing_rejections (at);
CREATE INDEX issued_tokens_at ON issued_tokens (issued_at);
CREATE INDEX refresh_tokens_created ON refresh_tokens (created_at);
CREATE INDEX tokens_revoked ON tokens (revoked_at);
