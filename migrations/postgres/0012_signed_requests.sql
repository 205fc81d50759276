-- Signed agent requests (issue 39): see the SQLite migration 0020 for what each
-- table and column is.
ALTER TABLE tenants ADD COLUMN signature_policy TEXT NOT NULL DEFAULT 'optional';

CREATE TABLE request_keys (
    parent_hash  BYTEA   NOT NULL,
    jkt          TEXT    NOT NULL,
    tenant_id    TEXT    NOT NULL,
    public_key   BYTEA   NOT NULL,
    binds_parent BIGINT  NOT NULL,
    created_at   BIGINT  NOT NULL,
    revoked_at   BIGINT,
    PRIMARY KEY (parent_hash, jkt)
);
CREATE INDEX request_keys_tenant ON request_keys (tenant_id);

CREATE TABLE signature_nonces (
    keyid      TEXT    NOT NULL,
    nonce      TEXT    NOT NULL,
    expires_at BIGINT  NOT NULL,
    PRIMARY KEY (keyid, nonce)
);
CREATE INDEX signature_nonces_expiry ON signature_nonces (expires_at);
