//! Signed requests (issue 39): a client that holds an Ed25519 key signs every
//! request it sends with RFC 9421 HTTP Message Signatures (`@method`,
//! `@authority`, `@path`, `@query` when there is one, `content-digest` when there is
//! a body, `authorization`; `created`, `expires` 300 s later, a fresh `nonce`, the
//! key's RFC 7638 thumbprint as `keyid`, `alg="ed25519"`). The scheme is
//! `switchboard_webhook::agent`, the one RFC 9421 implementation the server
//! verifies with.
//!
//! Each attempt signs anew (a new nonce and `created`), so a retry is never a
//! replay; the server answers a retried idempotent call with its stored answer.
//!
//! The key is bound to the credential it was presented with: at login (device
//! flow: [`DeviceLogin::with_signing_key`](crate::login::DeviceLogin::with_signing_key))
//! or by [`Client::register_key`](crate::Client::register_key) for a static token.
//! From then on the server refuses that credential's unsigned requests, so a stolen
//! access token is useless without the key. [`Client::rotate_key`] replaces the key
//! while the client runs.
//!
//! [`Client::rotate_key`]: crate::Client::rotate_key

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, RwLock};

pub use switchboard_webhook::agent::{Jwk, PublicKey, SigningKey};

/// A key and its thumbprint (the `keyid`).
pub(crate) struct Held {
    key: SigningKey,
    jkt: String,
}

/// The key a client signs with, if any: shared by the clients derived from one
/// (same credential), and replaced in place by a rotation. With it, how far the
/// server's clock is from this machine's, in seconds, as the server last said
/// (a `signature_expired` answer carries its time): `created` is this machine's
/// time plus that, so an agent whose clock drifted signs inside the window.
#[derive(Default)]
pub(crate) struct Signer(RwLock<Option<Arc<Held>>>, AtomicI64);

impl Signer {
    pub(crate) fn new(key: Option<SigningKey>) -> Self {
        let signer = Self::default();
        signer.set(key);
        signer
    }

    pub(crate) fn current(&self) -> Option<Arc<Held>> {
        self.0.read().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// The server said its time is `server_time` (Unix seconds) now: signatures
    /// from now on are made with the difference. Whether it changed.
    pub(crate) fn learn_server_time(&self, server_time: i64) -> bool {
        let offset = server_time - unix_now();
        self.1.swap(offset, Ordering::Relaxed) != offset
    }

    pub(crate) fn set(&self, key: Option<SigningKey>) {
        let held = key.map(|key| {
            let jkt = key.public_key().thumbprint();
            Arc::new(Held { key, jkt })
        });
        *self.0.write().unwrap_or_else(|e| e.into_inner()) = held;
    }
}

impl Held {
    pub(crate) fn jkt(&self) -> &str {
        &self.jkt
    }
}

/// `@authority` of `url` as the server receives it in `Host`: the host (IPv6 in
/// brackets), and the port unless it is the scheme's default.
fn authority(url: &reqwest::Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// The server's time a `signature_expired` answer carries (Unix seconds).
pub(crate) fn server_time(refused: &crate::Error) -> Option<i64> {
    refused
        .problem()
        .and_then(|p| p.extensions.get("server_time"))
        .and_then(serde_json::Value::as_i64)
}

/// This machine's time, Unix seconds.
fn unix_now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64)
}

impl Signer {
    /// Adds `Content-Digest` (when there is a body), `Signature-Input` and
    /// `Signature` to `request`, signed now (on the server's clock as last learnt)
    /// with a new nonce.
    pub(crate) fn sign(
        &self,
        request: &mut reqwest::Request,
        held: &Held,
    ) -> Result<(), crate::Error> {
        sign(request, held, unix_now() + self.1.load(Ordering::Relaxed))
    }
}

/// Signs `request` with `key` now, as the client signs its own calls: adds
/// `Content-Digest` (when there is a body), `Signature-Input` and `Signature`,
/// covering `@method`, `@authority`, `@path`, `@query` when there is one,
/// `content-digest` when there is a body and `authorization` when the request has
/// it, with a new nonce and the key's thumbprint as `keyid`. Set every header it
/// must cover (and the body) first, and send it at once: the signature expires
/// after 300 s, and the server accepts it once.
///
/// For requests the [`Client`](crate::Client) does not make itself, such as a
/// token request (RFC 8693 token exchange) whose subject token is bound to `key`
/// (`cnf.jkt`): the server refuses to exchange a bound token unless the token
/// request is signed by its key.
///
/// A body that is a stream (not in memory) cannot be digested: that is
/// [`Error::InvalidInput`](crate::Error::InvalidInput).
///
/// ```
/// use switchboard_sdk::reqwest;
/// use switchboard_sdk::signing::{SigningKey, sign_request};
///
/// let key = SigningKey::generate();
/// let mut request = reqwest::Request::new(
///     reqwest::Method::POST,
///     "http://127.0.0.1:8080/oauth/token".parse()?,
/// );
/// request.headers_mut().insert(
///     reqwest::header::CONTENT_TYPE,
///     "application/x-www-form-urlencoded".parse()?,
/// );
/// *request.body_mut() = Some("grant_type=...".into());
/// sign_request(&mut request, &key)?;
/// assert!(request.headers().contains_key("signature"));
/// assert!(request.headers().contains_key("content-digest"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn sign_request(request: &mut reqwest::Request, key: &SigningKey) -> Result<(), crate::Error> {
    if request.body().is_some_and(|b| b.as_bytes().is_none()) {
        return Err(crate::Error::InvalidInput(
            "a request with a streaming body cannot be signed: its Content-Digest needs the \
             whole body; give the body as bytes"
                .to_owned(),
        ));
    }
    let held = Held {
        key: key.clone(),
        jkt: key.public_key().thumbprint(),
    };
    sign(request, &held, unix_now())
}

fn sign(request: &mut reqwest::Request, held: &Held, created: i64) -> Result<(), crate::Error> {
    let url = request.url();
    let authority = authority(url);
    let path_and_query = match url.query() {
        Some(query) => format!("{}?{query}", url.path()),
        None => url.path().to_owned(),
    };
    let body = request
        .body()
        .and_then(reqwest::Body::as_bytes)
        .unwrap_or_default();
    let view = switchboard_webhook::agent::Request {
        method: request.method().as_str(),
        authority: &authority,
        path_and_query: &path_and_query,
        headers: request.headers(),
        body,
    };
    let nonce = switchboard_webhook::agent::new_nonce();
    let signed = switchboard_webhook::agent::sign(&held.key, &held.jkt, &view, created, &nonce);
    for (name, value) in signed {
        let value = reqwest::header::HeaderValue::try_from(value).map_err(|_| {
            crate::Error::InvalidInput(format!("the {name} header could not be made"))
        })?;
        request.headers_mut().insert(name, value);
    }
    Ok(())
}
