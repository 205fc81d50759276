-- Signed agent requests (issue 39): see the SQLite migration 0020 for what each
-- table and column is.
ALTER TABLE tenants ADD COLUMN signature_policy VARCHAR(16) NOT NULL DEFAULT 'optional';

CREATE TABLE request_keys (
    parent_hash  VARBINARY(64) NOT NULL,
    jkt          VARCHAR(64)   NOT NULL,
    tenant_id    VARCHAR(64)   NOT NULL,
    public_key   VARBINARY(64) NOT NULL,
    binds_parent BIGINT        NOT NULL,
    created_at   BIGINT        NOT NULL,
    revoked_at   BIGINT,
    PRIMARY KEY (parent_hash, jkt)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX request_keys_tenant ON request_keys (tenant_id);

CREATE TABLE signature_nonces (
    keyid      VARCHAR(64)  NOT NULL,
    nonce      VARCHAR(128) NOT NULL,
    expires_at BIGINT       NOT NULL,
    PRIMARY KEY (keyid, nonce)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX signature_nonces_expiry ON signature_nonces (expires_at);
