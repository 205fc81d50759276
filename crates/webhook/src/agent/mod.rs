//! Agents' request signatures: RFC 9421 HTTP Message Signatures with Ed25519.

mod key;

pub use key::{JWK_CRV, JWK_KTY, Jwk, KeyError, PublicKey, SigningKey};
