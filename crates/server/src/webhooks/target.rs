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
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use ipnet::{Ipv4Net, Ipv6Net};
use url::{Host, Url};

#[cfg(test)]
mod tests;

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

/// What every refusal of an address ends with.
const MUST_BE_PUBLIC: &str = "webhook targets must be public";
/// The fix for a loopback target during development.
const LOOPBACK_HINT: &str =
    " (for local development, start the server with `--webhook-allow-loopback`)";

/// A range of addresses that may not be a webhook target.
struct Range<N> {
    net: N,
    /// What an address in this range is, as a noun phrase: "a private address".
    what: &'static str,
    /// Whether `allow_loopback` lets the range through.
    loopback: bool,
}

const fn v4(addr: [u8; 4], len: u8, what: &'static str) -> Range<Ipv4Net> {
    let [a, b, c, d] = addr;
    Range {
        net: Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len),
        what,
        loopback: false,
    }
}

const fn v6(segments: [u16; 8], len: u8, what: &'static str) -> Range<Ipv6Net> {
    let [a, b, c, d, e, f, g, h] = segments;
    Range {
        net: Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), len),
        what,
        loopback: false,
    }
}

const PRIVATE: &str = "a private address";
const LOOPBACK: &str = "a loopback address";
const UNSPECIFIED: &str = "the unspecified address";
const LINK_LOCAL: &str = "a link-local address";
const MULTICAST: &str = "a multicast address";
const DOCUMENTATION: &str = "a documentation address";
const BENCHMARKING: &str = "a benchmarking address";
const IETF_ASSIGNMENTS: &str = "a reserved address (IETF protocol assignments)";
const METADATA: &str = "a cloud metadata address (AWS, GCP, Azure, OpenStack, …)";
const METADATA_ALIBABA: &str = "a cloud metadata address (Alibaba Cloud)";
const METADATA_AWS_V6: &str = "a cloud metadata address (AWS)";
const LOCAL_NAT64: &str =
    "a local-use NAT64 address, whose IPv4 embedding depends on the network (refused outright)";
const TEREDO: &str = "a Teredo address, tunnelling to an IPv4 relay and client (refused outright)";

/// The IPv4 ranges that are not public, the most specific first (IANA's special-purpose
/// registry, RFC 6890 and successors; `192.0.0.0/24` is refused whole).
#[rustfmt::skip]
static V4_RANGES: [Range<Ipv4Net>; 19] = [
    v4([0, 0, 0, 0], 32, UNSPECIFIED),
    v4([0, 0, 0, 0], 8, "a reserved address (\"this network\")"),
    v4([10, 0, 0, 0], 8, PRIVATE),
    v4([100, 100, 100, 200], 32, METADATA_ALIBABA),
    v4([100, 64, 0, 0], 10, "a carrier-grade NAT (shared) address"),
    Range { loopback: true, ..v4([127, 0, 0, 0], 8, LOOPBACK) },
    v4([169, 254, 169, 254], 32, METADATA),
    v4([169, 254, 0, 0], 16, LINK_LOCAL),
    v4([172, 16, 0, 0], 12, PRIVATE),
    v4([192, 0, 0, 0], 24, IETF_ASSIGNMENTS),
    v4([192, 0, 2, 0], 24, DOCUMENTATION),
    v4([192, 88, 99, 0], 24, "a reserved address (the deprecated 6to4 relay anycast)"),
    v4([192, 168, 0, 0], 16, PRIVATE),
    v4([198, 18, 0, 0], 15, BENCHMARKING),
    v4([198, 51, 100, 0], 24, DOCUMENTATION),
    v4([203, 0, 113, 0], 24, DOCUMENTATION),
    v4([224, 0, 0, 0], 4, MULTICAST),
    v4([255, 255, 255, 255], 32, "the broadcast address"),
    v4([240, 0, 0, 0], 4, "a reserved address (future use)"),
];

