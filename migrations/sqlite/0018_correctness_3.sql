-- Correctness round 3 (issue 36).
--
-- Lease holders by identity: `holder` keeps the text the console shows
-- (`agent:<name>`, `operator`), `holder_key` is who holds it for the holder checks
-- (`agent:<id>`, `operator`), so an agent created later with a deleted agent's name
-- inherits none of its leases or fencing tokens. Existing rows name their live
-- agent's id; a holder whose agent is gone gets 'nobody' and matches nobody.
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

-- Credentials form a tree: a login (a device login's or an app sign-in's `tokens`
-- row) hangs from the credential that approved it, and revoking a credential
-- revokes every descendant in the same transaction. `authorization_codes` keeps the
-- consenting credential until the code makes the sign-in.
ALTER TABLE tokens ADD COLUMN parent_hash BLOB;
CREATE INDEX tokens_parent ON tokens (parent_hash);
ALTER TABLE authorization_codes ADD COLUMN parent_hash BLOB;

-- Every operator action in the audit log: what it acted on (`target`, e.g.
-- `agent:dave`, `token:0123456789abcdef`) and a short detail.
ALTER TABLE audit_log ADD COLUMN target TEXT;
ALTER TABLE audit_log ADD COLUMN detail TEXT;

-- Horizons: the tables that grew for ever are trimmed by age, in batches.
CREATE INDEX audit_log_at ON audit_log (at);
CREATE INDEX lease_audit_at ON lease_audit (at);
CREATE INDEX fencing_rejections_at ON fencing_rejections (at);
CREATE INDEX issued_tokens_at ON issued_tokens (issued_at);
CREATE INDEX refresh_tokens_created ON refresh_tokens (created_at);
CREATE INDEX tokens_revoked ON tokens (revoked_at);
