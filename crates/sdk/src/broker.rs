//! The local token broker's protocol, client side (issue 40). A host process
//! (`switchboard agent broker`) holds the durable login; sidecars (Python agents,
//! scripts) on the same machine ask it over a Unix socket for short-lived,
//! narrower access tokens and never see the login itself (the refresh token, or
//! the static token, never crosses the socket).
//!
//! The protocol is HTTP/1.1 with JSON over the socket:
//! - `POST /v1/token` with a [`TokenRequest`] → 200 and a [`Granted`] token;
//! - `GET /v1/health` → 200 `{"status": "ok", "version": "…"}`;
//! - any refusal → an RFC 9457 problem document (`application/problem+json`) with
//!   a stable `code`: `peer_refused`, `executable_not_allowed`,
//!   `agent_not_allowed`, `scope_not_allowed`, `host_login_ended`,
//!   `invalid_request`, `server_unreachable`, `exchange_failed` (see
//!   [`codes`]). Here it is [`Error::Api`] with that code in
//!   [`Problem::code`](crate::proto::Problem::code). `host_login_ended` is a 401,
//!   as a revoked credential is on the server; the policy's refusals are 403.
//!
//! A renewing client ([`Broker::client`]) sees a refusal of a *renewal* as the
//! broker gave it when it is a 401 or 5xx, and as [`Error::Login`] (the code in its
//! message) otherwise: a credential problem, which never makes the outbox give up
//! a message (it waits, as for a device login that ended).
//!
//! [`Broker::client`] builds a [`Client`] whose bearer comes from the broker: an
//! Ed25519 key is generated in memory for it and presented with every token
//! request, so each token is bound to that key and every request the client sends
//! is signed with it (RFC 9421); a copied token alone is useless. Tokens are renewed
//! ahead of their expiry and on a 401 through the same [`renewal`](crate::renewal)
//! machinery as a device login's, so the outbox and the consumer keep working.
//!
//! The socket is found at: the path given, else `$SWITCHBOARD_BROKER_SOCKET`, else
//! `$XDG_RUNTIME_DIR/switchboard/broker.sock`, else
//! `/tmp/switchboard-<uid>/broker.sock` ([`default_socket`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Bytes;
use hyper::header::{ACCEPT, CONTENT_TYPE, HOST};
use hyper::{Method, StatusCode};
use hyper_util::rt::TokioIo;
use serde::{Deserialize, Serialize};

use crate::renewal::{Fresh, TokenSource};
use crate::signing::SigningKey;
use crate::{Client, ClientBuilder, Error, Token};

/// The variable that names the broker's socket (for sidecars and the broker).
pub const SOCKET_VAR: &str = "SWITCHBOARD_BROKER_SOCKET";
/// The largest answer body the client reads, and the largest request body the
/// broker takes (bytes).
pub const MAX_BODY_BYTES: usize = 16 * 1024;
/// How long one call to the broker may take (it may wait for the server's token
/// endpoint).
pub const CALL_TIMEOUT: Duration = Duration::from_secs(40);

/// The stable codes of the broker's problem documents.
pub mod codes {
    /// The peer runs as another user than the broker.
    pub const PEER_REFUSED: &str = "peer_refused";
    /// The peer's executable is not listed for the agent (or could not be read).
    pub const EXECUTABLE_NOT_ALLOWED: &str = "executable_not_allowed";
    /// The policy has no entry for the agent.
    pub const AGENT_NOT_ALLOWED: &str = "agent_not_allowed";
    /// A scope asked for is outside the policy's cap, or the host's login.
    pub const SCOPE_NOT_ALLOWED: &str = "scope_not_allowed";
    /// The host's login was revoked or logged out: an operator must log in again.
    pub const HOST_LOGIN_ENDED: &str = "host_login_ended";
    /// The request is not what the protocol says.
    pub const INVALID_REQUEST: &str = "invalid_request";
    /// The server could not be reached (or failed); try again later.
    pub const SERVER_UNREACHABLE: &str = "server_unreachable";
    /// The server refused the exchange for another reason (the detail says it).
    pub const EXCHANGE_FAILED: &str = "exchange_failed";
    /// No such path.
    pub const NOT_FOUND: &str = "not_found";
    /// The path exists, the method does not.
    pub const METHOD_NOT_ALLOWED: &str = "method_not_allowed";
}

/// `POST /v1/token`'s body.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenRequest {
    /// The agent whose token is asked for, as the broker's policy names it.
    pub agent: String,
    /// Space-separated scopes, at most the policy's cap; `None`: the cap (or every
    /// scope of the host's login when the policy sets none). `agent:{agent_id}:…`
    /// stands for the host agent's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The sidecar's public Ed25519 key as a JWK: the token is bound to it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_key: Option<serde_json::Value>,
}