/// The IPv6 ranges that are not public and embed no IPv4 address worth judging, the
/// most specific first. Whatever is outside 2000::/3 and not listed here or in
/// [`EMBEDDED`] is refused as well.
#[rustfmt::skip]
static V6_RANGES: [Range<Ipv6Net>; 14] = [
    v6([0, 0, 0, 0, 0, 0, 0, 0], 128, UNSPECIFIED),
    Range { loopback: true, ..v6([0, 0, 0, 0, 0, 0, 0, 1], 128, LOOPBACK) },
    v6([0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254], 128, METADATA_AWS_V6),
    v6([0x64, 0xff9b, 1, 0, 0, 0, 0, 0], 48, LOCAL_NAT64),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 32, TEREDO),
    v6([0x2001, 2, 0, 0, 0, 0, 0, 0], 48, BENCHMARKING),
    v6([0x2001, 0, 0, 0, 0, 0, 0, 0], 23, IETF_ASSIGNMENTS),
    v6([0x2001, 0xdb8, 0, 0, 0, 0, 0, 0], 32, DOCUMENTATION),
    v6([0x3fff, 0, 0, 0, 0, 0, 0, 0], 20, DOCUMENTATION),
    v6([0x100, 0, 0, 0, 0, 0, 0, 0], 64, "a reserved address (discard-only)"),
    v6([0xfc00, 0, 0, 0, 0, 0, 0, 0], 7, "a unique local (private) address"),
    v6([0xfe80, 0, 0, 0, 0, 0, 0, 0], 10, LINK_LOCAL),
    v6([0xfec0, 0, 0, 0, 0, 0, 0, 0], 10, "a site-local (deprecated private) address"),
    v6([0xff00, 0, 0, 0, 0, 0, 0, 0], 8, MULTICAST),
];

/// The global unicast range; the rest of the IPv6 space is reserved.
const GLOBAL_UNICAST: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, "").net;

/// An IPv6 form that carries an IPv4 address.
struct Embedded {
    net: Ipv6Net,
    /// The form, as a noun phrase: "a 6to4 address".
    what: &'static str,
    /// How far to shift the address right to bring the IPv4 address to the low bits.
    shift: u32,
    /// Whether dialling the address dials the IPv4 address on this host, so that
    /// `allow_loopback` applies (true only for IPv4-mapped addresses).
    transparent: bool,
}

