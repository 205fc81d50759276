//! The broker's HTTP side: one hyper HTTP/1.1 connection per accepted socket, the
//! peer checked once per connection, every request decided against the policy and
//! answered with a token or an RFC 9457 problem. Every decision is logged with the
//! peer's uid, pid and executable and the outcome; never a token (invariant I11).

use std::collections::HashMap;
use std::convert::Infallible;
use std::path::PathBuf;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use http_body_util::{BodyExt, Full, Limited};
use hyper::body::{Bytes, Incoming};
use hyper::header::{ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::json;
use switchboard_sdk::broker::{Granted, Health, MAX_BODY_BYTES, TokenRequest, codes};
use switchboard_sdk::signing::{Jwk, PublicKey};
use switchboard_sdk::{Client, Error};

use super::peer::Peer;
use super::policy::{Entry, Policy};

/// How long a connection may take to send a request's head.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);
/// The connection's read buffer at most (request heads are small).
const MAX_BUF: usize = 64 * 1024;

/// The broker's state: its uid, policy and the host logins (one client per
/// profile), replaced together when the policy is reloaded.
pub(super) struct Shared {
    pub(super) uid: u32,
    pub(super) policy_path: PathBuf,
    current: RwLock<Arc<Loaded>>,
}

/// A policy and a host for each of its profiles.
pub(super) struct Loaded {
    pub(super) policy: Policy,
    pub(super) hosts: HashMap<String, Arc<Host>>,
}

/// A host login: the client that exchanges its credential, and the agent id its
/// scopes name (learnt once, for `{agent_id}`).
pub(super) struct Host {
    pub(super) profile: String,
    pub(super) client: Client,
    agent_id: tokio::sync::OnceCell<String>,
}

impl Host {
    pub(super) fn new(profile: String, client: Client) -> Self {
        Self {
            profile,
            client,
            agent_id: tokio::sync::OnceCell::new(),
        }
    }

    /// The server URL as sidecars get it (no trailing slash).
    fn server(&self) -> String {
        self.client
            .base_url()
            .as_str()
            .trim_end_matches('/')
            .to_owned()
    }

    /// The id of the agent whose login this is: from the scopes an exchange
    /// without `scope` grants (`agent:<id>:inbox` or `agent:<id>:read`).
    async fn agent_id(&self) -> Result<&str, Refusal> {
        self.agent_id
            .get_or_try_init(|| async {
                let all = self
                    .client
                    .exchange_token(None, None)
                    .await
                    .map_err(|e| refusal_of(&e, self))?;
                all.scope
                    .split_whitespace()
                    .find_map(|s| {
                        let rest = s.strip_prefix("agent:")?;
                        let id = rest
                            .strip_suffix(":inbox")
                            .or_else(|| rest.strip_suffix(":read"))?;
                        Some(id.to_owned())
                    })
                    .ok_or_else(|| Refusal {
                        status: StatusCode::FORBIDDEN,
                        code: codes::SCOPE_NOT_ALLOWED,
                        detail: format!(
                            "the login of profile {:?} is not an agent's (its scopes are {:?}), \
                             so `{{agent_id}}` in a scope means nothing; name the scopes in full",
                            self.profile, all.scope
                        ),
                    })
            })
            .await
            .map(String::as_str)
    }
}

impl Shared {
    pub(super) fn new(uid: u32, policy_path: PathBuf, loaded: Loaded) -> Self {
        Self {
            uid,
            policy_path,
            current: RwLock::new(Arc::new(loaded)),
        }
    }

    pub(super) fn loaded(&self) -> Arc<Loaded> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(super) fn replace(&self, loaded: Loaded) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(loaded);
    }
}

/// Serves one accepted connection from `peer` (read right after `accept`) until
/// the peer closes it.
pub(super) async fn serve_connection(
    broker: Arc<Shared>,
    stream: tokio::net::UnixStream,
    peer: Peer,
) {
    let peer = Arc::new(peer);
    let service = hyper::service::service_fn(move |request| {
        let (broker, peer) = (broker.clone(), peer.clone());
        async move { Ok::<_, Infallible>(handle(&broker, &peer, request).await) }
    });
    let served = hyper::server::conn::http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .max_buf_size(MAX_BUF)
        .serve_connection(TokioIo::new(stream), service)
        .await;
    if let Err(e) = served {
        tracing::debug!(error = %e, "a broker connection ended with an error");
    }
}

