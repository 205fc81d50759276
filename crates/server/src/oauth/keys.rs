//! The keys that sign access tokens: Ed25519 (JOSE `EdDSA`), made here, kept in
//! `signing_keys` with the private half sealed under the server key (the webhook
//! key file: instances sharing a database share it already), and published in the
//! JWKS by their RFC 7638 thumbprint as `kid`.
//!
//! Rotation. Keys form one group per server key (`sealed_with`); in a deployment
//! configured as it should be, one group. An instance signs with the newest key of
//! its own group and makes the next one when that key is [`Config::signing_key_rotation`]
//! old (two instances doing so at once make two keys; both are published, one wins).
//! A key that a newer key of its group replaced stays published for
//! [`GRACE`] after it (longer than any token lives), then is deleted; the newest
//! key of a group nobody rotates any more (an instance gone, or one with another
//! server key) goes [`GRACE`] after its rotation was due. The rule is
//! [`live`], a pure function.
//!
//! Every instance reloads the keys on each maintenance pass ([`MAINTAIN_EVERY`])
//! and when a token names a `kid` it does not know (at most every
//! [`RELOAD_AT_MOST_EVERY`], so forged `kid`s cannot turn into database reads).
//!
//! [`Config::signing_key_rotation`]: crate::config::Config::signing_key_rotation

use crate::clock::Millis;
use crate::sealing::WebhookKey;
use crate::store::{SigningKeyRow, Store, StoreResult};
use aws_lc_rs::signature::{Ed25519KeyPair, KeyPair};
use base64::Engine as _;
use jsonwebtoken::{DecodingKey, EncodingKey};
use sha2::{Digest, Sha256};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// The JOSE algorithm of every key.
pub const ALGORITHM: &str = "EdDSA";

/// How long a replaced key stays published: the longest token life and a margin
/// for clocks and caches.
pub const GRACE: Duration = Duration::from_secs(35 * 60);

/// How often (on the server's clock) a maintenance pass reloads, rotates and
/// deletes keys.
pub const MAINTAIN_EVERY: Duration = Duration::from_secs(60);

/// An unknown `kid` reloads the keys at most this often (real time).
pub const RELOAD_AT_MOST_EVERY: Duration = Duration::from_millis(200);

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// A published key.
#[derive(Clone)]
pub struct PublicKey {
    pub kid: String,
    /// The raw Ed25519 public key.
    pub x: Vec<u8>,
    pub created_at: Millis,
    decoding: DecodingKey,
}

impl PublicKey {
    /// Its JWK (RFC 8037), as the JWKS lists it.
    pub fn jwk(&self) -> serde_json::Value {
        serde_json::json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "x": B64.encode(&self.x),
            "kid": self.kid,
            "use": "sig",
            "alg": ALGORITHM,
        })
    }
}

struct Signer {
    kid: String,
    key: EncodingKey,
}

#[derive(Default)]
struct Loaded {
    public: Vec<PublicKey>,
    signer: Option<Signer>,
}

/// This instance's view of the signing keys.
pub struct SigningKeys {
    loaded: RwLock<Arc<Loaded>>,
    /// When an unknown `kid` last reloaded the keys (real time).
    reloaded: Mutex<Option<Instant>>,
    /// When the last maintenance pass ran (server clock).
    maintained: Mutex<Option<Millis>>,
    rotation: Millis,
}

