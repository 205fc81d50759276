//! [`ClientBuilder`]: a [`Client`]'s settings (timeouts, user agent, retries, trust
//! roots) and its credential: a static token, or access tokens that renew
//! (`renewal.rs`: a device login's refresh token, the local token broker, any
//! [`TokenSource`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::Url;
use reqwest::header::HeaderValue;

use super::{Client, Inner};
use crate::call::{bearer, parse_base_url};
use crate::renewal::{Fresh, Session, TokenSource};
use crate::retry::{RetryPolicy, RetryQuota};
use crate::{Error, Token};

/// The regional boundary header (see [`ClientBuilder::region_constraint`]).
pub const REGION_CONSTRAINT: &str = "x-region-constraint";

const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Builds a [`Client`] with non-default settings.
#[derive(Debug, Clone)]
pub struct ClientBuilder {
    connect_timeout: Duration,
    request_timeout: Duration,
    user_agent: String,
    retry: RetryPolicy,
    roots: Vec<reqwest::Certificate>,
    region_constraint: Option<String>,
    signing_key: Option<crate::signing::SigningKey>,
}

impl Default for ClientBuilder {
    fn default() -> Self {
        Self {
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            request_timeout: DEFAULT_REQUEST_TIMEOUT,
            user_agent: concat!("switchboard-sdk/", env!("CARGO_PKG_VERSION")).to_owned(),
            retry: RetryPolicy::standard(),
            roots: Vec::new(),
            region_constraint: None,
            signing_key: None,
        }
    }
}

impl ClientBuilder {
    /// Time allowed to establish a connection (default 5 s). Also applies to SSE.
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = timeout;
        self
    }

    /// Time allowed for a whole request, body included (default 30 s). SSE streams,
    /// which stay open, get it for their response head only ([`Error::Timeout`]).
    pub fn request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// The `User-Agent` header (default `switchboard-sdk/<version>`).
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = user_agent.into();
        self
    }

    /// How failed calls are retried (default [`RetryPolicy::standard`]: 5 attempts
    /// within 30 s, decorrelated jitter, `Retry-After` honored, a client-wide quota).
    /// [`RetryPolicy::none`] makes every call a single attempt.
    pub fn retry(mut self, policy: RetryPolicy) -> Self {
        self.retry = policy;
        self
    }

    /// Sends `X-Region-Constraint: <regions>` with every request (the client SDK
    /// seed's regional boundary, §9.3): a server that is not in one of them refuses
    /// the request before doing anything, with [`ErrorCode::RegionMismatch`]
    /// (`region_mismatch`). `None` (the default) sends no constraint.
    ///
    /// [`ErrorCode::RegionMismatch`]: crate::proto::ErrorCode::RegionMismatch
    pub fn region_constraint(mut self, regions: Option<impl Into<String>>) -> Self {
        self.region_constraint = regions.map(Into::into);
        self
    }

    /// Signs every request with `key` (RFC 9421, Ed25519; `signing.rs`): the key
    /// bound to this credential at login or by [`Client::register_key`]. `None`
    /// (the default) signs nothing.
    pub fn signing_key(mut self, key: Option<crate::signing::SigningKey>) -> Self {
        self.signing_key = key;
        self
    }

    /// Also trusts the certificates of `pem` (one or more `BEGIN CERTIFICATE`
    /// blocks): a server whose certificate a private CA signed (`--ca-file`).
    /// [`Error::InvalidInput`] when `pem` holds no certificate.
    pub fn ca_pem(mut self, pem: &[u8]) -> Result<Self, Error> {
        let certs = reqwest::Certificate::from_pem_bundle(pem)
            .map_err(|e| Error::InvalidInput(format!("the CA file is not PEM: {e}")))?;
        if certs.is_empty() {
            return Err(Error::InvalidInput(
                "the CA file holds no certificate (expected BEGIN CERTIFICATE blocks)".into(),
            ));
        }
        self.roots.extend(certs);
        Ok(self)
    }

    /// Builds the client for the server at `base_url` (`http` or `https`).
    ///
    /// Fails with [`Error::InvalidUrl`] for an unusable URL, [`Error::InvalidInput`]
    /// for a token a header cannot carry, and [`Error::Transport`] when the TLS
    /// backend cannot be set up.
    pub fn build(self, base_url: &str, token: impl Into<Token>) -> Result<Client, Error> {
        let authorization = bearer(&token.into())?;
        self.build_inner(base_url, authorization, |_| Ok(None))
    }

    /// Builds a client for a login that refreshes (a device login): it gets access
    /// tokens with the refresh token in `store`, renews them ahead of their expiry
    /// and on a 401, and saves every rotated refresh token there (`login.rs`).
    pub fn build_with_login(
        self,
        base_url: &str,
        store: Arc<dyn crate::login::RefreshTokenStore>,
    ) -> Result<Client, Error> {
        let placeholder = HeaderValue::from_static("Bearer -");
        self.build_inner(base_url, placeholder, |root| {
            let source = crate::login::RefreshLogin::new(root, store)?;
            Ok(Some(Arc::new(Session::new(Arc::new(source)))))
        })
    }

    /// Builds a client whose access tokens come from `source` (`renewal.rs`):
    /// fetched when the first request needs one (or `first`, when given, is used
    /// until it is due), renewed ahead of their expiry and once on a 401, shared by
    /// every clone of the client.
    pub fn build_with_source(
        self,
        base_url: &str,
        source: Arc<dyn TokenSource>,
        first: Option<Fresh>,
    ) -> Result<Client, Error> {
        let issued = Instant::now();
        let placeholder = HeaderValue::from_static("Bearer -");
        self.build_inner(base_url, placeholder, |_| {
            let session = match &first {
                Some(first) => Session::seeded(source, first, issued)?,
                None => Session::new(source),
            };
            Ok(Some(Arc::new(session)))
        })
    }

    fn build_inner(
        self,
        base_url: &str,
        authorization: HeaderValue,
        session: impl FnOnce(&Url) -> Result<Option<Arc<Session>>, Error>,
    ) -> Result<Client, Error> {
        let root = parse_base_url(base_url)?;
        let session = session(&root)?;
        let mut api = root.clone();
        api.path_segments_mut()
            .map_err(|()| Error::InvalidUrl(format!("{base_url} cannot be a base URL")))?
            .extend(["api", "v1"]);
        let mut headers = reqwest::header::HeaderMap::new();
        if let Some(regions) = &self.region_constraint {
            let value = HeaderValue::from_str(regions).map_err(|_| {
                Error::InvalidInput(format!(
                    "the region constraint {regions:?} cannot be a header value"
                ))
            })?;
            headers.insert(REGION_CONSTRAINT, value);
        }
        let mut http = reqwest::Client::builder()
            .connect_timeout(self.connect_timeout)
            .default_headers(headers)
            .user_agent(self.user_agent);
        for root in self.roots {
            http = http.add_root_certificate(root);
        }
        let http = http.build()?;
        Ok(Client {
            inner: Arc::new(Inner {
                http,
                root,
                api,
                authorization,
                session,
                request_timeout: self.request_timeout,
                quota: Arc::new(RetryQuota::new(self.retry.quota_capacity)),
                retry: self.retry,
                settings: Arc::default(),
                signer: Arc::new(crate::signing::Signer::new(self.signing_key)),
            }),
        })
    }
}
