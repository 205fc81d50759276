//! Webhook callbacks (issue 14): the SSRF guard on targets ([`target`]) and
//! registration with a challenge ([`register`]). The key that seals their secrets
//! is [`crate::sealing`]; the delivery worker is `workers/deliverer.rs`.
//!
//! The path of a delivery: a send commits an event; the worker (woken by the hub,
//! or its next pass) finds the agent's callback due, takes the callback's lease,
//! claims the agent's next event with an ordinary claim, POSTs it signed to the
//! address its guarded resolver checked, and acks (2xx), or releases it with the
//! schedule's delay (any other answer), or releases it and disables the callback
//! (410). The HTTP request never runs inside a database transaction.

pub mod register;
pub mod target;

use crate::config::WebhookConfig;
use crate::sealing::WebhookKey;
use std::sync::Arc;
use std::time::Duration;
use switchboard_webhook::{Outgoing, Secret};
use target::{Lookup, TargetPolicy};
use url::Url;

/// How long an endpoint has to answer a delivery.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(15);
/// How long the endpoint has to answer the challenge.
pub const CHALLENGE_TIMEOUT: Duration = Duration::from_secs(10);

/// `--webhook-allow-loopback` is for development on one machine: refused unless the
/// server listens on a loopback address.
pub fn check_listen(config: &WebhookConfig, listen: std::net::SocketAddr) -> Result<(), String> {
    if config.allow_loopback && !listen.ip().is_loopback() {
        return Err(format!(
            "--webhook-allow-loopback is for development on one machine: it is refused \
             unless the server listens on a loopback address (127.0.0.1 or ::1), not {listen}"
        ));
    }
    Ok(())
}

/// What registration and delivery share: the key, the guarded client, the rules.
pub struct Webhooks {
    pub key: WebhookKey,
    pub policy: TargetPolicy,
    pub lookup: Arc<dyn Lookup>,
    pub client: reqwest::Client,
    pub config: WebhookConfig,
}

