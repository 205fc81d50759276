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
