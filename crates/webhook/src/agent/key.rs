//! An agent's Ed25519 key pair, and the public key as a JWK (RFC 8037) with its
//! RFC 7638 thumbprint.
//!
//! Terms: the *signing key* is the 32-byte Ed25519 secret (RFC 8032's seed, the
//! JWK's `d`); the *public key* is the 32-byte encoded point (the JWK's `x`);
//! the *thumbprint* is the SHA-256 JWK thumbprint of the public key, base64url
//! without padding, which is a natural `keyid`.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use rand::RngCore as _;
use serde::{Deserialize, Deserializer, Serialize};
use sha2::{Digest as _, Sha256};

/// The JWK `kty` of an Ed25519 key (RFC 8037 §2).
pub const JWK_KTY: &str = "OKP";
/// The JWK `crv` of an Ed25519 key (RFC 8037 §2).
pub const JWK_CRV: &str = "Ed25519";

/// An agent's Ed25519 signing key.
///
/// Its bytes are wiped when it is dropped. `Debug` prints the public key's
/// thumbprint, never the secret; there is no `Display`, and the only way to get
/// the secret back out is [`SigningKey::to_bytes`].
///
/// Signatures are made by aws-lc-rs (already in every build through rustls): on
/// this project's machines it signs in ~10 µs where ed25519-dalek takes ~25 µs,
/// and every signed request pays it (bench AUTH, issue 39). Ed25519 is
/// deterministic, so both give the same bytes (`tests` checks it); dalek keeps
/// the secret (wiped on drop), derives the public key and verifies.
#[derive(Clone)]
pub struct SigningKey {
    pub(crate) secret: ed25519_dalek::SigningKey,
    /// The same key in aws-lc, which wipes it when the last clone is dropped
    /// (`None` only if aws-lc refused it, which it does not for a seed with its own
    /// public key: dalek signs then).
    pub(crate) signer: Option<std::sync::Arc<aws_lc_rs::signature::Ed25519KeyPair>>,
}

impl SigningKey {
    /// A new key from the thread-local CSPRNG (`rand::rng()`, seeded from the
    /// operating system): 32 random bytes are an Ed25519 secret key as they are.
    pub fn generate() -> Self {
        let mut secret = [0_u8; 32];
        rand::rng().fill_bytes(&mut secret);
        Self::from_bytes(&secret)
    }

    /// The key whose 32-byte secret (RFC 8032's seed, the JWK's `d` decoded) is
    /// `secret`. Every 32-byte value is a valid secret.
    pub fn from_bytes(secret: &[u8; 32]) -> Self {
        let secret = ed25519_dalek::SigningKey::from_bytes(secret);
        let signer = aws_lc_rs::signature::Ed25519KeyPair::from_seed_and_public_key(
            secret.as_bytes(),
            secret.verifying_key().as_bytes(),
        )
        .ok()
        .map(std::sync::Arc::new);
        Self { secret, signer }
    }

    /// The 32-byte secret, to store (in a keyring, for instance). Treat the result
    /// as the key itself.
    pub fn to_bytes(&self) -> [u8; 32] {
        self.secret.to_bytes()
    }

    /// The public half, to register with the server.
    pub fn public_key(&self) -> PublicKey {
        PublicKey(self.secret.verifying_key())
    }

    /// The Ed25519 signature of `message` (RFC 8032).
    pub(crate) fn sign_bytes(&self, message: &[u8]) -> [u8; 64] {
        use ed25519_dalek::Signer as _;
        match &self.signer {
            Some(signer) => {
                let mut signature = [0_u8; 64];
                signature.copy_from_slice(signer.sign(message).as_ref());
                signature
            }
            None => self.secret.sign(message).to_bytes(),
        }
    }
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SigningKey(public {})", self.public_key().thumbprint())
    }
}

/// An agent's Ed25519 public key: a valid curve point that is not of small order.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PublicKey(pub(crate) ed25519_dalek::VerifyingKey);

/// Why a public key or JWK was refused. Messages never contain key bytes.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum KeyError {
    /// The key is not 32 bytes long.
    #[error("an Ed25519 public key is 32 bytes; this one has {0}")]
    InvalidLength(usize),
    /// The 32 bytes do not decode to a point of the curve.
    #[error("these 32 bytes are not an Ed25519 public key (no curve point has this encoding)")]
    NotAPoint,
    /// The key is one of the few small-order points: any signature "verifies".
    #[error(
        "this is a weak Ed25519 public key (a small-order point), which proves nothing; \
         generate a new key pair"
    )]
    WeakKey,
    /// The JWK is not an Ed25519 key.
    #[error(
        "the JWK must have kty \"OKP\" and crv \"Ed25519\" (RFC 8037); \
         it has kty {kty:?} and crv {crv:?}"
    )]
    UnsupportedJwk {
        /// The JWK's `kty`.
        kty: String,
        /// The JWK's `crv`.
        crv: String,
    },
    /// The JWK has a `d` member: it is the private key.
    #[error(
        "this JWK has a \"d\" member, so it is a private key: send the public key alone \
         (kty, crv and x) and keep \"d\" secret"
    )]
    PrivateJwk,
    /// The JWK's `x` is not unpadded base64url.
    #[error("the JWK's \"x\" must be the 32-byte public key in base64url without padding: {0}")]
    InvalidX(&'static str),
}