/// The RFC 7638 thumbprint of an Ed25519 public key: its `kid`.
pub fn thumbprint(x: &[u8]) -> String {
    let canonical = format!(r#"{{"crv":"Ed25519","kty":"OKP","x":"{}"}}"#, B64.encode(x));
    B64.encode(Sha256::digest(canonical.as_bytes()))
}

/// Which of `rows` (oldest first) are still published at `now`: a key replaced by a
/// newer one of its group until [`GRACE`] after that one was made; the newest of
/// its group until [`GRACE`] after its rotation was due.
pub fn live(rows: &[SigningKeyRow], now: Millis, rotation: Millis) -> Vec<bool> {
    let grace = GRACE.as_millis() as Millis;
    rows.iter()
        .enumerate()
        .map(|(i, row)| {
            let next = rows[i + 1..]
                .iter()
                .find(|r| r.sealed_with == row.sealed_with);
            match next {
                Some(next) => now < next.created_at + grace,
                None => now < row.created_at + rotation + grace,
            }
        })
        .collect()
}

/// The associated data a signing key's private half is sealed with.
fn sealed_as(kid: &str) -> String {
    format!("signing-key:{kid}")
}

/// A new key, its private half sealed under `sealer`.
fn generate(sealer: &WebhookKey, now: Millis) -> Result<SigningKeyRow, String> {
    let rng = aws_lc_rs::rand::SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng)
        .map_err(|_| "the system random generator failed".to_owned())?;
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref())
        .map_err(|_| "a new Ed25519 key did not parse".to_owned())?;
    let public_key = pair.public_key().as_ref().to_vec();
    let kid = thumbprint(&public_key);
    Ok(SigningKeyRow {
        private_key: sealer.seal_for(&sealed_as(&kid), pkcs8.as_ref()),
        kid,
        algorithm: ALGORITHM.to_owned(),
        public_key,
        sealed_with: sealer.id().to_owned(),
        created_at: now,
    })
}

impl SigningKeys {
    /// Loads the keys, making this instance's first one if it has none.
    pub async fn open(
        store: &dyn Store,
        sealer: &WebhookKey,
        rotation: Duration,
        now: Millis,
    ) -> StoreResult<Self> {
        let keys = Self {
            loaded: RwLock::new(Arc::default()),
            reloaded: Mutex::new(None),
            maintained: Mutex::new(None),
            rotation: rotation.as_millis() as Millis,
        };
        keys.maintain(store, sealer, now).await?;
        Ok(keys)
    }

    fn loaded(&self) -> Arc<Loaded> {
        self.loaded
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The published keys, oldest first.
    pub fn public(&self) -> Vec<PublicKey> {
        self.loaded().public.clone()
    }

    /// The key `kid` to verify with, if it is published.
    pub fn decoding(&self, kid: &str) -> Option<DecodingKey> {
        self.loaded()
            .public
            .iter()
            .find(|k| k.kid == kid)
            .map(|k| k.decoding.clone())
    }

    /// Signs `claims` with the current key.
    pub fn sign<T: serde::Serialize>(&self, claims: &T) -> Result<String, String> {
        let loaded = self.loaded();
        let signer = loaded
            .signer
            .as_ref()
            .ok_or_else(|| "this instance has no signing key it can open".to_owned())?;
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::EdDSA);
        header.kid = Some(signer.kid.clone());
        header.typ = Some("at+jwt".to_owned());
        jsonwebtoken::encode(&header, claims, &signer.key).map_err(|e| e.to_string())
    }

    /// A maintenance pass when one is due ([`MAINTAIN_EVERY`] since the last);
    /// whether it ran.
    pub async fn maintain_if_due(
        &self,
        store: &dyn Store,
        sealer: &WebhookKey,
        now: Millis,
    ) -> StoreResult<bool> {
        let due = self
            .maintained
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_none_or(|at| (now - at).abs() >= MAINTAIN_EVERY.as_millis() as Millis);
        if due {
            self.maintain(store, sealer, now).await?;
        }
        Ok(due)
    }

    /// Reloads the keys after a token named an unknown `kid`, unless that happened
    /// within [`RELOAD_AT_MOST_EVERY`]; whether it reloaded.
    pub async fn reload_for_unknown(
        &self,
        store: &dyn Store,
        sealer: &WebhookKey,
        now: Millis,
    ) -> StoreResult<bool> {
        {
            let mut last = self.reloaded.lock().unwrap_or_else(|e| e.into_inner());
            if last.is_some_and(|at| at.elapsed() < RELOAD_AT_MOST_EVERY) {
                return Ok(false);
            }
            *last = Some(Instant::now());
        }
        let rows = store.signing_keys().await?;
        self.install(&rows, sealer, now);
        Ok(true)
    }