/// The IPv6 forms judged by the IPv4 address inside them. `::` and `::1` are in
/// [`V6_RANGES`], which is consulted first.
#[rustfmt::skip]
static EMBEDDED: [Embedded; 4] = [
    embedded([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, "an IPv4-mapped address", 0, true),
    embedded([0; 8], 96, "an IPv4-compatible address", 0, false),
    embedded([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, "a NAT64 address", 0, false),
    // The IPv4 address is bits 16..48.
    embedded([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "a 6to4 address", 80, false),
];

const fn embedded(
    segments: [u16; 8],
    len: u8,
    what: &'static str,
    shift: u32,
    transparent: bool,
) -> Embedded {
    Embedded {
        net: v6(segments, len, what).net,
        what,
        shift,
        transparent,
    }
}

/// Names that are cloud metadata services wherever they resolve.
const METADATA_NAMES: [&str; 4] = [
    "metadata",
    "metadata.google.internal",
    "metadata.azure.com",
    "instance-data",
];

/// Name suffixes that are never public, with what a name under them is.
const LOCAL_SUFFIXES: [(&str, &str); 5] = [
    (".localhost", "a loopback name"),
    (".local", "a local-network (multicast DNS) name"),
    (".internal", "a private-use name"),
    (".home.arpa", "a home-network name"),
    (".localdomain", "a local name"),
];

/// Why an address is refused.
struct Refusal {
    /// What the address is: "a private address (10.0.0.0/8)".
    what: String,
    /// Whether `--webhook-allow-loopback` would let it through.
    loopback: bool,
}

/// The end of every refusal of an address: what to do about it. `loopback`: whether
/// `--webhook-allow-loopback` would let the address through.
fn advice(loopback: bool) -> String {
    let hint = if loopback { LOOPBACK_HINT } else { "" };
    format!("{MUST_BE_PUBLIC}{hint}")
}

/// Describes a range: its noun phrase and, unless it is a single address, the range.
fn describe<N: std::fmt::Display>(range: &Range<N>, single: bool) -> String {
    if single {
        range.what.to_owned()
    } else {
        format!("{} ({})", range.what, range.net)
    }
}

fn judge_v4(ip: Ipv4Addr, policy: TargetPolicy) -> Option<Refusal> {
    let range = V4_RANGES.iter().find(|range| range.net.contains(&ip))?;
    if range.loopback && policy.allow_loopback {
        return None;
    }
    Some(Refusal {
        what: describe(range, range.net.prefix_len() == 32),
        loopback: range.loopback,
    })
}

fn judge_v6(ip: Ipv6Addr, policy: TargetPolicy) -> Option<Refusal> {
    if let Some(range) = V6_RANGES.iter().find(|range| range.net.contains(&ip)) {
        if range.loopback && policy.allow_loopback {
            return None;
        }
        return Some(Refusal {
            what: describe(range, range.net.prefix_len() == 128),
            loopback: range.loopback,
        });
    }
    if let Some(form) = EMBEDDED.iter().find(|form| form.net.contains(&ip)) {
        // The mask keeps the 32 bits of the IPv4 address; the cast cannot truncate them.
        let inner = Ipv4Addr::from_bits(((ip.to_bits() >> form.shift) & 0xffff_ffff) as u32);
        // Only a mapped address is the IPv4 address itself; the flag never lets a
        // tunnel or translator through.
        let inner_policy = if form.transparent {
            policy
        } else {
            TargetPolicy::default()
        };
        return judge_v4(inner, inner_policy).map(|refusal| Refusal {
            what: format!(
                "{} ({}) embedding {inner}, which is {}",
                form.what, form.net, refusal.what
            ),
            loopback: refusal.loopback && form.transparent,
        });
    }
    if !GLOBAL_UNICAST.contains(&ip) {
        return Some(Refusal {
            what: format!("a reserved address (outside the global unicast range {GLOBAL_UNICAST})"),
            loopback: false,
        });
    }
    None
}

fn judge(ip: IpAddr, policy: TargetPolicy) -> Option<Refusal> {
    match ip {
        IpAddr::V4(ip) => judge_v4(ip, policy),
        IpAddr::V6(ip) => judge_v6(ip, policy),
    }
}

/// Why this address may not be a webhook target, or None when it is public (after
/// unwrapping embedded IPv4).
pub fn forbidden_address(ip: IpAddr, policy: TargetPolicy) -> Option<String> {
    judge(ip, policy)
        .map(|refusal| format!("`{ip}` is {}: {}", refusal.what, advice(refusal.loopback)))
}

/// Why this host name may not be a webhook target, whatever it resolves to.
fn forbidden_name(host: &str, policy: TargetPolicy) -> Option<String> {
    // A trailing dot makes a name absolute without changing what it names.
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    if name.is_empty() {
        return Some("the callback URL has an empty host name".to_owned());
    }
    if name == "localhost" {
        return (!policy.allow_loopback)
            .then(|| format!("`{host}` is a loopback name: {MUST_BE_PUBLIC}{LOOPBACK_HINT}"));
    }
    if METADATA_NAMES.contains(&name.as_str()) {
        return Some(format!(
            "`{host}` is a cloud metadata service name: {MUST_BE_PUBLIC}"
        ));
    }
    if let Some((suffix, what)) = LOCAL_SUFFIXES
        .iter()
        .find(|(suffix, _)| name.ends_with(suffix))
    {
        return Some(format!(
            "`{host}` is {what} (`{suffix}`), never a public one: {MUST_BE_PUBLIC}"
        ));
    }
    if !name.contains('.') {
        return Some(format!(
            "`{host}` is a single-label name, which resolves through the server's local \
             search domains: use a fully qualified public name"
        ));
    }
    None
}

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

/// Name lookups, injectable for tests (DNS rebinding). [`SystemLookup`] uses
/// `tokio::net::lookup_host`.
pub trait Lookup: Send + Sync + 'static {
    /// The addresses `host` resolves to, in preference order.
    fn lookup(&self, host: &str) -> BoxFuture<'static, io::Result<Vec<IpAddr>>>;
}

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
