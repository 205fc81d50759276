-- Authorization codes (RFC 6749 §4.1 with PKCE): see the SQLite migration 0015 for
-- what each column is. client_id is at most 200 characters and redirect_uri 512
-- (the authorization endpoint refuses longer ones).
CREATE TABLE authorization_codes (
    code_hash      VARBINARY(64)  NOT NULL PRIMARY KEY,
    tenant_id      VARCHAR(64)    NOT NULL,
    client_id      VARCHAR(255)   NOT NULL,
    redirect_uri   VARCHAR(512)   NOT NULL,
    code_challenge VARCHAR(64)    NOT NULL,
    scopes         TEXT           NOT NULL,
    granted_by     VARCHAR(64)    NOT NULL,
    created_at     BIGINT         NOT NULL,
    expires_at     BIGINT         NOT NULL,
    used_at        BIGINT,
    family_hash    VARBINARY(64)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
CREATE INDEX authorization_codes_expiry ON authorization_codes (expires_at);