/// Why a request was refused.
struct Refusal {
    status: StatusCode,
    code: &'static str,
    detail: String,
}

impl Refusal {
    fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        Self {
            status,
            code,
            detail: detail.into(),
        }
    }

    fn invalid(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, codes::INVALID_REQUEST, detail)
    }
}

async fn handle(broker: &Shared, peer: &Peer, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let allowed = match path.as_str() {
        "/v1/token" => Method::POST,
        "/v1/health" => Method::GET,
        _ => {
            return problem(&Refusal::new(
                StatusCode::NOT_FOUND,
                codes::NOT_FOUND,
                "the broker answers POST /v1/token and GET /v1/health",
            ));
        }
    };
    if peer.uid != Some(broker.uid) {
        let refusal = Refusal::new(
            StatusCode::FORBIDDEN,
            codes::PEER_REFUSED,
            format!(
                "this broker serves only processes of its own user (uid {}); ask the broker of \
                 your own user. If another user could reach this socket, its directory's \
                 permissions are wrong: it must be 0700",
                broker.uid
            ),
        );
        log(peer, None, &Err(&refusal));
        return problem(&refusal);
    }
    if method != allowed {
        let mut answer = problem(&Refusal::new(
            StatusCode::METHOD_NOT_ALLOWED,
            codes::METHOD_NOT_ALLOWED,
            format!("{path} takes {allowed}"),
        ));
        answer.headers_mut().insert(
            ALLOW,
            HeaderValue::from_static(if allowed == Method::POST {
                "POST"
            } else {
                "GET"
            }),
        );
        return answer;
    }
    if allowed == Method::GET {
        let health = Health {
            status: "ok".to_owned(),
            version: env!("CARGO_PKG_VERSION").to_owned(),
        };
        return json_answer(StatusCode::OK, &json!(health));
    }
    let asked = match read_request(request).await {
        Ok(asked) => asked,
        Err(refusal) => {
            log(peer, None, &Err(&refusal));
            return problem(&refusal);
        }
    };
    let decided = decide(broker, peer, &asked).await;
    log(peer, Some(&asked.agent), &decided.as_ref());
    match decided {
        Ok(granted) => json_answer(StatusCode::OK, &json!(granted)),
        Err(refusal) => problem(&refusal),
    }
}

/// The request body as a [`TokenRequest`], at most [`MAX_BODY_BYTES`].
async fn read_request(request: Request<Incoming>) -> Result<TokenRequest, Refusal> {
    let (parts, body) = request.into_parts();
    if let Some(kind) = parts.headers.get(CONTENT_TYPE)
        && !kind.to_str().is_ok_and(|k| {
            k.split(';')
                .next()
                .is_some_and(|e| e.trim() == "application/json")
        })
    {
        return Err(Refusal::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            codes::INVALID_REQUEST,
            "the body must be JSON (Content-Type: application/json)",
        ));
    }
    let too_large = || {
        Refusal::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            codes::INVALID_REQUEST,
            format!("the body is over {MAX_BODY_BYTES} bytes"),
        )
    };
    if parts
        .headers
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > MAX_BODY_BYTES)
    {
        return Err(too_large());
    }
    let body = Limited::new(body, MAX_BODY_BYTES)
        .collect()
        .await
        .map_err(|_| too_large())?
        .to_bytes();
    serde_json::from_slice(&body).map_err(|e| {
        Refusal::invalid(format!(
            "the body is not a token request ({e}); send {{\"agent\": NAME, \"scope\": \
             \"optional space-separated scopes\", \"signing_key\": {{public JWK, optional}}}}"
        ))
    })
}

