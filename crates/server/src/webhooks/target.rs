//! The SSRF guard on webhook targets.
//!
//! A webhook callback URL is chosen by whoever registers it, and the server then
//! sends requests to it from inside its own network. Without a guard, a callback of
//! `https://169.254.169.254/…` or `https://db.internal/…` would turn the server into a
//! proxy into that network. The guard has three layers:
//!
//! 1. [`check_url`] judges the URL's form (https only, no userinfo, no fragment) and
//!    its host when that host is an IP literal ([`forbidden_address`]) or a name
//!    that is never public (`localhost`, `*.internal`, `metadata`, …).
//! 2. [`resolve_checked`] resolves a name at registration and refuses it when no
//!    address it resolves to is public, so the caller can answer with a clear 422
//!    before any connection is made.
//! 3. [`http_client`] builds the client for challenges and deliveries. Its resolver
//!    drops every forbidden address *before* the connector dials, so the address
//!    checked is the address dialled: a name that resolved to a public address at
//!    registration and resolves to `127.0.0.1` at delivery (DNS rebinding) is never
//!    connected to. IP-literal URLs never reach a resolver, so every request must
//!    go through [`guarded_request`], which re-checks the URL (and so its literal
//!    host) each time it builds a request.
//!
//! An address is judged by the IPv4 address inside it when it embeds one
//! (IPv4-mapped, IPv4-compatible, NAT64, 6to4); Teredo and local-use NAT64 addresses
//! are refused outright. Odd IPv4 spellings (`2130706433`, `0177.0.0.1`, `0x7f.1`,
//! `127.1`) need no code here: the WHATWG parser of the `url` crate turns them into
//! [`Host::Ipv4`] for `https` URLs.

use std::collections::HashSet;
use std::error::Error as StdError;
use std::fmt::Write as _;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;

use url::{Host, Url};

mod address;
#[cfg(test)]
mod tests;

pub use address::forbidden_address;
use address::{advice, forbidden_name, judge};

/// What a deployment allows. `allow_loopback` (the `--webhook-allow-loopback`
/// development flag) lets 127.0.0.0/8 and ::1 (and the name `localhost`) through,
/// nothing else.
#[derive(Clone, Copy, Debug, Default)]
pub struct TargetPolicy {
    /// Lets loopback targets through, for local development only.
    pub allow_loopback: bool,
}

/// Why a target is refused: a sentence for the problem document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Forbidden(pub String);

/// The total time a challenge or delivery request may take.
const TOTAL_TIMEOUT: Duration = Duration::from_secs(15);
/// The time the connection (name lookup, TCP and TLS) may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The time a lookup at registration may take before the name counts as unresolvable.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(5);

/// Checks the URL's form: `https`, a host, no userinfo, no fragment, a port other
/// than 0; an IP-literal host against [`forbidden_address`], a name against the names
/// that are never public. Returns the parsed URL.
///
/// A name that passes may still resolve to a forbidden address: see
/// [`resolve_checked`].
pub fn check_url(raw: &str, policy: TargetPolicy) -> Result<Url, Forbidden> {
    let url = Url::parse(raw).map_err(|err| {
        Forbidden(format!(
            "the callback URL is not a valid absolute URL ({err}): give the full https://… address"
        ))
    })?;
    if url.scheme() != "https" {
        return Err(Forbidden(format!(
            "the callback URL must use https (got {})",
            url.scheme()
        )));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(Forbidden(
            "the callback URL must not carry credentials (`user:password@`): remove them; \
             deliveries are signed instead"
                .to_owned(),
        ));
    }
    if url.fragment().is_some() {
        return Err(Forbidden(
            "the callback URL must not have a fragment (`#…`), which is never sent: remove it"
                .to_owned(),
        ));
    }
    if url.port() == Some(0) {
        return Err(Forbidden(
            "the callback URL's port must not be 0: give the port the receiver listens on"
                .to_owned(),
        ));
    }
    let refusal = match url.host() {
        None => Some("the callback URL must have a host".to_owned()),
        Some(Host::Ipv4(ip)) => forbidden_address(IpAddr::V4(ip), policy),
        Some(Host::Ipv6(ip)) => forbidden_address(IpAddr::V6(ip), policy),
        Some(Host::Domain(name)) => forbidden_name(name, policy),
    };
    match refusal {
        Some(reason) => Err(Forbidden(reason)),
        None => Ok(url),
    }
}

