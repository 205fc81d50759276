-- Access tokens (issue 15): short-lived EdDSA JWTs. `signing_keys` holds the keys
-- that sign them (the newest this instance can open signs; every key stays in the
-- JWKS until the tokens it signed have expired). The private key is PKCS#8 sealed
-- under the server key (XChaCha20-Poly1305, the kid as associated data), as
-- callback secrets are; `sealed_with` names that key.
CREATE TABLE signing_keys (
    kid         TEXT    PRIMARY KEY,
    algorithm   TEXT    NOT NULL,
    public_key  BLOB    NOT NULL,
    private_key BLOB    NOT NULL,
    sealed_with TEXT    NOT NULL,
    created_at  INTEGER NOT NULL
);

-- Every access token issued, by its `jti`: a token is honoured only while its row
-- is live (not revoked, not expired) and the credential it was issued from
-- (`parent_hash`, a row of `tokens`) is live. Read through the 2 s token cache, so
-- a revocation reaches every instance within 2 s. Rows go when they expire.
CREATE TABLE access_tokens (
    jti         TEXT    PRIMARY KEY,
    tenant_id   TEXT    NOT NULL,
    parent_hash BLOB    NOT NULL,
    issued_at   INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    revoked_at  INTEGER
);
CREATE INDEX access_tokens_expiry ON access_tokens (expires_at);

-- Device login (RFC 8628): a request waits here for an operator of `tenant_id`
-- (resolved from the name the client gave; NULL when no such tenant: nobody sees
-- it) to approve or deny it by its `user_code`. Only the device code's SHA-256 is
-- kept. Approval records the agent and the credential made for the login
-- (`family_hash`, a `tokens` row every refresh token of this login belongs to).
CREATE TABLE device_requests (
    device_hash TEXT    PRIMARY KEY,
    user_code   TEXT    NOT NULL UNIQUE,
    tenant_id   TEXT,
    client_id   TEXT    NOT NULL,
    agent_name  TEXT    NOT NULL,
    source      TEXT    NOT NULL,
    user_agent  TEXT    NOT NULL,
    created_at  INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL,
    interval_ms INTEGER NOT NULL,
    polled_at   INTEGER,
    status      TEXT    NOT NULL,
    decided_by  TEXT,
    decided_at  INTEGER,
    agent_id    TEXT,
    family_hash BLOB
);
CREATE INDEX device_requests_tenant ON device_requests (tenant_id, expires_at);

-- Refresh tokens (hashes only), each of one login's family (`tokens.hash`). Each
-- is used once: using it marks it and makes the next; a second use is a theft
-- signal and revokes the family, every access token of it with it.
CREATE TABLE refresh_tokens (
    hash        BLOB    PRIMARY KEY,
    family_hash BLOB    NOT NULL,
    created_at  INTEGER NOT NULL,
    used_at     INTEGER
);
CREATE INDEX refresh_tokens_family ON refresh_tokens (family_hash);
