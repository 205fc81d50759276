//! [`Client`]: the typed HTTP client, its builder, and the one place requests are sent.
//!
//! Terms:
//! - *base URL*: where the server is mounted, e.g. `http://127.0.0.1:7070` (a path
//!   prefix behind a reverse proxy is kept). `/metrics` and `/healthz` live here.
//! - *API URL*: `{base}/api/v1`; every agent and operator path is under it.
//! - *call*: one HTTP exchange described as data (`Call`): method, URL, JSON body,
//!   idempotency key. Every typed method builds a call and hands it to
//!   [`Client::send`] (or `fetch`). That is the seam the retry loop wraps (see
//!   [`RetryPolicy`]) and a durable outbox will: a call can be sent again, or stored
//!   and sent after a crash, with the same key.
//! - *attempt*: one send of a call over the wire; a call makes one or more.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use reqwest::{Method, RequestBuilder, Response, Url};
use serde::de::DeserializeOwned;
use switchboard_proto::{Capabilities, EffectiveClientSettings};
use tokio::sync::watch;

use crate::call::Call;
use crate::retry::{self, RetryPolicy, RetryQuota};
use crate::settings::RemoteSettings;
use crate::{Error, Token};

mod builder;
mod exchange;
mod keys;
pub(crate) use crate::call::bearer;
pub use builder::{ClientBuilder, REGION_CONSTRAINT};
pub use exchange::Exchanged;

/// Request header carrying the idempotency key of a business write (invariant I8).
pub const IDEMPOTENCY_KEY: &str = "idempotency-key";
/// Response header the server sets to `true` when it replays a stored response.
pub const IDEMPOTENT_REPLAYED: &str = "idempotent-replayed";

/// A fresh idempotency key (a random UUIDv4). Keep it with the submission and send
/// the same key again when retrying it.
pub fn new_idempotency_key() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// An async client of the Switchboard HTTP API v1. Cheap to clone: clones share one
/// connection pool.
///
/// The same type serves agents and operators; what a call may do depends on the
/// token's scopes. Methods return [`Error::Api`] for any non-2xx answer; the codes
/// each method documents are the ones worth handling, and every method can also get
/// `unauthorized`, `forbidden`, `rate_limited` (with [`Error::retry_after`]),
/// `unavailable` and `internal`.
///
/// Transient failures are retried before a method returns (see [`RetryPolicy`] and
/// [`ClientBuilder::retry`]); the error returned is the last attempt's.
#[derive(Clone)]
pub struct Client {
    inner: Arc<Inner>,
}

/// Cloned (cheaply: the pool and the quota are shared) to derive clients.
#[derive(Clone)]
struct Inner {
    http: reqwest::Client,
    /// The base URL without a trailing slash.
    root: Url,
    /// `{root}/api/v1`.
    api: Url,
    /// `Bearer <token>`, marked sensitive so `Debug` of requests hides it.
    authorization: HeaderValue,
    /// Access tokens that renew (`renewal.rs`: a login's refresh token, the
    /// broker); `authorization` is unused then.
    session: Option<Arc<crate::renewal::Session>>,
    /// Applied per request (not client-wide) so SSE streams are not cut off by it.
    request_timeout: Duration,
    /// The per-call retry budget and backoff.
    retry: RetryPolicy,
    /// The client-wide retry quota. An `Arc` of its own, not just part of `Inner`:
    /// [`Client::with_token`] makes a new `Inner` that must keep draining and
    /// refilling the same bucket, since it talks to the same server.
    quota: Arc<RetryQuota>,
    /// What the server last said in `Switchboard-Client-Settings` (remote client
    /// settings). Shared by the clients derived with the same token; a client with
    /// another token (another agent) has its own.
    settings: Arc<RemoteSettings>,
    /// The key requests are signed with, if any (`signing.rs`); shared like
    /// `settings`, and replaced in place by [`Client::rotate_key`].
    signer: Arc<crate::signing::Signer>,
}