pub use crate::hooks::Lookup;

/// The system resolver (`getaddrinfo`, through `tokio::net::lookup_host`).
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|addr| addr.ip()).collect())
        })
    }
}

/// Keeps the public addresses among `ips` (deduplicated, in order), or explains
/// why there are none.
fn keep_public(
    host: &str,
    ips: Vec<IpAddr>,
    policy: TargetPolicy,
) -> Result<Vec<IpAddr>, Forbidden> {
    let mut seen = HashSet::new();
    let mut public = Vec::new();
    let mut refused = Vec::new();
    for ip in ips.into_iter().filter(|ip| seen.insert(*ip)) {
        match judge(ip, policy) {
            None => public.push(ip),
            Some(refusal) => refused.push((ip, refusal)),
        }
    }
    if !public.is_empty() {
        return Ok(public);
    }
    let loopback = refused.iter().any(|(_, refusal)| refusal.loopback);
    let advice = advice(loopback);
    let reason = match refused.as_slice() {
        [] => format!("`{host}` does not resolve (no addresses): check the host name"),
        [(ip, refusal)] => format!("`{host}` resolves only to {ip}, {}: {advice}", refusal.what),
        many => {
            const SHOWN: usize = 4;
            let mut reason = format!("`{host}` resolves only to non-public addresses:");
            for (i, (ip, refusal)) in many.iter().take(SHOWN).enumerate() {
                let sep = if i == 0 { " " } else { "; " };
                let _ = write!(reason, "{sep}{ip} is {}", refusal.what);
            }
            if many.len() > SHOWN {
                let _ = write!(reason, "; and {} more", many.len() - SHOWN);
            }
            let _ = write!(reason, ": {advice}");
            reason
        }
    };
    Err(Forbidden(reason))
}

/// Resolves `url`'s host with `lookup` and returns the addresses that pass (with the
/// URL's port), or [`Forbidden`] when none does ("`x.example` resolves only to
/// 10.0.0.1, a private address …", or "`x.example` does not resolve"). Used at
/// registration for a clear 422 before any connection; it re-runs [`check_url`]
/// first, so an IP-literal host is judged too.
///
/// Passing here does not make later requests safe on its own (the name may resolve
/// elsewhere later): send them with [`http_client`] through [`guarded_request`].
pub async fn resolve_checked(
    url: &Url,
    lookup: &dyn Lookup,
    policy: TargetPolicy,
) -> Result<Vec<SocketAddr>, Forbidden> {
    let url = check_url(url.as_str(), policy)?;
    let port = url.port_or_known_default().unwrap_or(443);
    let ips = match url.host() {
        Some(Host::Ipv4(ip)) => vec![IpAddr::V4(ip)],
        Some(Host::Ipv6(ip)) => vec![IpAddr::V6(ip)],
        Some(Host::Domain(name)) => {
            let ips = match tokio::time::timeout(LOOKUP_TIMEOUT, lookup.lookup(name)).await {
                Ok(Ok(ips)) => ips,
                Ok(Err(err)) => {
                    return Err(Forbidden(format!(
                        "`{name}` does not resolve ({err}): check the host name"
                    )));
                }
                Err(_) => {
                    return Err(Forbidden(format!(
                        "`{name}` does not resolve (the lookup took longer than {} s): check \
                         the host name",
                        LOOKUP_TIMEOUT.as_secs()
                    )));
                }
            };
            keep_public(name, ips, policy)?
        }
        None => return Err(Forbidden("the callback URL must have a host".to_owned())),
    };
    Ok(ips
        .into_iter()
        .map(|ip| SocketAddr::new(ip, port))
        .collect())
}