/// The policy's answer to `asked` from `peer`, and the token when it is granted.
async fn decide(broker: &Shared, peer: &Peer, asked: &TokenRequest) -> Result<Granted, Refusal> {
    let loaded = broker.loaded();
    let policy_file = broker.policy_path.display();
    let entry = loaded.policy.entry(&asked.agent).ok_or_else(|| {
        Refusal::new(
            StatusCode::FORBIDDEN,
            codes::AGENT_NOT_ALLOWED,
            format!(
                "the broker's policy ({policy_file}) has no entry for agent {:?}; add an \
                 [[allow]] entry for it",
                asked.agent
            ),
        )
    })?;
    check_executable(peer, entry, &policy_file.to_string())?;
    let signing_key = match &asked.signing_key {
        None => None,
        Some(value) => Some(checked_key(value)?),
    };
    let host = loaded.hosts.get(&entry.profile).ok_or_else(|| {
        Refusal::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            codes::INVALID_REQUEST,
            format!("no login is loaded for profile {:?}", entry.profile),
        )
    })?;
    let scope = scopes(asked, entry, host).await?;
    let exchanged = host
        .client
        .exchange_token(scope.as_deref(), signing_key.as_ref())
        .await
        .map_err(|e| refusal_of(&e, host))?;
    Ok(Granted {
        access_token: exchanged.access_token,
        token_type: "Bearer".to_owned(),
        expires_in: exchanged.expires_in,
        scope: exchanged.scope,
        server: host.server(),
    })
}

/// Refuses a peer whose executable is not listed for the entry's agent.
fn check_executable(peer: &Peer, entry: &Entry, policy_file: &str) -> Result<(), Refusal> {
    let refuse =
        |detail: String| Refusal::new(StatusCode::FORBIDDEN, codes::EXECUTABLE_NOT_ALLOWED, detail);
    match &peer.exe {
        Ok(exe) if entry.executables.contains(exe) => Ok(()),
        Ok(exe) => Err(refuse(format!(
            "{} may not have tokens for agent {:?}; to allow it, add it to that entry's \
             `executables` in {policy_file} and send the broker SIGHUP",
            exe.display(),
            entry.agent
        ))),
        Err(why) => Err(refuse(format!(
            "the peer's executable could not be checked: {why}"
        ))),
    }
}

/// The sidecar's key, checked to be a public Ed25519 JWK.
fn checked_key(value: &serde_json::Value) -> Result<serde_json::Value, Refusal> {
    let jwk: Jwk = serde_json::from_value(value.clone())
        .map_err(|e| Refusal::invalid(format!("signing_key is not a JWK: {e}")))?;
    let key = PublicKey::from_jwk(&jwk).map_err(|e| {
        Refusal::invalid(format!(
            "signing_key is not a public Ed25519 JWK ({e}); send the public half only"
        ))
    })?;
    serde_json::to_value(key.to_jwk()).map_err(|e| Refusal::invalid(e.to_string()))
}

/// The scopes to ask the server for: the request's (each within the policy's
/// cap), else the cap, else none (every scope of the host's login).
async fn scopes(
    asked: &TokenRequest,
    entry: &Entry,
    host: &Host,
) -> Result<Option<String>, Refusal> {
    let requested: Option<Vec<&str>> = match asked.scope.as_deref() {
        None => None,
        Some(s) if s.split_whitespace().next().is_none() => {
            return Err(Refusal::invalid(
                "scope is empty; leave it out to get what the policy allows",
            ));
        }
        Some(s) => Some(s.split_whitespace().collect()),
    };
    let placeholder = |s: &str| s.contains("{agent_id}");
    let needs_id = requested.iter().flatten().any(|s| placeholder(s))
        || entry.scopes.iter().flatten().any(|s| placeholder(s));
    let id = if needs_id {
        Some(host.agent_id().await?)
    } else {
        None
    };
    let fill = |s: &str| match id {
        Some(id) => s.replace("{agent_id}", id),
        None => s.to_owned(),
    };
    let cap: Option<Vec<String>> = entry
        .scopes
        .as_ref()
        .map(|c| c.iter().map(|s| fill(s)).collect());
    let mut chosen: Vec<String> = Vec::new();
    match (requested, &cap) {
        (None, None) => return Ok(None),
        (None, Some(cap)) => chosen.clone_from(cap),
        (Some(requested), cap) => {
            for scope in requested {
                let scope = fill(scope);
                if let Some(cap) = cap
                    && !cap.contains(&scope)
                {
                    return Err(Refusal::new(
                        StatusCode::FORBIDDEN,
                        codes::SCOPE_NOT_ALLOWED,
                        format!(
                            "scope {scope:?} is outside what the policy allows agent {:?} ({}); \
                             ask for less, or widen its `scopes`",
                            entry.agent,
                            cap.join(" ")
                        ),
                    ));
                }
                if !chosen.contains(&scope) {
                    chosen.push(scope);
                }
            }
        }
    }
    Ok(Some(chosen.join(" ")))
}

