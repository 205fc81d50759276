-- Access tokens (issue 15): short-lived EdDSA JWTs. `signing_keys` holds the keys
-- that sign them (the newest this instance can open signs; every key stays in the
-- JWKS until the tokens it signed have expired). The private key is PKCS#8 sealed
-- under the server key (XChaCha20-Poly1305, the kid as associated data), as
-- callback secrets are; `sealed_with` names that key.
CREATE TABLE signing_keys (
    kid         VARCHAR(64)  NOT NULL PRIMARY KEY,
    algorithm   VARCHAR(16)  NOT NULL,
    public_key  VARBINARY(64) NOT NULL,
    private_key VARBINARY(255) NOT NULL,
    sealed_with VARCHAR(64)  NOT NULL,
    created_at  BIGINT       NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Every access token issued, by its `jti`: a token is honoured only while its row
-- is live (not revoked, not expired) and the credential it was issued from
-- (`parent_hash`, a row of `tokens`) is live. Read through the 2 s token cache, so
-- a revocation reaches every instance within 2 s. Rows go when they expire.
CREATE TABLE access_tokens (
    jti         VARCHAR(64)  NOT NULL PRIMARY KEY,
    tenant_id   VARCHAR(64)  NOT NULL,
    parent_hash VARBINARY(64) NOT NULL,
    issued_at   BIGINT       NOT NULL,
    expires_at  BIGINT       NOT NULL,
    revoked_at  BIGINT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX access_tokens_expiry ON access_tokens (expires_at);

-- Device login (RFC 8628): see the SQLite migration 0014 for what each column is.
CREATE TABLE device_requests (
    device_hash VARCHAR(64)   NOT NULL PRIMARY KEY,
    user_code   VARCHAR(16)   NOT NULL UNIQUE,
    tenant_id   VARCHAR(64),
    client_id   VARCHAR(255)  NOT NULL,
    agent_name  VARCHAR(255)  NOT NULL,
    source      VARCHAR(64)   NOT NULL,
    user_agent  VARCHAR(255)  NOT NULL,
    created_at  BIGINT        NOT NULL,
    expires_at  BIGINT        NOT NULL,
    interval_ms BIGINT        NOT NULL,
    polled_at   BIGINT,
    status      VARCHAR(16)   NOT NULL,
    decided_by  VARCHAR(255),
    decided_at  BIGINT,
    agent_id    VARCHAR(64),
    family_hash VARBINARY(64)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX device_requests_tenant ON device_requests (tenant_id, expires_at);

-- Refresh tokens (hashes only), each of one login's family (`tokens.hash`).
CREATE TABLE refresh_tokens (
    hash        VARBINARY(64) NOT NULL PRIMARY KEY,
    family_hash VARBINARY(64) NOT NULL,
    created_at  BIGINT        NOT NULL,
    used_at     BIGINT
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_hash);