/// `POST /v1/token`'s answer. The token is never in `Debug`.
#[derive(Clone, Serialize, Deserialize)]
pub struct Granted {
    #[serde(with = "token_string")]
    pub access_token: Token,
    /// `Bearer`.
    pub token_type: String,
    /// Seconds from the answer (at most 900).
    pub expires_in: u64,
    /// The scopes it carries, space-separated.
    pub scope: String,
    /// The server's base URL the token is for.
    pub server: String,
}

impl std::fmt::Debug for Granted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Granted")
            .field("access_token", &"<redacted>")
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

mod token_string {
    use crate::Token;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(token: &Token, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(token.expose())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Token, D::Error> {
        String::deserialize(d).map(Token::from)
    }
}

/// `GET /v1/health`'s answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Health {
    /// `ok`.
    pub status: String,
    /// The broker's version.
    pub version: String,
}

/// The broker's socket when none is named: `$SWITCHBOARD_BROKER_SOCKET`, else
/// `$XDG_RUNTIME_DIR/switchboard/broker.sock`, else
/// `/tmp/switchboard-<uid>/broker.sock`.
pub fn default_socket() -> PathBuf {
    if let Some(path) = std::env::var_os(SOCKET_VAR).filter(|p| !p.is_empty()) {
        return PathBuf::from(path);
    }
    default_dir().join("broker.sock")
}

/// The broker's private directory by default (ignoring `$SWITCHBOARD_BROKER_SOCKET`).
pub fn default_dir() -> PathBuf {
    match std::env::var_os("XDG_RUNTIME_DIR").filter(|d| !d.is_empty()) {
        Some(dir) => PathBuf::from(dir).join("switchboard"),
        None => PathBuf::from(format!("/tmp/switchboard-{}", current_uid())),
    }
}

#[cfg(unix)]
fn current_uid() -> u32 {
    rustix::process::getuid().as_raw()
}

#[cfg(not(unix))]
fn current_uid() -> u32 {
    0
}

/// A client of the broker at one socket. Cheap to clone.
#[derive(Debug, Clone)]
pub struct Broker {
    socket: PathBuf,
}

impl Broker {
    /// The broker at `socket`, or at [`default_socket`] when `None`.
    pub fn new(socket: Option<&Path>) -> Self {
        Self {
            socket: socket.map_or_else(default_socket, Path::to_path_buf),
        }
    }

    /// The socket this client talks to.
    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// `GET /v1/health`.
    pub async fn health(&self) -> Result<Health, Error> {
        let body = self.call(Method::GET, "/v1/health", None).await?;
        decode(&body, "the broker's health")
    }

    /// `POST /v1/token`: a token for `request.agent`. A refusal is [`Error::Api`]
    /// with the broker's problem (its `code`, see [`codes`]); a broker that cannot
    /// be reached is [`Error::Login`] saying how to start it.
    pub async fn token(&self, request: &TokenRequest) -> Result<Granted, Error> {
        let json = serde_json::to_vec(request)
            .map_err(|e| Error::InvalidInput(format!("the token request: {e}")))?;
        let body = self.call(Method::POST, "/v1/token", Some(json)).await?;
        decode(&body, "the broker's token")
    }

    /// A [`Client`] (with `builder`'s settings) for `agent` whose bearer comes
    /// from this broker, with `scope` (space-separated; `None`: what the policy
    /// allows). A new Ed25519 key is generated in memory for it: every token is
    /// bound to it and every request signed with it. The first token is fetched
    /// now (it names the server); the next ones ahead of expiry and on a 401.
    pub async fn client(
        &self,
        builder: ClientBuilder,
        agent: &str,
        scope: Option<&str>,
    ) -> Result<Client, Error> {
        let key = SigningKey::generate();
        let jwk = serde_json::to_value(key.public_key().to_jwk())
            .map_err(|e| Error::InvalidInput(format!("the key cannot be a JWK: {e}")))?;
        let request = TokenRequest {
            agent: agent.to_owned(),
            scope: scope.map(str::to_owned),
            signing_key: Some(jwk),
        };
        let first = self.token(&request).await?;
        let server = first.server.clone();
        let source = BrokerSource {
            broker: self.clone(),
            request,
            server: server.clone(),
        };
        builder.signing_key(Some(key)).build_with_source(
            &server,
            Arc::new(source),
            Some(Fresh::new(
                first.access_token,
                Duration::from_secs(first.expires_in),
            )),
        )
    }

