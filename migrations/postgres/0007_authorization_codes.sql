-- Authorization codes (RFC 6749 §4.1 with PKCE): see the SQLite migration 0015 for
-- what each column is.
CREATE TABLE authorization_codes (
    code_hash      BYTEA   PRIMARY KEY,
    tenant_id      TEXT    NOT NULL,
    client_id      TEXT    NOT NULL,
    redirect_uri   TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    scopes         TEXT    NOT NULL,
    granted_by     TEXT    NOT NULL,
    created_at     BIGINT  NOT NULL,
    expires_at     BIGINT  NOT NULL,
    used_at        BIGINT,
    family_hash    BYTEA
);
CREATE INDEX authorization_codes_expiry ON authorization_codes (expires_at);
