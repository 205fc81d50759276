//! The server's webhook key: it seals each callback's secret at rest, so a copy of
//! the database (a backup, a dump) does not give away the secrets that sign
//! deliveries. XChaCha20-Poly1305 (a random 192-bit nonce per seal, so no counter to
//! keep), with the callback id as associated data: a sealed secret moved to another
//! callback's row does not open. Svix keeps endpoint secrets the same way, under its
//! `main_secret`.
//!
//! The key is 32 random bytes, base64 in a file of mode 0600 (created on first start).
//! Instances sharing a database must share the file; each sealed secret records the
//! key's fingerprint ([`WebhookKey::id`]), so an instance with another key says so
//! instead of failing to open it.

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};
use std::path::Path;
use switchboard_proto::CallbackId;

const NONCE: usize = 24;

pub struct WebhookKey {
    cipher: XChaCha20Poly1305,
    id: String,
}

impl std::fmt::Debug for WebhookKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebhookKey").field("id", &self.id).finish()
    }
}

/// Why a sealed secret did not open.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(
        "this secret was sealed with webhook key {sealed_with}, and this instance has key \
         {ours}: give every instance the same --webhook-key-file"
    )]
    OtherKey { sealed_with: String, ours: String },
    #[error("the sealed secret is damaged (it does not authenticate under this key)")]
    Damaged,
}

impl WebhookKey {
    pub fn from_bytes(bytes: &[u8; 32]) -> Self {
        let id =
            hex(&Sha256::digest([b"switchboard webhook key\n".as_slice(), bytes].concat())[..8]);
        Self {
            cipher: XChaCha20Poly1305::new(bytes.into()),
            id,
        }
    }

    /// A fresh random key (held in memory only).
    pub fn generate() -> Self {
        Self::from_bytes(&rand::random())
    }

    /// Reads the key from `path`, or creates it there (mode 0600) when the file does
    /// not exist. An error says what is wrong with the file and how to fix it.
    pub fn load_or_create(path: &Path) -> Result<Self, String> {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let bytes = b64.decode(text.trim()).map_err(|_| {
                    format!(
                        "the webhook key file {} is not base64; it holds 32 random bytes in \
                         base64 (delete it to make a new one, which makes the stored callback \
                         secrets unreadable)",
                        path.display()
                    )
                })?;
                let bytes: [u8; 32] = bytes.try_into().map_err(|b: Vec<u8>| {
                    format!(
                        "the webhook key file {} holds {} bytes; it must hold 32",
                        path.display(),
                        b.len()
                    )
                })?;
                Ok(Self::from_bytes(&bytes))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                let bytes: [u8; 32] = rand::random();
                match crate::config::write_private(path, b64.encode(bytes).as_bytes(), false) {
                    Ok(()) => Ok(Self::from_bytes(&bytes)),
                    // Another instance made it first: use that one.
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                        Self::load_or_create(path)
                    }
                    Err(e) => Err(format!(
                        "could not create the webhook key file {}: {e}",
                        path.display()
                    )),
                }
            }
            Err(e) => Err(format!(
                "could not read the webhook key file {}: {e}",
                path.display()
            )),
        }
    }

    /// The key's fingerprint: the first 8 bytes of a SHA-256 of it, in hex. Stored
    /// beside each sealed secret; it reveals nothing of the key.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `nonce || ciphertext` of `secret`, bound to `callback`.
    pub fn seal(&self, callback: CallbackId, secret: &[u8]) -> Vec<u8> {
        self.seal_for(&callback.to_string(), secret)
    }

    /// Seals `secret` bound to `aad`, the name of the row that holds it (a callback
    /// id, a signing key's `signing-key:{kid}`): it opens only for that name.
    pub fn seal_for(&self, aad: &str, secret: &[u8]) -> Vec<u8> {
        let nonce: [u8; NONCE] = rand::random();
        let sealed = self
            .cipher
            .encrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: secret,
                    aad: aad.as_bytes(),
                },
            )
            // Encryption fails only for a message longer than the cipher allows
            // (256 GiB); what it seals is at most a few hundred bytes.
            .unwrap_or_default();
        [nonce.as_slice(), &sealed].concat()
    }

    /// The secret sealed by [`seal`](Self::seal) for `callback` under key `key_id`.
    pub fn open(
        &self,
        callback: CallbackId,
        key_id: &str,
        sealed: &[u8],
    ) -> Result<Vec<u8>, OpenError> {
        self.open_for(&callback.to_string(), key_id, sealed)
    }

    /// The secret sealed by [`seal_for`](Self::seal_for) for `aad` under key `key_id`.
    pub fn open_for(&self, aad: &str, key_id: &str, sealed: &[u8]) -> Result<Vec<u8>, OpenError> {
        if key_id != self.id {
            return Err(OpenError::OtherKey {
                sealed_with: key_id.to_owned(),
                ours: self.id.clone(),
            });
        }
        if sealed.len() < NONCE {
            return Err(OpenError::Damaged);
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE);
        let nonce: [u8; NONCE] = nonce.try_into().map_err(|_| OpenError::Damaged)?;
        self.cipher
            .decrypt(
                &XNonce::from(nonce),
                Payload {
                    msg: ciphertext,
                    aad: aad.as_bytes(),
                },
            )
            .map_err(|_| OpenError::Damaged)
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_secret_opens_only_for_its_callback_and_key() {
        let key = WebhookKey::generate();
        let cb = CallbackId::new();
        let sealed = key.seal(cb, b"the secret bytes");
        assert!(
            !sealed.windows(6).any(|w| w == b"secret"),
            "not in the clear"
        );
        assert_eq!(
            key.open(cb, key.id(), &sealed).unwrap(),
            b"the secret bytes"
        );
        // Two seals of one secret differ (a fresh nonce each).
        assert_ne!(key.seal(cb, b"the secret bytes"), sealed);
        // Another callback's row, a flipped bit, another key: refused.
        assert!(matches!(
            key.open(CallbackId::new(), key.id(), &sealed),
            Err(OpenError::Damaged)
        ));
        let mut flipped = sealed.clone();
        flipped[30] ^= 1;
        assert!(matches!(
            key.open(cb, key.id(), &flipped),
            Err(OpenError::Damaged)
        ));
        let other = WebhookKey::generate();
        assert_ne!(other.id(), key.id());
        let e = other.open(cb, key.id(), &sealed).unwrap_err();
        assert!(e.to_string().contains("--webhook-key-file"), "{e}");
        assert!(matches!(
            other.open(cb, other.id(), &sealed),
            Err(OpenError::Damaged)
        ));
        assert!(
            !format!("{key:?}").contains("cipher"),
            "Debug shows the id only"
        );
    }

    #[test]
    fn the_key_file_is_created_private_and_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("nested/webhook-key");
        let first = WebhookKey::load_or_create(&path).unwrap();
        let again = WebhookKey::load_or_create(&path).unwrap();
        assert_eq!(first.id(), again.id());
        let cb = CallbackId::new();
        let sealed = first.seal(cb, b"x");
        assert_eq!(again.open(cb, again.id(), &sealed).unwrap(), b"x");
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        std::fs::write(&path, "not base64!").unwrap();
        let e = WebhookKey::load_or_create(&path).unwrap_err();
        assert!(e.contains("not base64"), "{e}");
        std::fs::write(&path, "AAAA").unwrap();
        let e = WebhookKey::load_or_create(&path).unwrap_err();
        assert!(e.contains("holds 3 bytes"), "{e}");
    }
}
