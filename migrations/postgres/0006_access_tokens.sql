-- Access tokens (issue 15): short-lived EdDSA JWTs. `signing_keys` holds the keys
-- that sign them (the newest this instance can open signs; every key stays in the
-- JWKS until the tokens it signed have expired). The private key is PKCS#8 sealed
-- under the server key (XChaCha20-Poly1305, the kid as associated data), as
-- callback secrets are; `sealed_with` names that key.
CREATE TABLE signing_keys (
    kid         TEXT    PRIMARY KEY,
    algorithm   TEXT    NOT NULL,
    public_key  BYTEA   NOT NULL,
    private_key BYTEA   NOT NULL,
    sealed_with TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL
);

-- Every access token issued, by its `jti`: a token is honoured only while its row
-- is live (not revoked, not expired) and the credential it was issued from
-- (`parent_hash`, a row of `tokens`) is live. Read through the 2 s token cache, so
-- a revocation reaches every instance within 2 s. Rows go when they expire.
CREATE TABLE access_tokens (
    jti         TEXT    PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    parent_hash BYTEA   NOT NULL,
    issued_at   BIGINT  NOT NULL,
    expires_at  BIGINT  NOT NULL,
    revoked_at  BIGINT
);
CREATE INDEX access_tokens_expiry ON access_tokens (expires_at);

-- Device login (RFC 8628): see the SQLite migration 0014 for what each column is.
CREATE TABLE device_requests (
    device_hash TEXT    PRIMARY KEY,
    user_code   TEXT    NOT NULL UNIQUE,
    tenant_id   TEXT,
    client_id   TEXT    NOT NULL,
    agent_name  TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    user_agent  TEXT    NOT NULL,
    created_at  BIGINT  NOT NULL,
    expires_at  BIGINT  NOT NULL,
    interval_ms BIGINT  NOT NULL,
    polled_at   BIGINT,
    status      TEXT    NOT NULL,
    decided_by  TEXT,
    decided_at  BIGINT,
    agent_id    TEXT,
    family_hash BYTEA
);
CREATE INDEX device_requests_tenant ON device_requests (tenant_id, expires_at);

-- Refresh tokens (hashes only), each of one login's family (`tokens.hash`).
CREATE TABLE refresh_tokens (
    hash        BYTEA   PRIMARY KEY,
    family_hash BYTEA   NOT NULL,
    created_at  BIGINT  NOT NULL,
    used_at     BIGINT
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_hash);