/// What the server said about a send besides its body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Sent {
    /// The HTTP status (201 for a new message; a replay repeats the stored status).
    pub status: u16,
    /// `true` when the server replayed the stored response of an earlier request
    /// with the same idempotency key (`Idempotent-Replayed: true`): nothing new
    /// was written.
    pub replayed: bool,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client")
            .field("base_url", &self.inner.root.as_str())
            .field("token", &"<redacted>")
            .finish_non_exhaustive()
    }
}

impl Client {
    /// A client for the server at `base_url` with default timeouts (connect 5 s,
    /// request 30 s). See [`ClientBuilder::build`] for the errors.
    pub fn new(base_url: &str, token: impl Into<Token>) -> Result<Self, Error> {
        Self::builder().build(base_url, token)
    }

    /// A builder for non-default timeouts or user agent.
    pub fn builder() -> ClientBuilder {
        ClientBuilder::default()
    }

    /// The same server, connection pool, retry policy and retry quota with another
    /// token (for example an operator client making agent clients).
    pub fn with_token(&self, token: impl Into<Token>) -> Result<Self, Error> {
        let authorization = bearer(&token.into())?;
        Ok(self.derive(|inner| {
            inner.authorization = authorization;
            inner.session = None;
            inner.settings = Arc::default();
            inner.signer = Arc::default();
        }))
    }

    /// The same client making exactly one attempt per call: for callers that keep
    /// their own durable retry schedule (the outbox).
    pub(crate) fn single_attempt(&self) -> Self {
        self.derive(|inner| inner.retry = RetryPolicy::none())
    }

    /// A client like this one (same pool, same quota) with `change` applied.
    fn derive(&self, change: impl FnOnce(&mut Inner)) -> Self {
        let mut inner = Inner::clone(&self.inner);
        change(&mut inner);
        Self {
            inner: Arc::new(inner),
        }
    }

    /// The remote client settings the server last sent for this client's agent
    /// (each response to an agent's request carries them): the polling ceiling the
    /// consumer obeys and whether client reports are paused. The defaults until a
    /// response said otherwise, and for operator tokens.
    pub fn client_settings(&self) -> EffectiveClientSettings {
        self.inner.settings.current()
    }

    /// Changes of [`Client::client_settings`], for the consumer's schedule.
    pub(crate) fn watch_client_settings(&self) -> watch::Receiver<EffectiveClientSettings> {
        self.inner.settings.subscribe()
    }

    /// The connection pool under this client (its TLS roots and connect timeout,
    /// no credential): for the OAuth endpoints ([`crate::login`]).
    pub fn http(&self) -> &reqwest::Client {
        &self.inner.http
    }

    /// The base URL, without a trailing slash.
    pub fn base_url(&self) -> &Url {
        &self.inner.root
    }