/// What the server's (or the host login's) failure means to a sidecar.
fn refusal_of(error: &Error, host: &Host) -> Refusal {
    let profile = &host.profile;
    // 401, as the server answers a revoked credential: a sidecar's outbox keeps
    // its messages waiting for a login instead of giving them up.
    let ended = || {
        Refusal::new(
            StatusCode::UNAUTHORIZED,
            codes::HOST_LOGIN_ENDED,
            format!(
                "the broker's login (profile {profile:?}) was revoked or logged out; an operator \
                 must log in again (`switchboard agent login --profile {profile}`; a login from \
                 SWITCHBOARD_TOKEN needs the broker restarted with a current token)"
            ),
        )
    };
    let unreachable = || {
        Refusal::new(
            StatusCode::BAD_GATEWAY,
            codes::SERVER_UNREACHABLE,
            format!(
                "the server ({}) could not be reached or failed: {error}; try again later",
                host.server()
            ),
        )
    };
    match error {
        Error::Login(_) => ended(),
        Error::Transport(_) | Error::Timeout(_) => unreachable(),
        Error::Api { status, .. } if *status >= 500 || *status == 429 => unreachable(),
        Error::Api { problem, .. } => match problem.code.as_deref() {
            Some("invalid_grant") => ended(),
            Some("invalid_scope") => Refusal::new(
                StatusCode::FORBIDDEN,
                codes::SCOPE_NOT_ALLOWED,
                format!(
                    "the broker's login does not hold that scope: {}",
                    problem.detail.as_deref().unwrap_or("(no detail)")
                ),
            ),
            _ => Refusal::new(
                StatusCode::BAD_GATEWAY,
                codes::EXCHANGE_FAILED,
                format!("the server refused the token exchange: {error}"),
            ),
        },
        other => Refusal::new(
            StatusCode::BAD_GATEWAY,
            codes::EXCHANGE_FAILED,
            format!("the token exchange failed: {other}"),
        ),
    }
}

/// Logs one decision: who asked, for what, and the outcome; never the token.
fn log(peer: &Peer, agent: Option<&str>, outcome: &Result<&Granted, &Refusal>) {
    let exe = peer.exe_shown();
    let agent = agent.unwrap_or("-");
    match outcome {
        Ok(granted) => tracing::info!(
            target: "switchboard::broker",
            uid = peer.uid,
            pid = peer.pid,
            exe,
            agent,
            outcome = "granted",
            scope = granted.scope,
            expires_in = granted.expires_in,
            "token granted"
        ),
        Err(refusal) => tracing::warn!(
            target: "switchboard::broker",
            uid = peer.uid,
            pid = peer.pid,
            exe,
            agent,
            outcome = refusal.code,
            detail = refusal.detail,
            "token refused"
        ),
    }
}

fn json_answer(status: StatusCode, body: &serde_json::Value) -> Response<Full<Bytes>> {
    let mut answer = Response::new(Full::new(Bytes::from(body.to_string())));
    *answer.status_mut() = status;
    let headers = answer.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    answer
}

/// An RFC 9457 problem document.
fn problem(refusal: &Refusal) -> Response<Full<Bytes>> {
    let title = refusal
        .status
        .canonical_reason()
        .unwrap_or("Refused")
        .to_owned();
    let body = json!({
        "type": format!("urn:switchboard:broker:problem:{}", refusal.code),
        "title": title,
        "status": refusal.status.as_u16(),
        "detail": refusal.detail,
        "code": refusal.code,
    });
    let mut answer = json_answer(refusal.status, &body);
    answer.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("application/problem+json"),
    );
    answer
}