    /// Deletes the keys no longer published, makes the next key when this
    /// instance's is due, and loads what remains.
    pub async fn maintain(
        &self,
        store: &dyn Store,
        sealer: &WebhookKey,
        now: Millis,
    ) -> StoreResult<()> {
        *self.maintained.lock().unwrap_or_else(|e| e.into_inner()) = Some(now);
        let mut rows = store.signing_keys().await?;
        let live = live(&rows, now, self.rotation);
        let mut kept = Vec::with_capacity(rows.len());
        for (row, live) in rows.drain(..).zip(live) {
            if live {
                kept.push(row);
            } else {
                store.delete_signing_key(&row.kid).await?;
                tracing::info!(kid = %row.kid, "signing key retired: every token it signed has expired");
            }
        }
        let own = kept.iter().rev().find(|r| r.sealed_with == sealer.id());
        if own.is_none_or(|r| now >= r.created_at + self.rotation) {
            let row = generate(sealer, now).map_err(crate::store::StoreError::Aborted)?;
            store.insert_signing_key(&row).await?;
            tracing::info!(kid = %row.kid, "new signing key; it signs access tokens from now on");
            kept.push(row);
        }
        self.install(&kept, sealer, now);
        Ok(())
    }

    /// Makes `rows` (oldest first) this instance's view: the published ones and
    /// the newest of its own group to sign with.
    fn install(&self, rows: &[SigningKeyRow], sealer: &WebhookKey, now: Millis) {
        let live = live(rows, now, self.rotation);
        let public = rows
            .iter()
            .zip(&live)
            .filter(|(row, live)| **live && row.algorithm == ALGORITHM)
            .map(|(row, _)| PublicKey {
                kid: row.kid.clone(),
                x: row.public_key.clone(),
                created_at: row.created_at,
                decoding: DecodingKey::from_ed_der(&row.public_key),
            })
            .collect();
        let signer = rows
            .iter()
            .rev()
            .find(|r| r.sealed_with == sealer.id() && r.algorithm == ALGORITHM)
            .and_then(|row| {
                match sealer.open_for(&sealed_as(&row.kid), &row.sealed_with, &row.private_key) {
                    Ok(pkcs8) => Some(Signer {
                        kid: row.kid.clone(),
                        key: EncodingKey::from_ed_der(&pkcs8),
                    }),
                    Err(e) => {
                        tracing::warn!(kid = %row.kid, error = %e, "a signing key does not open");
                        None
                    }
                }
            });
        *self.loaded.write().unwrap_or_else(|e| e.into_inner()) =
            Arc::new(Loaded { public, signer });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(kid: &str, group: &str, created_at: Millis) -> SigningKeyRow {
        SigningKeyRow {
            kid: kid.to_owned(),
            algorithm: ALGORITHM.to_owned(),
            public_key: vec![],
            private_key: vec![],
            sealed_with: group.to_owned(),
            created_at,
        }
    }

    const DAY: Millis = 24 * 3600 * 1000;

    #[test]
    fn a_replaced_key_stays_published_for_the_grace_after_its_successor() {
        let grace = GRACE.as_millis() as Millis;
        let rows = [row("a", "g", 0), row("b", "g", 7 * DAY)];
        let rotation = 7 * DAY;
        assert_eq!(live(&rows, 7 * DAY, rotation), [true, true]);
        assert_eq!(live(&rows, 7 * DAY + grace - 1, rotation), [true, true]);
        assert_eq!(live(&rows, 7 * DAY + grace, rotation), [false, true]);
        // The newest goes only when nobody rotated it, a grace after it was due.
        assert_eq!(live(&rows, 14 * DAY + grace - 1, rotation), [false, true]);
        assert_eq!(live(&rows, 14 * DAY + grace, rotation), [false, false]);
    }

    #[test]
    fn each_server_key_group_rotates_on_its_own() {
        // Another group's newer key does not retire this group's current one.
        let rows = [row("a", "g", 0), row("x", "h", DAY)];
        assert_eq!(live(&rows, 2 * DAY, 7 * DAY), [true, true]);
    }

    #[test]
    fn the_kid_is_the_rfc_7638_thumbprint() {
        // RFC 8037 appendix A.3: the thumbprint of the example Ed25519 key.
        let x = B64
            .decode("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")
            .unwrap();
        assert_eq!(
            thumbprint(&x),
            "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k"
        );
    }
}