    /// Escape hatch: a request to `{base}/api/v1{path}` with the bearer token and the
    /// request timeout already set. `path` is used verbatim (encode it yourself) and
    /// may carry a query string. An unparsable result fails when the request is sent.
    /// It is sent once: the retry policy does not apply.
    pub fn request(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}/{}", self.inner.api, path.trim_start_matches('/'));
        self.authorized(method, url)
            .timeout(self.inner.request_timeout)
    }

    /// `GET /api/v1/capabilities`: versions, backend and the limits the server
    /// enforces.
    pub async fn capabilities(&self) -> Result<Capabilities, Error> {
        self.fetch(Call::get(self.api_url(&["capabilities"])?))
            .await
    }

    /// [`Client::capabilities`], refused with [`Error::Incompatible`] when the
    /// server speaks another major API version than this client
    /// ([`switchboard_proto::API_MAJOR`]). A newer minor version is fine: fields
    /// this client does not know are ignored. Call it once at start.
    pub async fn check_server(&self) -> Result<Capabilities, Error> {
        let caps = self.capabilities().await?;
        match switchboard_proto::api_major(&caps.api_version) {
            Some(major) if major == switchboard_proto::API_MAJOR => Ok(caps),
            _ => Err(Error::Incompatible {
                server: caps.api_version,
                client: switchboard_proto::API_MAJOR,
            }),
        }
    }

    /// `GET /healthz`: succeeds while the process is up.
    pub async fn healthz(&self) -> Result<(), Error> {
        self.send(Call::get(self.root_url(&["healthz"])?))
            .await
            .map(drop)
    }

    /// `GET /readyz`: succeeds when the server can serve (database reachable).
    /// `503 unavailable` otherwise.
    pub async fn readyz(&self) -> Result<(), Error> {
        self.send(Call::get(self.root_url(&["readyz"])?))
            .await
            .map(drop)
    }

    /// `GET /metrics`: the Prometheus text exposition.
    pub async fn metrics_text(&self) -> Result<String, Error> {
        let call = Call::get(self.root_url(&["metrics"])?);
        // The body is read inside the attempt, so a body cut short is retried too.
        let call = &call;
        self.retrying(call, |attempt| async move {
            Ok(self.exchange(call, attempt).await?.text().await?)
        })
        .await
    }

    /// `{base}/api/v1/{segments…}`, each segment percent-encoded.
    pub(crate) fn api_url(&self, segments: &[&str]) -> Result<Url, Error> {
        join(&self.inner.api, segments)
    }

    fn root_url(&self, segments: &[&str]) -> Result<Url, Error> {
        join(&self.inner.root, segments)
    }

    /// A request with the client's credential: its static token, or a login's
    /// last access token (fresh when a typed call just ran; `exchange` renews it).
    fn authorized(&self, method: Method, url: impl reqwest::IntoUrl) -> RequestBuilder {
        let header = match &self.inner.session {
            Some(session) => session.last_header(),
            None => Some(self.inner.authorization.clone()),
        };
        let request = self.inner.http.request(method, url);
        match header {
            Some(header) => request.header(AUTHORIZATION, header),
            None => request,
        }
    }

    /// Sends a call, retrying as the policy allows, and checks the status: any
    /// non-2xx becomes [`Error::Api`]. The returned response's body is unread (for
    /// streams and bodies the caller ignores; `fetch` reads bodies inside the
    /// attempt).
    pub(crate) async fn send(&self, call: Call) -> Result<Response, Error> {
        self.retrying(&call, |attempt| self.exchange(&call, attempt))
            .await
    }

    /// Runs `attempt` (one send of `call`) under the retry policy and quota.
    /// `attempt` gets the attempt's number, from 1.
    async fn retrying<T, F, Fut>(&self, call: &Call, mut attempt: F) -> Result<T, Error>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, Error>>,
    {
        let mut number = 0;
        let numbered = || {
            number += 1;
            attempt(number)
        };
        retry::run(&self.inner.retry, &self.inner.quota, call.repeat, numbered).await
    }

    /// One attempt: sends `call` once, logs it (minimized) and checks the status.
    async fn exchange(&self, call: &Call, attempt: u32) -> Result<Response, Error> {
        let started = std::time::Instant::now();
        let result = self.exchange_unlogged(call).await;
        log_exchange(call, attempt, started.elapsed(), &result);
        result
    }

    async fn exchange_unlogged(&self, call: &Call) -> Result<Response, Error> {
        let Some(session) = &self.inner.session else {
            return self
                .exchange_with(call, self.inner.authorization.clone())
                .await;
        };
        let (header, generation) = session.authorization(&self.inner.http).await?;
        match self.exchange_with(call, header).await {
            // Refused: the access token expired early (another clock) or was
            // revoked; renew it once and try again.
            Err(Error::Api { status: 401, .. }) => {
                let (header, _) = session.renew(&self.inner.http, Some(generation)).await?;
                self.exchange_with(call, header).await
            }
            other => other,
        }
    }

    async fn exchange_with(
        &self,
        call: &Call,
        authorization: HeaderValue,
    ) -> Result<Response, Error> {
        let mut request = self
            .inner
            .http
            .request(call.method.clone(), call.url.clone())
            .header(AUTHORIZATION, authorization);
        let signer = self.inner.signer.current();
        request = if call.stream {
            request
                .header(ACCEPT, "text/event-stream")
                .header(CACHE_CONTROL, "no-store")
        } else {
            request
                .header(ACCEPT, "application/json, application/problem+json")
                .timeout(self.inner.request_timeout)
        };
        if let Some(key) = &call.idempotency_key {
            request = request.header(IDEMPOTENCY_KEY, key.clone());
        }
        for (name, value) in &call.headers {
            request = request.header(*name, value.clone());
        }
        if let Some(body) = &call.body {
            request = request
                .header(CONTENT_TYPE, "application/json")
                .body(body.clone());
        }
        let send = async {
            let request = request.build()?;
            let Some(held) = &signer else {
                return self.execute(request, None).await;
            };
            // A retry of the same request, signed again, should the server's clock
            // turn out to be elsewhere (only when the body can be sent twice).
            let again = request.try_clone();
            let refused = match self.execute(request, Some(held)).await {
                Err(e) if e.code() == Some(switchboard_proto::ErrorCode::SignatureExpired) => e,
                done => return done,
            };
            match (crate::signing::server_time(&refused), again) {
                (Some(time), Some(again)) if self.inner.signer.learn_server_time(time) => {
                    tracing::info!("the server's clock is not this machine's: signing on its time");
                    self.execute(again, Some(held)).await
                }
                _ => Err(refused),
            }
        };
        if !call.stream {
            return send.await;
        }
        // The stream stays open, but its head (or its error body) must come in time:
        // a half-open connection would otherwise hold the call forever.
        let timeout = self.inner.request_timeout;
        tokio::time::timeout(timeout, send)
            .await
            .map_err(|_| Error::Timeout(timeout))?
    }

    /// Sends one built request, signed with `held` when given, notes what the
    /// answer says of the client settings, and checks its status.
    async fn execute(
        &self,
        mut request: reqwest::Request,
        held: Option<&crate::signing::Held>,
    ) -> Result<Response, Error> {
        if let Some(held) = held {
            self.inner.signer.sign(&mut request, held)?;
        }
        let response = self.inner.http.execute(request).await?;
        self.inner.settings.observe(response.headers());
        checked(response).await
    }

    /// Sends a call and decodes a JSON body.
    pub(crate) async fn fetch<T: DeserializeOwned>(&self, call: Call) -> Result<T, Error> {
        Ok(self.fetch_with_response(call).await?.0)
    }

    /// Sends a call and decodes a JSON body, also returning what the headers said.
    pub(crate) async fn fetch_with_response<T: DeserializeOwned>(
        &self,
        call: Call,
    ) -> Result<(T, Sent), Error> {
        // The route template, not the path: the message may reach logs.
        let what = format!("{} {}", call.method, route_template(call.url.path()));
        // The body is read inside the attempt, so a body cut short is retried too;
        // a body of the wrong shape is not (decoding is outside).
        let call = &call;
        let (body, sent) = self
            .retrying(call, |attempt| async move {
                let response = self.exchange(call, attempt).await?;
                let sent = Sent {
                    status: response.status().as_u16(),
                    replayed: response
                        .headers()
                        .get(IDEMPOTENT_REPLAYED)
                        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"true")),
                };
                Ok((response.bytes().await?, sent))
            })
            .await?;
        let value =
            serde_json::from_slice(&body).map_err(|e| Error::Decode(format!("{what}: {e}")))?;
        Ok((value, sent))
    }
}

