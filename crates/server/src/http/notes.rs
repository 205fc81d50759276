//! What authenticating a request learned that its response should say, whatever
//! its status: the agent's remote client settings (`Switchboard-Client-Settings`,
//! see `client_settings.rs`) and the rate-limit buckets it drew from (`RateLimit`
//! and `RateLimit-Policy`, see `rate_limit.rs`).
//!
//! [`layer`] puts empty [`Notes`] into the request; the `Principal` extractor fills
//! them; the layer writes the headers on the way out, for a refusal (403, 404, 429)
//! as for a success. Unauthenticated requests get none.

use super::AppState;
use crate::access::rate_limit::{Standing, standing_field};
use axum::extract::{Request, State};
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::{Arc, Mutex, OnceLock};
use switchboard_proto::{CLIENT_SETTINGS_HEADER, ClientSettings, EffectiveClientSettings};

const RATELIMIT: HeaderName = HeaderName::from_static("ratelimit");
const RATELIMIT_POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");

#[derive(Clone, Default)]
pub(crate) struct Notes(Arc<Inner>);

#[derive(Default)]
struct Inner {
    client_settings: OnceLock<EffectiveClientSettings>,
    standings: Mutex<Vec<Standing>>,
    /// The client's address (`auth::client_addr`), for the address buckets.
    client: Option<std::net::IpAddr>,
}

impl Notes {
    /// The client's address, when the connection has one.
    pub(crate) fn client(&self) -> Option<std::net::IpAddr> {
        self.0.client
    }

    /// Records the settings of the agent the request authenticated as.
    pub(crate) fn client_settings(&self, settings: ClientSettings) {
        let _ = self.0.client_settings.set(settings.effective());
    }

    /// Records what a rate-limit bucket said.
    pub(crate) fn standing(&self, standing: Standing) {
        self.0
            .standings
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(standing);
    }
}

pub(super) async fn layer(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    let client = req
        .extensions()
        .get::<axum::extract::ConnectInfo<super::PeerAddr>>()
        .and_then(|c| forwarded_client(c.0.0.ip(), req.headers(), &state.config.trusted_proxies));
    let notes = Notes(Arc::new(Inner {
        client,
        ..Inner::default()
    }));
    req.extensions_mut().insert(notes.clone());
    let mut response = next.run(req).await;
    let headers = response.headers_mut();
    if let Some(settings) = notes.0.client_settings.get()
        && let Ok(value) = HeaderValue::from_str(&settings.header_value())
    {
        headers.insert(HeaderName::from_static(CLIENT_SETTINGS_HEADER), value);
    }
    let standings =
        std::mem::take(&mut *notes.0.standings.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(value) = standing_field(&standings).and_then(|v| HeaderValue::from_str(&v).ok()) {
        headers.insert(RATELIMIT, value);
        if let Some(policy) = state
            .limiter
            .policy_field()
            .and_then(|v| HeaderValue::from_str(v).ok())
        {
            headers.insert(RATELIMIT_POLICY, policy);
        }
    }
    response
}

/// The client's address: the TCP peer's, or, when the peer is one of the
/// configured trusted proxies (`--trusted-proxy`), the right-most address of
/// `X-Forwarded-For` that is not a trusted proxy. Never the header of an untrusted
/// peer: anyone can write it.
pub(crate) fn forwarded_client(
    peer: std::net::IpAddr,
    headers: &axum::http::HeaderMap,
    trusted: &[ipnet::IpNet],
) -> Option<std::net::IpAddr> {
    let is_trusted = |ip: &std::net::IpAddr| trusted.iter().any(|net| net.contains(ip));
    if !is_trusted(&peer) {
        return Some(peer);
    }
    let hops: Vec<std::net::IpAddr> = headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|hop| hop.trim().parse().ok())
        .collect();
    Some(
        hops.into_iter()
            .rev()
            .find(|ip| !is_trusted(ip))
            .unwrap_or(peer),
    )
}