impl PublicKey {
    /// The key whose encoding (RFC 8032 §5.1.2, the JWK's `x` decoded) is `bytes`.
    ///
    /// Refuses a length other than 32, bytes that are not a curve point, and the
    /// small-order (weak) points.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, KeyError> {
        let bytes: &[u8; 32] = bytes
            .try_into()
            .map_err(|_| KeyError::InvalidLength(bytes.len()))?;
        let key =
            ed25519_dalek::VerifyingKey::from_bytes(bytes).map_err(|_| KeyError::NotAPoint)?;
        if key.is_weak() {
            return Err(KeyError::WeakKey);
        }
        Ok(Self(key))
    }

    /// The 32-byte encoding.
    pub fn as_bytes(&self) -> &[u8; 32] {
        self.0.as_bytes()
    }

    /// The key of an RFC 8037 JWK: `kty` `"OKP"`, `crv` `"Ed25519"`, `x` the key in
    /// base64url without padding. Other members are ignored, except that a JWK
    /// with `d` (a private key) is refused.
    pub fn from_jwk(jwk: &Jwk) -> Result<Self, KeyError> {
        if jwk.has_private_key {
            return Err(KeyError::PrivateJwk);
        }
        if jwk.kty != JWK_KTY || jwk.crv != JWK_CRV {
            return Err(KeyError::UnsupportedJwk {
                kty: jwk.kty.clone(),
                crv: jwk.crv.clone(),
            });
        }
        // Describe the problem without echoing the offending character.
        let bytes = URL_SAFE_NO_PAD.decode(&jwk.x).map_err(|error| {
            KeyError::InvalidX(match error {
                base64::DecodeError::InvalidByte(_, b'=') => "it has `=` padding",
                base64::DecodeError::InvalidByte(..) => {
                    "it contains a character outside A-Z a-z 0-9 - _"
                }
                base64::DecodeError::InvalidLength(_) => {
                    "it has a number of characters no encoding produces"
                }
                base64::DecodeError::InvalidLastSymbol(..) => {
                    "its last character has bits set that no encoder produces"
                }
                base64::DecodeError::InvalidPadding => "it has `=` padding",
            })
        })?;
        Self::from_bytes(&bytes)
    }

    /// The key as an RFC 8037 JWK, `{"kty":"OKP","crv":"Ed25519","x":"…"}`.
    pub fn to_jwk(&self) -> Jwk {
        Jwk {
            kty: JWK_KTY.to_owned(),
            crv: JWK_CRV.to_owned(),
            x: self.x(),
            has_private_key: false,
        }
    }

    /// The RFC 7638 JWK thumbprint with SHA-256, base64url without padding: the
    /// hash of `{"crv":"Ed25519","kty":"OKP","x":"…"}` (the required members,
    /// sorted, no whitespace; RFC 8037 §2 names them).
    pub fn thumbprint(&self) -> String {
        let canonical = format!(
            r#"{{"crv":"{JWK_CRV}","kty":"{JWK_KTY}","x":"{}"}}"#,
            self.x()
        );
        URL_SAFE_NO_PAD.encode(Sha256::digest(canonical.as_bytes()))
    }

    /// The JWK's `x`: the encoding in base64url without padding.
    fn x(&self) -> String {
        URL_SAFE_NO_PAD.encode(self.as_bytes())
    }
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PublicKey").field(&self.x()).finish()
    }
}

/// A public key as an RFC 7517 JSON Web Key, the shape the API carries.
///
/// Compatibility: members may be added (additive only within v1). Unknown
/// members are ignored on input. A `d` member (a private key) is not kept:
/// deserializing only records that it was there, in `has_private_key`, so that
/// [`PublicKey::from_jwk`] can refuse the key with a message that says why.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Jwk {
    /// The key type: `"OKP"`.
    pub kty: String,
    /// The curve: `"Ed25519"`.
    pub crv: String,
    /// The public key, base64url without padding.
    pub x: String,
    /// Whether the JSON had a `d` member (the private key, whose value is
    /// dropped unread). Never serialized; `false` in what [`PublicKey::to_jwk`]
    /// makes.
    #[serde(rename = "d", default, skip_serializing, deserialize_with = "present")]
    pub has_private_key: bool,
}

/// Deserializes any value, discarding it, as `true`: the member was present.
fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<bool, D::Error> {
    serde::de::IgnoredAny::deserialize(deserializer).map(|_| true)
}