/// A 2xx response, unread; any other status becomes [`Error::Api`] with its body.
async fn checked(response: Response) -> Result<Response, Error> {
    if response.status().is_success() {
        return Ok(response);
    }
    let (status, headers, url) = (
        response.status(),
        response.headers().clone(),
        response.url().clone(),
    );
    let body = response.bytes().await?;
    Err(Error::from_response(status, &headers, &url, &body))
}

/// Logs one attempt with what is safe to log (invariant I11): method, route
/// template (ids and names replaced by `{}`; no query), status, latency, attempt
/// number and sizes. Never the token, the idempotency key, names, ids or bodies.
fn log_exchange(call: &Call, attempt: u32, latency: Duration, result: &Result<Response, Error>) {
    let route = route_template(call.url.path());
    let request_bytes = call.body.as_ref().map_or(0, Vec::len);
    let latency_ms = latency.as_secs_f64() * 1000.0;
    match result {
        Ok(response) => tracing::debug!(
            target: "switchboard_sdk::http",
            method = %call.method,
            route,
            status = response.status().as_u16(),
            latency_ms,
            attempt,
            request_bytes,
            response_bytes = response.content_length(),
        ),
        Err(error) => tracing::debug!(
            target: "switchboard_sdk::http",
            method = %call.method,
            route,
            status = error.status(),
            failure = error.kind(),
            code = error.code().map(|c| c.as_str()),
            latency_ms,
            attempt,
            request_bytes,
        ),
    }
}

