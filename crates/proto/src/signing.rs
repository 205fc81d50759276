//! Signed agent requests (RFC 9421 with Ed25519): an agent's keys and the tenant's
//! signature policy.

use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

use crate::AgentId;

/// `POST /api/v1/agent/keys`: binds a public key to the credential the request is
/// made with. Once a credential has a key, every request it makes must be signed
/// with one of its keys; a new key is registered by a request signed with a
/// current one (rotation), and the old one revoked with
/// `DELETE /api/v1/agent/keys/{jkt}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct RegisterKey {
    /// The public key as a JWK (RFC 8037): `{"kty": "OKP", "crv": "Ed25519", "x":
    /// "<base64url of the 32-byte key>"}`. Other members (`kid`, `use`, `alg`) are
    /// ignored; a private key (`d`) is refused.
    #[cfg_attr(feature = "openapi", schema(value_type = Object))]
    pub jwk: serde_json::Value,
}

/// A key bound to a credential.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SigningKeyView {
    /// The key's RFC 7638 thumbprint (SHA-256, base64url): the `keyid` its
    /// signatures carry and the `cnf.jkt` of the access tokens bound to it.
    pub jkt: String,
    /// Whether the credential itself must sign with it (a registered key, a
    /// login's key); `false` for a key presented at a token exchange, which binds
    /// only the access token that exchange made.
    pub binds_credential: bool,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

/// The keys of one agent's live credentials, as operators see them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentKeys {
    pub agent_id: AgentId,
    pub name: String,
    /// Newest first; empty when the agent signs nothing (or has not yet).
    pub keys: Vec<AgentKey>,
}

/// One key of an agent, with the credential it hangs under.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct AgentKey {
    #[serde(flatten)]
    pub key: SigningKeyView,
    /// The label of the credential (`device login: reviewer`, a token's label).
    pub credential: String,
}

/// `GET /api/v1/ops/signatures`: the tenant's policy and every agent's keys.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct SignatureOverview {
    /// `off`, `optional` or `required`: what applies to agent credentials without
    /// a key (one with a key must sign whatever the policy).
    pub policy: String,
    pub agents: Vec<AgentKeys>,
}

/// `PUT /api/v1/ops/signatures`: the tenant's policy.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct SetSignaturePolicy {
    /// `off` (signatures are ignored), `optional` (verified when present; the
    /// default) or `required` (an unsigned state-changing agent call is refused
    /// with 401 `signature_required`).
    pub policy: String,
}