/// The resolver of [`http_client`]: looks names up with a [`Lookup`] and hands the
/// connector only the addresses that pass.
struct GuardedResolver {
    lookup: Arc<dyn Lookup>,
    policy: TargetPolicy,
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_owned();
        let policy = self.policy;
        if let Some(reason) = forbidden_name(&host, policy) {
            let err: Box<dyn StdError + Send + Sync> = Box::new(Forbidden(reason));
            return Box::pin(futures::future::ready(Err(err)));
        }
        let lookup = self.lookup.lookup(&host);
        Box::pin(async move {
            let ips = keep_public(&host, lookup.await?, policy)?;
            // Port 0 is replaced by the URL's port.
            let addrs: reqwest::dns::Addrs =
                Box::new(ips.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

/// The HTTP client for challenges and deliveries.
///
/// - Its resolver (a `reqwest::dns::Resolve` over `lookup`) drops every forbidden
///   address before the connector dials, so the address checked is the address
///   dialled, with no second lookup; a request whose host resolves only to forbidden
///   addresses fails with a connect error carrying a [`Forbidden`] (see
///   [`forbidden_cause`]).
/// - IP-literal URLs never reach a resolver: build every request with
///   [`guarded_request`], which re-checks the URL, rather than with the client's own
///   `post`/`request` methods.
/// - `.no_proxy()`: `HTTPS_PROXY` and friends are ignored, since a proxy would do the
///   dialling (and its own resolving) where the guard cannot see it.
/// - Redirects are not followed (`redirect::Policy::none()`): a 3xx is the answer,
///   and a failure for the caller. `https_only(true)`.
/// - A 15 s total timeout and a 5 s connect timeout.
/// - `extra_roots`: PEM bytes of additional trust roots (the `--webhook-ca-file`
///   flag), added to the platform's roots.
pub fn http_client(
    policy: TargetPolicy,
    lookup: Arc<dyn Lookup>,
    extra_roots: Option<&[u8]>,
) -> Result<reqwest::Client, String> {
    let mut builder = reqwest::Client::builder()
        .dns_resolver(GuardedResolver { lookup, policy })
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .https_only(true)
        .timeout(TOTAL_TIMEOUT)
        .connect_timeout(CONNECT_TIMEOUT)
        .user_agent(concat!("Switchboard-Webhooks/", env!("CARGO_PKG_VERSION")));
    if let Some(pem) = extra_roots {
        let certs = reqwest::Certificate::from_pem_bundle(pem).map_err(|err| {
            format!(
                "the webhook CA file is not a PEM bundle: {}",
                error_chain(&err)
            )
        })?;
        if certs.is_empty() {
            return Err("the webhook CA file holds no PEM certificate".to_owned());
        }
        builder = builder.tls_certs_merge(certs);
    }
    builder.build().map_err(|err| {
        format!(
            "cannot build the webhook HTTP client: {}",
            error_chain(&err)
        )
    })
}

/// Builds a `method` request to `url` on a client from [`http_client`], after
/// re-checking the URL with [`check_url`]: the guard for IP-literal hosts, which the
/// client's resolver never sees. Send every challenge and delivery through this.
pub fn guarded_request(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &Url,
    policy: TargetPolicy,
) -> Result<reqwest::RequestBuilder, Forbidden> {
    let url = check_url(url.as_str(), policy)?;
    Ok(client.request(method, url))
}

/// The [`Forbidden`] behind a failed request, when the guard refused every address
/// the target resolved to at connect time (a target that rebound to a private
/// address, say).
pub fn forbidden_cause(err: &reqwest::Error) -> Option<&Forbidden> {
    let mut source: Option<&(dyn StdError + 'static)> = err.source();
    while let Some(err) = source {
        if let Some(forbidden) = err.downcast_ref::<Forbidden>() {
            return Some(forbidden);
        }
        source = err.source();
    }
    None
}

/// An error and its sources, joined with ": ".
fn error_chain(err: &dyn StdError) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(err) = source {
        let _ = write!(text, ": {err}");
        source = err.source();
    }
    text
}