/// The route of an URL path with every id or name replaced by `{}`:
/// `/api/v1/agents/bob/inbox/0192…/ack` → `/api/v1/agents/{}/inbox/{}/ack`.
/// Positional: the segment after a collection (`agents`, `rooms`, `members`,
/// `events`, `inbox` but for `claim`, `memories`, `records`) is an id.
pub(crate) fn route_template(path: &str) -> String {
    let mut route = String::with_capacity(path.len());
    let mut id_next = false;
    for segment in path.split('/').filter(|s| !s.is_empty()) {
        route.push('/');
        let is_id = id_next && segment != "claim";
        route.push_str(if is_id { "{}" } else { segment });
        id_next = !is_id
            && matches!(
                segment,
                "agents"
                    | "rooms"
                    | "members"
                    | "events"
                    | "inbox"
                    | "memories"
                    | "records"
                    | "subscribers"
                    | "jobs"
                    | "callbacks"
            );
    }
    if route.is_empty() {
        route.push('/');
    }
    route
}

fn join(base: &Url, segments: &[&str]) -> Result<Url, Error> {
    for segment in segments {
        // `.` and `..` would be dropped or normalized away by any URL parser (even
        // percent-encoded), silently addressing another resource.
        if segment.is_empty() || *segment == "." || *segment == ".." {
            return Err(Error::InvalidInput(format!(
                "{segment:?} cannot be used as an id or name in a URL path"
            )));
        }
    }
    let mut url = base.clone();
    url.path_segments_mut()
        .map_err(|()| Error::InvalidUrl(format!("{base} cannot be a base URL")))?
        .extend(segments);
    Ok(url)
}

#[cfg(test)]
mod route_tests {
    use super::route_template;

    #[test]
    fn ids_and_names_become_placeholders() {
        for (path, route) in [
            ("/api/v1/agents/bob/messages", "/api/v1/agents/{}/messages"),
            (
                "/api/v1/agents/bob/inbox/claim",
                "/api/v1/agents/{}/inbox/claim",
            ),
            (
                "/api/v1/agents/bob/inbox/0192-ab/ack",
                "/api/v1/agents/{}/inbox/{}/ack",
            ),
            ("/api/v1/agents/agents/inbox", "/api/v1/agents/{}/inbox"),
            (
                "/api/v1/rooms/ops/members/bob",
                "/api/v1/rooms/{}/members/{}",
            ),
            ("/api/v1/ops/events/0192", "/api/v1/ops/events/{}"),
            (
                "/api/v1/ops/callbacks/0192/disable",
                "/api/v1/ops/callbacks/{}/disable",
            ),
            (
                "/api/v1/agents/bob/callbacks/0192",
                "/api/v1/agents/{}/callbacks/{}",
            ),
            ("/api/v1/ops/callbacks", "/api/v1/ops/callbacks"),
            ("/api/v1/ops/bulk/replay", "/api/v1/ops/bulk/replay"),
            ("/prefix/api/v1/capabilities", "/prefix/api/v1/capabilities"),
            ("/healthz", "/healthz"),
            ("/", "/"),
        ] {
            assert_eq!(route_template(path), route, "{path}");
        }
    }
}