    /// One call; the body of a 2xx answer, else the problem as [`Error::Api`].
    async fn call(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, Error> {
        tokio::time::timeout(CALL_TIMEOUT, self.call_once(method, path, body))
            .await
            .map_err(|_| Error::Timeout(CALL_TIMEOUT))?
    }

    #[cfg(unix)]
    async fn call_once(
        &self,
        method: Method,
        path: &str,
        body: Option<Vec<u8>>,
    ) -> Result<Bytes, Error> {
        let unreachable = |e: &dyn std::fmt::Display| {
            Error::Login(format!(
                "cannot reach the token broker at {}: {e}; is `switchboard agent broker` \
                 running (and is this its socket: --socket, ${SOCKET_VAR})?",
                self.socket.display()
            ))
        };
        let stream = tokio::net::UnixStream::connect(&self.socket)
            .await
            .map_err(|e| unreachable(&e))?;
        let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| unreachable(&e))?;
        let driving = tokio::spawn(connection);
        let mut request = hyper::Request::builder()
            .method(method)
            .uri(path)
            .header(HOST, "broker")
            .header(ACCEPT, "application/json, application/problem+json");
        if body.is_some() {
            request = request.header(CONTENT_TYPE, "application/json");
        }
        let request = request
            .body(Full::new(Bytes::from(body.unwrap_or_default())))
            .map_err(|e| Error::InvalidInput(format!("the broker request: {e}")))?;
        let answer = sender.send_request(request).await;
        let result = async {
            let response = answer.map_err(|e| unreachable(&e))?;
            let (parts, body) = response.into_parts();
            let body = Limited::new(body, MAX_BODY_BYTES)
                .collect()
                .await
                .map_err(|e| unreachable(&e))?
                .to_bytes();
            if parts.status.is_success() {
                return Ok(body);
            }
            Err(problem(parts.status, &parts.headers, &body))
        }
        .await;
        drop(sender);
        driving.abort();
        result
    }

    #[cfg(not(unix))]
    async fn call_once(&self, _: Method, _: &str, _: Option<Vec<u8>>) -> Result<Bytes, Error> {
        Err(Error::Login(
            "the token broker needs Unix sockets; it is not built for this platform".into(),
        ))
    }
}

/// A broker's refusal as [`Error::Api`].
fn problem(status: StatusCode, headers: &hyper::HeaderMap, body: &[u8]) -> Error {
    let content_type = headers.get(CONTENT_TYPE).and_then(|v| v.to_str().ok());
    // The answer came from http (hyper's types); the SDK's status type is reqwest's.
    let status =
        reqwest::StatusCode::from_u16(status.as_u16()).unwrap_or(reqwest::StatusCode::BAD_GATEWAY);
    Error::Api {
        status: status.as_u16(),
        problem: Box::new(crate::error::decode_problem(
            status,
            content_type,
            None,
            body,
        )),
        retry_after: None,
    }
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T, Error> {
    serde_json::from_slice(body).map_err(|e| Error::Decode(format!("{what}: {e}")))
}

/// The broker as a [`TokenSource`]: the same request each time (same agent,
/// scope and key).
struct BrokerSource {
    broker: Broker,
    request: TokenRequest,
    server: String,
}

#[async_trait::async_trait]
impl TokenSource for BrokerSource {
    async fn fetch(&self, _: &reqwest::Client) -> Result<Fresh, Error> {
        let granted = match self.broker.token(&self.request).await {
            Ok(granted) => granted,
            // The host's login ended (401) or the server is away (5xx): as the
            // broker says, so the outbox keeps its messages waiting and retries.
            Err(e @ Error::Api { status, .. }) if status == 401 || status >= 500 => return Err(e),
            // Any other refusal of a renewal (the policy changed under a running
            // sidecar) is about the credential, not about the request that needed
            // it: a login error, which never makes the outbox give a message up.
            Err(e @ Error::Api { .. }) => {
                return Err(Error::Login(format!(
                    "the token broker refused a new token ({e}); fix its policy or the \
                     host's login, then this agent continues"
                )));
            }
            Err(e) => return Err(e),
        };
        if granted.server != self.server {
            return Err(Error::Login(format!(
                "the token broker now gives tokens for {} instead of {}; start this agent again",
                granted.server, self.server
            )));
        }
        Ok(Fresh::new(
            granted.access_token,
            Duration::from_secs(granted.expires_in),
        ))
    }

    fn describe(&self) -> &'static str {
        "broker"
    }
}
