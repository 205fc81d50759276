//! The store's seam for signed agent requests (issue 39): the public keys bound to
//! credentials, the tenant's signature policy, and the replay cache of signature
//! nonces. What a signature is and how it verifies is `switchboard-webhook`'s
//! `agent` module; when a request must be signed is the server's
//! (`http/signatures.rs`). The trait, [`RequestKeyStore`](crate::RequestKeyStore),
//! is declared with its one implementation in `engine/request_keys.rs`.

use super::*;

/// A tenant's rule for agent credentials that carry no key (one that has a key
/// must sign whatever the policy).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SignaturePolicy {
    /// Signature headers are ignored.
    Off,
    /// A signature is verified when one is present (the default: static-token
    /// clients and curl keep working).
    #[default]
    Optional,
    /// An unsigned agent call is refused (401 `signature_required`).
    Required,
}

impl SignaturePolicy {
    pub const ALL: [Self; 3] = [Self::Off, Self::Optional, Self::Required];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Off => "off",
            Self::Optional => "optional",
            Self::Required => "required",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.as_str() == text)
    }
}

impl std::fmt::Display for SignaturePolicy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A live public key of a credential.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    /// Its RFC 7638 thumbprint: the `keyid` of its signatures, the `cnf.jkt` of the
    /// access tokens bound to it.
    pub jkt: String,
    /// The raw Ed25519 public key (32 bytes).
    pub public_key: Vec<u8>,
    /// Whether the credential itself must sign with one of its keys (a static
    /// token's registered key, a login's key); `false` for a key presented at a
    /// token exchange, which binds only the access token that exchange made.
    pub binds_parent: bool,
    pub created_at: Millis,
}

/// A key to bind to a credential.
#[derive(Debug, Clone, Copy)]
pub struct NewRequestKey<'a> {
    pub jkt: &'a str,
    pub public_key: &'a [u8],
    pub binds_parent: bool,
}

/// One agent's keys as operators see them (never a credential's hash or token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentKeyRow {
    pub agent_id: AgentId,
    pub agent_name: String,
    pub jkt: String,
    pub binds_parent: bool,
    pub created_at: Millis,
    /// The label of the credential the key hangs under.
    pub credential_label: String,
}

/// A nonce a verified signature used, kept until `expires_at` (ms).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsedNonce {
    pub keyid: String,
    pub nonce: String,
    pub expires_at: Millis,
}