impl std::fmt::Debug for Webhooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Webhooks")
            .field("key", &self.key)
            .field("policy", &self.policy)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Webhooks {
    /// Loads (or creates) the key and builds the guarded client. An error says what
    /// is wrong with which file.
    pub fn open(config: &WebhookConfig, lookup: Arc<dyn Lookup>) -> Result<Self, String> {
        let key = match &config.key_file {
            Some(path) => WebhookKey::load_or_create(path)?,
            None => WebhookKey::generate(),
        };
        let roots = match &config.ca_file {
            Some(path) => Some(std::fs::read(path).map_err(|e| {
                format!("could not read the webhook CA file {}: {e}", path.display())
            })?),
            None => None,
        };
        let policy = TargetPolicy {
            allow_loopback: config.allow_loopback,
        };
        let client = target::http_client(policy, lookup.clone(), roots.as_deref())?;
        Ok(Self {
            key,
            policy,
            lookup,
            client,
            config: config.clone(),
        })
    }

    /// The delay after the `streak`-th failure in a row (1-based); the schedule's
    /// last entry repeats.
    pub fn retry_delay(&self, streak: u32) -> Duration {
        let schedule = &self.config.retry_schedule;
        let i = (streak.max(1) as usize - 1).min(schedule.len().saturating_sub(1));
        schedule.get(i).copied().unwrap_or(Duration::from_secs(5))
    }

    /// Opens a callback's sealed secret.
    pub fn secret(
        &self,
        id: switchboard_proto::CallbackId,
        key_id: &str,
        sealed: &[u8],
    ) -> Result<Secret, String> {
        let whsec = self
            .key
            .open(id, key_id, sealed)
            .map_err(|e| e.to_string())?;
        let whsec = String::from_utf8(whsec).map_err(|_| "the sealed secret is damaged")?;
        Secret::parse(&whsec).map_err(|e| e.to_string())
    }

    /// Seals a secret for `id`'s row.
    pub fn seal(&self, id: switchboard_proto::CallbackId, secret: &Secret) -> Vec<u8> {
        self.key.seal(id, secret.to_whsec().as_bytes())
    }

    /// Delivers `event` to callback `id` at `url` as a `kind` delivery
    /// (`inbox.event`, `callback.test`), signed with `secret` at `now_secs`, within
    /// [`DELIVERY_TIMEOUT`].
    pub async fn deliver(
        &self,
        id: switchboard_proto::CallbackId,
        (url, secret): (&Url, &Secret),
        kind: &str,
        event: &switchboard_proto::InboxEvent,
        now_secs: i64,
    ) -> Result<reqwest::Response, Failure> {
        let body = serde_json::to_vec(&switchboard_proto::CallbackDelivery {
            kind: kind.to_owned(),
            event: event.clone(),
        })
        .unwrap_or_default();
        let (keyid, webhook_id) = (id.to_string(), event.event_id.to_string());
        let post = Post {
            url,
            secret,
            keyid: &keyid,
            webhook_id: &webhook_id,
            now_secs,
            timeout: DELIVERY_TIMEOUT,
        };
        self.post(&post, body).await
    }

    /// POSTs `body` as `post` says, through the guard.
    pub async fn post(&self, post: &Post<'_>, body: Vec<u8>) -> Result<reqwest::Response, Failure> {
        let Post {
            url,
            secret,
            keyid,
            webhook_id,
            now_secs,
            timeout,
        } = *post;
        let request =
            target::guarded_request(&self.client, reqwest::Method::POST, url, self.policy)
                .map_err(|f| Failure::Forbidden(f.0))?;
        let authority = authority(url);
        let headers = switchboard_webhook::sign(
            secret,
            &Outgoing {
                method: "POST",
                authority: &authority,
                path: url.path(),
                webhook_id,
                timestamp: now_secs,
                keyid,
                body: &body,
            },
        );
        let mut request = request
            .timeout(timeout)
            .header(reqwest::header::CONTENT_TYPE, "application/json");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        request.body(body).send().await.map_err(|e| {
            if let Some(forbidden) = target::forbidden_cause(&e) {
                Failure::Forbidden(forbidden.0.clone())
            } else if e.is_timeout() {
                Failure::Timeout(timeout)
            } else {
                Failure::Transport(transport_text(&e))
            }
        })
    }
}

/// Where and how one webhook request goes.
#[derive(Clone, Copy)]
pub struct Post<'a> {
    pub url: &'a Url,
    pub secret: &'a Secret,
    /// The RFC 9421 `keyid`: the callback id.
    pub keyid: &'a str,
    /// `webhook-id`: the event id (the same on every retry).
    pub webhook_id: &'a str,
    /// `webhook-timestamp` and `created`, from the server's clock.
    pub now_secs: i64,
    pub timeout: Duration,
}

/// A request that got no HTTP answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The guard refused every address the target resolved to.
    Forbidden(String),
    Timeout(Duration),
    /// Connection refused, TLS failure, reset…
    Transport(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Forbidden(reason) => write!(f, "the target is not allowed: {reason}"),
            Self::Timeout(t) => write!(f, "no answer within {} s", t.as_secs()),
            Self::Transport(e) => write!(f, "could not reach the endpoint: {e}"),
        }
    }
}

/// `host[:port]` as RFC 9421 `@authority` has it (no default port).
pub fn authority(url: &Url) -> String {
    let host = url.host_str().unwrap_or_default().to_ascii_lowercase();
    match url.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    }
}

/// An error's chain of sources, without the URL (which the caller has) or anything
/// of the request.
fn transport_text(e: &reqwest::Error) -> String {
    use std::error::Error as _;
    let mut parts = Vec::new();
    let mut source = e.source();
    while let Some(s) = source {
        parts.push(s.to_string());
        source = s.source();
    }
    if parts.is_empty() {
        "the connection failed".to_owned()
    } else {
        parts.join(": ")
    }
}
