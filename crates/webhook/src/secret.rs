//! The shared webhook secret: `whsec_<base64 of 24..=64 random bytes>`.

use std::fmt;
use std::str::FromStr;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use hmac::digest::KeyInit;
use hmac::{Hmac, Mac as _};
use rand::RngCore as _;
use sha2::Sha256;

/// The prefix of a secret's text form.
pub const SECRET_PREFIX: &str = "whsec_";
/// The fewest secret bytes accepted (the Standard Webhooks minimum).
pub const MIN_SECRET_LEN: usize = 24;
/// The most secret bytes accepted (the Standard Webhooks maximum; also HMAC-SHA256's
/// block size, so a key is never hashed down).
pub const MAX_SECRET_LEN: usize = 64;
/// How many bytes [`Secret::generate`] draws.
pub const GENERATED_SECRET_LEN: usize = 32;

/// The HMAC-SHA256 key shared by the server and one callback's receiver.
///
/// Holds the decoded bytes (24 to 64 of them). Its `Debug` prints `Secret(..)` and it
/// has no `Display`: the only way to get the bytes back out is [`Secret::to_whsec`].
#[derive(Clone)]
pub struct Secret {
    bytes: Vec<u8>,
}

/// Why a secret was refused. No variant carries any of the secret's characters.
#[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum SecretError {
    /// The text does not start with `whsec_`.
    #[error("a webhook secret must start with `whsec_`")]
    MissingPrefix,
    /// The part after the prefix is not standard, padded base64.
    #[error("the part after `whsec_` is not standard padded base64: {0}")]
    InvalidBase64(&'static str),
    /// The decoded secret is shorter than 24 or longer than 64 bytes.
    #[error("a webhook secret must decode to 24 to 64 bytes, this one has {0}")]
    InvalidLength(usize),
}

impl Secret {
    /// Parses `whsec_<base64>` (standard alphabet, padded).
    ///
    /// Refuses a missing prefix, anything that is not canonical padded base64, and
    /// a decoded length outside 24..=64 bytes.
    pub fn parse(text: &str) -> Result<Self, SecretError> {
        let encoded = text
            .strip_prefix(SECRET_PREFIX)
            .ok_or(SecretError::MissingPrefix)?;
        let bytes = STANDARD.decode(encoded).map_err(|error| {
            // Describe the problem without echoing the offending character.
            SecretError::InvalidBase64(match error {
                base64::DecodeError::InvalidByte(..) => {
                    "it contains a character outside A-Z a-z 0-9 + / ="
                }
                base64::DecodeError::InvalidLength(_) => {
                    "it has a number of characters no encoding produces"
                }
                base64::DecodeError::InvalidLastSymbol(..) => {
                    "its last character has bits set that no encoder produces"
                }
                base64::DecodeError::InvalidPadding => "its `=` padding is missing or wrong",
            })
        })?;
        Self::from_bytes(&bytes)
    }

    /// Wraps raw key bytes, refusing a length outside 24..=64.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, SecretError> {
        if (MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&bytes.len()) {
            Ok(Self {
                bytes: bytes.to_vec(),
            })
        } else {
            Err(SecretError::InvalidLength(bytes.len()))
        }
    }

    /// A new random secret of 32 bytes from the thread-local CSPRNG (`rand::rng()`,
    /// seeded from the operating system).
    pub fn generate() -> Self {
        let mut bytes = vec![0_u8; GENERATED_SECRET_LEN];
        rand::rng().fill_bytes(&mut bytes);
        Self { bytes }
    }

    /// The text form, `whsec_<base64>`, to show once to the user who registers a
    /// callback (or to store). Treat the result as the secret itself.
    pub fn to_whsec(&self) -> String {
        format!("{SECRET_PREFIX}{}", STANDARD.encode(&self.bytes))
    }

    /// HMAC-SHA256 keyed with this secret.
    pub(crate) fn mac(&self) -> Hmac<Sha256> {
        // HMAC zero-pads a key shorter than the hash's block size (RFC 2104, step 1),
        // so padding it here gives the same MAC. Every `Secret` is at most 64 bytes,
        // SHA-256's block size, which makes this constructor infallible (the slice
        // constructor returns a `Result` that could never be an error).
        let mut block = [0_u8; MAX_SECRET_LEN];
        block[..self.bytes.len()].copy_from_slice(&self.bytes);
        <Hmac<Sha256> as KeyInit>::new(&block.into())
    }

    /// HMAC-SHA256 of `message` with this secret.
    pub(crate) fn sign_bytes(&self, message: &[u8]) -> [u8; 32] {
        let mut mac = self.mac();
        mac.update(message);
        mac.finalize().into_bytes().into()
    }

    /// Whether `tag` is the HMAC-SHA256 of `message`, compared in constant time.
    pub(crate) fn verify_bytes(&self, message: &[u8], tag: &[u8]) -> bool {
        let mut mac = self.mac();
        mac.update(message);
        mac.verify_slice(tag).is_ok()
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(..)")
    }
}

impl FromStr for Secret {
    type Err = SecretError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::parse(text)
    }
}
