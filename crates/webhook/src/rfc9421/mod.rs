//! RFC 9421 HTTP Message Signatures as Switchboard uses them: one implementation
//! for two algorithms.
//!
//! * `hmac-sha256`, the webhook deliveries the server signs with a callback's
//!   [`crate::Secret`] ([`verify_rfc9421`], `hmac.rs`);
//! * `ed25519`, the requests agents sign with their own key
//!   ([`crate::agent`], and `agent::verify_ed25519` for the RFC's own examples,
//!   `agent/labelled.rs`, which builds on this module and not the other way).
//!
//! Both use the same signature base (§2.5) and parameter serialization (§2.3)
//! (`base.rs`), the same component values (§2.1 header fields; §2.2 `@method`,
//! `@authority`, `@path` and, when the query is known, `@query`), and the same
//! check of one received signature (`verify.rs`), which takes the key (hence
//! the algorithm) and the components the caller's contract requires as inputs.
//! Each contract keeps its own rules for `alg`, the time window and the
//! parameters it requires.
//!
//! # Why this is written here instead of using the `httpsig` crate
//!
//! `httpsig` 0.0.26 was evaluated (it builds on stable and has hmac-sha256,
//! Ed25519 and a custom component list) and rejected. 0.0.26 is still the newest
//! release on crates.io (checked again in December 2026, for the agent
//! signatures), and each reason below still holds for it:
//!
//! 1. It cannot produce or check our exact `Signature-Input`. `HttpSignatureParams`
//!    keeps only known fields and re-serializes them in a fixed order
//!    (`created;expires;nonce;alg;keyid;tag`), both when signing and when it
//!    rebuilds the `@signature-params` line to verify. Both our contracts put
//!    `keyid` before `alg`, and RFC 9421 §2.3 signs the parameters as the sender
//!    serialized them: parsing `…;keyid="cb_1";alg="hmac-sha256"` and printing it
//!    back gave `…;alg="hmac-sha256";keyid="cb_1"`, so its verifier would refuse
//!    our (valid) signatures and anyone else's that order parameters differently
//!    or add one (PyPI `http-message-signatures`, which agents may use, writes
//!    `created;keyid;alg;expires;nonce`). It also writes `nonce` and `keyid`
//!    between quotes without escaping them.
//! 2. Its expiry check reads the system clock inside
//!    `verify_signature_headers` and it never checks `created`; the receiver APIs
//!    here take `now` so that tests need no clock.
//! 3. It pulls a second RustCrypto generation (hmac 0.13, sha2 0.11, rand 0.10)
//!    next to the workspace's sha2 0.10, Ed25519 through `ed25519-compact`, plus
//!    ECDSA P-256/P-384, PKCS#8, SPKI and SEC1 with no feature to leave them out:
//!    78 crates with its default features off (measured at 0.0.26), against 47
//!    for this whole crate with Ed25519 (`ed25519-dalek` 2) and serde included.
//! 4. Its core API still takes component lines as `"name": value` strings, so the
//!    value extraction would be ours anyway, and the 0.0.x series changes API
//!    between releases.
//!
//! What is left is small: the signature base over a caller-given component list,
//! the few derived components we use, header canonicalization, and `sfv` for
//! parsing the structured fields (and re-serializing the received signature
//! parameters, which is what RFC 9421 signs).

mod base;
mod hmac;
mod verify;

pub(crate) use base::{Message, Query, dictionary_field, sf_string};
pub use base::{RequestView, SignatureParams, normalize_authority, normalize_path, signature_base};
pub(crate) use hmac::sign_rfc9421;
pub use hmac::{
    ALGORITHM, COVERED_COMPONENTS, DEFAULT_VALIDITY_SECS, SIGNATURE_LABEL, sign_signature_base,
    verify_rfc9421,
};
pub(crate) use verify::{
    Member, Verifier, check_alg, integer_param, signature_bytes, string_param, verify_member,
};
