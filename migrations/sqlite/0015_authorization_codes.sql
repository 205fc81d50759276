-- Sign-in of a native app (the desktop console) to a remote server (issue 15):
-- the authorization code grant with PKCE (RFC 6749 §4.1, RFC 7636 S256) through
-- the system browser and a loopback redirect (RFC 8252). A code is made when a
-- signed-in operator consents on the authorization page; only its SHA-256 is kept,
-- with what binds it: the client, the exact redirect URI, the PKCE challenge, the
-- scopes the operator granted (never more than they hold) and who granted them
-- (the id of their credential). It is redeemed once, within a minute: redemption
-- makes the sign-in's credential (`family_hash`, a `tokens` row every refresh
-- token of the sign-in belongs to) in the same transaction that marks it used; a
-- second use revokes that credential (RFC 6749 §4.1.2).
CREATE TABLE authorization_codes (
    code_hash      BLOB    PRIMARY KEY,
    tenant_id      TEXT    NOT NULL,
    client_id      TEXT    NOT NULL,
    redirect_uri   TEXT    NOT NULL,
    code_challenge TEXT    NOT NULL,
    scopes         TEXT    NOT NULL,
    granted_by     TEXT    NOT NULL,
    created_at     INTEGER NOT NULL,
    expires_at     INTEGER NOT NULL,
    used_at        INTEGER,
    family_hash    BLOB
);
CREATE INDEX authorization_codes_expiry ON authorization_codes (expires_at);
