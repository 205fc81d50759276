-- Signed agent requests (issue 39): RFC 9421 signatures with Ed25519 keys bound to
-- the credential they were presented with.
--
-- The tenant's policy for credentials that carry no key: 'off' (signatures are
-- ignored), 'optional' (verified when present; the default) or 'required' (an
-- unsigned agent call is refused with 401 signature_required). A credential with a
-- key must sign whatever the policy.
ALTER TABLE tenants ADD COLUMN signature_policy TEXT NOT NULL DEFAULT 'optional';

-- A public key (Ed25519, raw 32 bytes) under the credential (`tokens` row) it was
-- presented with: a login's family (device flow, PKCE sign-in), a static token (an
-- audited registration), or the static token a token exchange was made with.
-- `jkt` is its RFC 7638 thumbprint, the `keyid` of its signatures and the
-- `cnf.jkt` of the access tokens bound to it. `binds_parent`: the credential
-- itself must sign with one of its keys (a static token's registered key, a
-- login's key); 0 for a key presented at a token exchange, which binds only the
-- access token that exchange made. The key dies with its credential (its lookup
-- needs a live credential) or by its own revocation.
CREATE TABLE request_keys (
    parent_hash  BLOB    NOT NULL,
    jkt          TEXT    NOT NULL,
    tenant_id    TEXT    NOT NULL,
    public_key   BLOB    NOT NULL,
    binds_parent INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    revoked_at   INTEGER,
    PRIMARY KEY (parent_hash, jkt)
);
CREATE INDEX request_keys_tenant ON request_keys (tenant_id);

-- The replay cache: every (keyid, nonce) a verified signature used, until its
-- signature's window has passed (`expires_at`, ms). Shared by every instance, so a
-- signature replayed on another instance is refused too; trimmed by age.
CREATE TABLE signature_nonces (
    keyid      TEXT    NOT NULL,
    nonce      TEXT    NOT NULL,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (keyid, nonce)
);
CREATE INDEX signature_nonces_expiry ON signature_nonces (expires_at);
