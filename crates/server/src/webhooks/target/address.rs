//! The addresses and names that may never be webhook targets, and why: the ranges
//! (IPv4, IPv6, and IPv4 embedded in IPv6), the metadata names and the local
//! suffixes, each with the sentence a refusal says.

use super::TargetPolicy;
use ipnet::{Ipv4Net, Ipv6Net};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// What every refusal of an address ends with.
pub(super) const MUST_BE_PUBLIC: &str = "webhook targets must be public";
/// The fix for a loopback target during development.
pub(super) const LOOPBACK_HINT: &str =
    " (for local development, start the server with `--webhook-allow-loopback`)";

/// A range of addresses that may not be a webhook target.
pub(super) struct Range<N> {
    net: N,
    /// What an address in this range is, as a noun phrase: "a private address".
    what: &'static str,
    /// Whether `allow_loopback` lets the range through.
    loopback: bool,
}

pub(super) const fn v4(addr: [u8; 4], len: u8, what: &'static str) -> Range<Ipv4Net> {
    let [a, b, c, d] = addr;
    Range {
        net: Ipv4Net::new_assert(Ipv4Addr::new(a, b, c, d), len),
        what,
        loopback: false,
    }
}

pub(super) const fn v6(segments: [u16; 8], len: u8, what: &'static str) -> Range<Ipv6Net> {
    let [a, b, c, d, e, f, g, h] = segments;
    Range {
        net: Ipv6Net::new_assert(Ipv6Addr::new(a, b, c, d, e, f, g, h), len),
        what,
        loopback: false,
    }
}

pub(super) const PRIVATE: &str = "a private address";
pub(super) const LOOPBACK: &str = "a loopback address";
pub(super) const UNSPECIFIED: &str = "the unspecified address";
pub(super) const LINK_LOCAL: &str = "a link-local address";
pub(super) const MULTICAST: &str = "a multicast address";
pub(super) const DOCUMENTATION: &str = "a documentation address";
pub(super) const BENCHMARKING: &str = "a benchmarking address";
pub(super) const IETF_ASSIGNMENTS: &str = "a reserved address (IETF protocol assignments)";
pub(super) const METADATA: &str = "a cloud metadata address (AWS, GCP, Azure, OpenStack, …)";
pub(super) const METADATA_ALIBABA: &str = "a cloud metadata address (Alibaba Cloud)";
pub(super) const METADATA_AWS_V6: &str = "a cloud metadata address (AWS)";
pub(super) const LOCAL_NAT64: &str =
    "a local-use NAT64 address, whose IPv4 embedding depends on the network (refused outright)";
pub(super) const TEREDO: &str =
    "a Teredo address, tunnelling to an IPv4 relay and client (refused outright)";

/// The IPv4 ranges that are not public, the most specific first (IANA's special-purpose
/// registry, RFC 6890 and successors; `192.0.0.0/24` is refused whole).
#[rustfmt::skip]
pub(super) static V4_RANGES: [Range<Ipv4Net>; 19] = [
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
pub(super) static V6_RANGES: [Range<Ipv6Net>; 14] = [
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
pub(super) const GLOBAL_UNICAST: Ipv6Net = v6([0x2000, 0, 0, 0, 0, 0, 0, 0], 3, "").net;

/// An IPv6 form that carries an IPv4 address.
pub(super) struct Embedded {
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
pub(super) static EMBEDDED: [Embedded; 4] = [
    embedded([0, 0, 0, 0, 0, 0xffff, 0, 0], 96, "an IPv4-mapped address", 0, true),
    embedded([0; 8], 96, "an IPv4-compatible address", 0, false),
    embedded([0x64, 0xff9b, 0, 0, 0, 0, 0, 0], 96, "a NAT64 address", 0, false),
    // The IPv4 address is bits 16..48.
    embedded([0x2002, 0, 0, 0, 0, 0, 0, 0], 16, "a 6to4 address", 80, false),
];

pub(super) const fn embedded(
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
pub(super) const METADATA_NAMES: [&str; 4] = [
    "metadata",
    "metadata.google.internal",
    "metadata.azure.com",
    "instance-data",
];

/// Name suffixes that are never public, with what a name under them is.
pub(super) const LOCAL_SUFFIXES: [(&str, &str); 5] = [
    (".localhost", "a loopback name"),
    (".local", "a local-network (multicast DNS) name"),
    (".internal", "a private-use name"),
    (".home.arpa", "a home-network name"),
    (".localdomain", "a local name"),
];

/// Why an address is refused.
pub(super) struct Refusal {
    /// What the address is: "a private address (10.0.0.0/8)".
    pub(super) what: String,
    /// Whether `--webhook-allow-loopback` would let it through.
    pub(super) loopback: bool,
}

/// The end of every refusal of an address: what to do about it. `loopback`: whether
/// `--webhook-allow-loopback` would let the address through.
pub(super) fn advice(loopback: bool) -> String {
    let hint = if loopback { LOOPBACK_HINT } else { "" };
    format!("{MUST_BE_PUBLIC}{hint}")
}

/// Describes a range: its noun phrase and, unless it is a single address, the range.
pub(super) fn describe<N: std::fmt::Display>(range: &Range<N>, single: bool) -> String {
    if single {
        range.what.to_owned()
    } else {
        format!("{} ({})", range.what, range.net)
    }
}

pub(super) fn judge_v4(ip: Ipv4Addr, policy: TargetPolicy) -> Option<Refusal> {
    let range = V4_RANGES.iter().find(|range| range.net.contains(&ip))?;
    if range.loopback && policy.allow_loopback {
        return None;
    }
    Some(Refusal {
        what: describe(range, range.net.prefix_len() == 32),
        loopback: range.loopback,
    })
}

pub(super) fn judge_v6(ip: Ipv6Addr, policy: TargetPolicy) -> Option<Refusal> {
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

pub(super) fn judge(ip: IpAddr, policy: TargetPolicy) -> Option<Refusal> {
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
pub(super) fn forbidden_name(host: &str, policy: TargetPolicy) -> Option<String> {
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
