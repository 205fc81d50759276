//! Tests of the SSRF guard: the refusal table, the URL parser's IPv4 spellings, and
//! real connections (DNS rebinding, loopback policy, redirects) against listeners on
//! 127.0.0.1.

use std::collections::HashMap;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::net::TcpListener;

use super::*;

mod tls;
use tls::{CA_PEM, redirecting_server};

/// A public address (example.com's, at the time of writing); unreachable here.
const PUBLIC: IpAddr = IpAddr::V4(Ipv4Addr::new(93, 184, 215, 14));
const LOOPBACK: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const DENY: TargetPolicy = TargetPolicy {
    allow_loopback: false,
};
const ALLOW_LOOPBACK: TargetPolicy = TargetPolicy {
    allow_loopback: true,
};

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

/// Answers from a fixed table; other names do not resolve.
struct StaticLookup(HashMap<&'static str, Vec<IpAddr>>);

impl Lookup for StaticLookup {
    fn lookup(&self, host: &str) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
        let answer = self.0.get(host.trim_end_matches('.')).cloned();
        Box::pin(async move {
            answer.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such host"))
        })
    }
}

fn names() -> StaticLookup {
    StaticLookup(HashMap::from([
        ("public.example", vec![PUBLIC]),
        ("example.com", vec![PUBLIC]),
        ("dual.example", vec![ip("10.0.0.1"), PUBLIC, PUBLIC]),
        ("private.example", vec![ip("10.0.0.1")]),
        ("nip.example", vec![LOOPBACK]),
        ("127.0.0.1.nip.io", vec![LOOPBACK]),
        ("mixed.example", vec![ip("10.0.0.1"), LOOPBACK, ip("::1")]),
        ("meta.example", vec![ip("169.254.169.254")]),
        ("mapped.example", vec![ip("::ffff:127.0.0.1")]),
        ("ula.example", vec![ip("fd00::1")]),
        ("cgnat.example", vec![ip("100.64.0.1")]),
        ("sixtofour.example", vec![ip("2002:a00:1::1")]),
        ("empty.example", vec![]),
    ]))
}

/// Registration as the caller does it: the form, then the resolution.
async fn admit(raw: &str, policy: TargetPolicy) -> Result<Vec<SocketAddr>, Forbidden> {
    let url = check_url(raw, policy)?;
    resolve_checked(&url, &names(), policy).await
}

/// Targets that must be refused, with a word the reason must contain.
#[rustfmt::skip]
const REFUSED: &[(&str, &str)] = &[
    // Form.
    ("http://93.184.215.14/", "must use https (got http)"),
    ("ftp://example.com/", "must use https (got ftp)"),
    ("example.com/hook", "not a valid absolute URL"),
    ("https://", "not a valid absolute URL"),
    ("https://user:secret@example.com/", "credentials"),
    ("https://user@example.com/", "credentials"),
    ("https://:secret@example.com/", "credentials"),
    ("https://example.com/hook#part", "fragment"),
    ("https://example.com:0/", "port must not be 0"),
    ("https://[fe80::1%25eth0]/", "not a valid absolute URL"),
    // Loopback, in every spelling.
    ("https://127.0.0.1/", "a loopback address (127.0.0.0/8)"),
    ("https://127.255.255.254:8443/", "loopback"),
    ("https://127.0.0.1./", "loopback"),
    ("https://2130706433/", "loopback"),
    ("https://0177.0.0.1/", "loopback"),
    ("https://0x7f.1/", "loopback"),
    ("https://0x7f.0x0.0x0.0x1/", "loopback"),
    ("https://127.1/", "loopback"),
    ("https://%31%32%37.0.0.1/", "loopback"),
    ("https://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}/", "loopback"),
    ("https://[::1]/", "loopback"),
    ("https://[0:0:0:0:0:0:0:1]:443/", "loopback"),
    ("https://localhost/", "loopback name"),
    ("https://localhost./", "loopback name"),
    ("https://LOCALHOST:8080/", "loopback name"),
    ("https://app.localhost/", "loopback name"),
    ("https://localhost.localdomain/", "local name"),
    ("https://nip.example/", "resolves only to 127.0.0.1, a loopback address"),
    ("https://127.0.0.1.nip.io/", "loopback"),
    // Private (RFC 1918), unique local.
    ("https://10.0.0.5/", "a private address (10.0.0.0/8)"),
    ("https://172.16.0.1/", "a private address (172.16.0.0/12)"),
    ("https://172.31.255.255/", "private"),
    ("https://192.168.1.1/", "a private address (192.168.0.0/16)"),
    ("https://private.example/", "resolves only to 10.0.0.1, a private address"),
    ("https://[fc00::1]/", "unique local"),
    ("https://[fd12:3456::1]/", "unique local"),
    ("https://ula.example/", "unique local"),
    // Link-local and cloud metadata.
    ("https://169.254.0.1/", "link-local"),
    ("https://169.254.169.254/latest/meta-data/", "cloud metadata"),
    ("https://meta.example/", "cloud metadata"),
    ("https://[fd00:ec2::254]/", "cloud metadata"),
    ("https://100.100.100.200/", "cloud metadata address (Alibaba Cloud)"),
    ("https://metadata.google.internal/computeMetadata/v1/", "cloud metadata"),
    ("https://metadata/", "cloud metadata"),
    ("https://metadata.azure.com/", "cloud metadata"),
    ("https://instance-data/", "cloud metadata"),
    ("https://[fe80::1]/", "link-local"),
    ("https://[fec0::1]/", "site-local"),
    // CGNAT.
    ("https://100.64.0.1/", "carrier-grade NAT"),
    ("https://100.127.255.255/", "carrier-grade NAT"),
    ("https://cgnat.example/", "carrier-grade NAT"),
    // Multicast, broadcast, unspecified.
    ("https://224.0.0.1/", "multicast"),
    ("https://239.255.255.250/", "multicast"),
    ("https://[ff02::1]/", "multicast"),
    ("https://255.255.255.255/", "broadcast"),
    ("https://0.0.0.0/", "unspecified"),
    ("https://0/", "unspecified"),
    ("https://[::]/", "unspecified"),
    // Documentation.
    ("https://192.0.2.1/", "documentation"),
    ("https://198.51.100.7/", "documentation"),
    ("https://203.0.113.9/", "documentation"),
    ("https://[2001:db8::1]/", "documentation"),
    ("https://[3fff::1]/", "documentation"),
    // Reserved.
    ("https://240.0.0.1/", "reserved address (future use)"),
    ("https://0.1.2.3/", "reserved"),
    ("https://192.0.0.8/", "IETF protocol assignments"),
    ("https://192.88.99.1/", "reserved"),
    ("https://[100::1]/", "discard-only"),
    ("https://[2001:10::1]/", "IETF protocol assignments"),
    ("https://[4000::1]/", "outside the global unicast range"),
    // Benchmarking.
    ("https://198.18.0.1/", "benchmarking"),
    ("https://198.19.255.255/", "benchmarking"),
    ("https://[2001:2::1]/", "benchmarking"),
    // Embedded IPv4.
    ("https://[::ffff:127.0.0.1]/", "IPv4-mapped"),
    ("https://[::ffff:7f00:1]/", "loopback"),
    ("https://[::ffff:10.0.0.1]/", "embedding 10.0.0.1, which is a private address"),
    ("https://[::ffff:169.254.169.254]/", "cloud metadata"),
    ("https://mapped.example/", "IPv4-mapped"),
    ("https://[::127.0.0.1]/", "IPv4-compatible"),
    ("https://[::10.0.0.1]/", "private"),
    ("https://[64:ff9b::10.0.0.1]/", "NAT64"),
    ("https://[64:ff9b::127.0.0.1]/", "loopback"),
    ("https://[64:ff9b:1::a00:1]/", "local-use NAT64"),
    ("https://[2002:a00:1::1]/", "6to4 address (2002::/16) embedding 10.0.0.1"),
    ("https://[2002:7f00:1::]/", "loopback"),
    ("https://[2002:a9fe:a9fe::1]/", "cloud metadata"),
    ("https://sixtofour.example/", "6to4"),
    ("https://[2001:0:4136:e378:8000:63bf:3fff:fdd2]/", "Teredo"),
    ("https://[2001::1]/", "Teredo"),
    // Names that are never public, or do not resolve.
    ("https://printer.local/", "`.local`"),
    ("https://db.internal/", "`.internal`"),
    ("https://router.home.arpa/", "home-network"),
    ("https://intranet/", "single-label"),
    ("https://mixed.example/", "non-public addresses"),
    ("https://nxdomain.example/", "does not resolve"),
    ("https://empty.example/", "does not resolve"),
];

#[tokio::test]
async fn refused_targets() {
    assert!(REFUSED.len() >= 60, "{} refused targets", REFUSED.len());
    let mut wrong = Vec::new();
    for &(url, needle) in REFUSED {
        match admit(url, DENY).await {
            Ok(addrs) => wrong.push(format!("{url}: admitted ({addrs:?})")),
            Err(Forbidden(reason)) if !reason.contains(needle) => {
                wrong.push(format!("{url}: {reason:?} lacks {needle:?}"));
            }
            Err(_) => {}
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[tokio::test]
async fn public_targets_pass() {
    let admitted: &[(&str, &[SocketAddr])] = &[
        ("https://93.184.215.14/", &[SocketAddr::new(PUBLIC, 443)]),
        (
            "https://93.184.215.14:8443/hook?x=1",
            &[SocketAddr::new(PUBLIC, 8443)],
        ),
        (
            "https://[2606:4700::1111]/",
            &[SocketAddr::new(
                IpAddr::V6(Ipv6Addr::new(0x2606, 0x4700, 0, 0, 0, 0, 0, 0x1111)),
                443,
            )],
        ),
        (
            "https://public.example/hooks/1",
            &[SocketAddr::new(PUBLIC, 443)],
        ),
        ("https://example.com./", &[SocketAddr::new(PUBLIC, 443)]),
        // Only the public address of a mixed answer is kept, once.
        (
            "https://dual.example:9443/",
            &[SocketAddr::new(PUBLIC, 9443)],
        ),
        // Embedded public IPv4 addresses are judged by what they embed.
        (
            "https://[::ffff:93.184.215.14]/",
            &[SocketAddr::new(ip("::ffff:93.184.215.14"), 443)],
        ),
        (
            "https://[64:ff9b::5db8:d70e]/",
            &[SocketAddr::new(ip("64:ff9b::5db8:d70e"), 443)],
        ),
        (
            "https://[2002:5db8:d70e::1]/",
            &[SocketAddr::new(ip("2002:5db8:d70e::1"), 443)],
        ),
    ];
    for &(url, expected) in admitted {
        assert_eq!(admit(url, DENY).await.as_deref(), Ok(expected), "{url}");
    }
}

#[test]
fn reasons_say_what_is_wrong_and_how_to_fix_it() {
    assert_eq!(
        check_url("http://example.com/", DENY),
        Err(Forbidden(
            "the callback URL must use https (got http)".into()
        ))
    );
    assert_eq!(
        forbidden_address(ip("10.0.0.5"), DENY).as_deref(),
        Some("`10.0.0.5` is a private address (10.0.0.0/8): webhook targets must be public")
    );
    assert_eq!(
        forbidden_address(ip("::ffff:10.0.0.5"), DENY).as_deref(),
        Some(
            "`::ffff:10.0.0.5` is an IPv4-mapped address (::ffff:0.0.0.0/96) embedding \
             10.0.0.5, which is a private address (10.0.0.0/8): webhook targets must be public"
        )
    );
    let loopback = forbidden_address(LOOPBACK, DENY).unwrap();
    assert!(loopback.contains("--webhook-allow-loopback"), "{loopback}");
    let metadata = forbidden_address(ip("169.254.169.254"), DENY).unwrap();
    assert!(
        metadata.starts_with("`169.254.169.254` is a cloud metadata address"),
        "{metadata}"
    );
    // The flag does not help with what it does not allow, so it is not suggested.
    let private = forbidden_address(ip("10.0.0.5"), DENY).unwrap();
    assert!(!private.contains("allow-loopback"), "{private}");
    let tunnelled = forbidden_address(ip("2002:7f00:1::"), DENY).unwrap();
    assert!(!tunnelled.contains("allow-loopback"), "{tunnelled}");
}

#[tokio::test]
async fn resolution_reasons_name_the_host_and_its_addresses() {
    assert_eq!(
        admit("https://private.example/", DENY).await,
        Err(Forbidden(
            "`private.example` resolves only to 10.0.0.1, a private address (10.0.0.0/8): \
             webhook targets must be public"
                .into()
        ))
    );
    let Err(Forbidden(mixed)) = admit("https://mixed.example/", DENY).await else {
        panic!("mixed.example admitted");
    };
    assert!(
        mixed.starts_with(
            "`mixed.example` resolves only to non-public addresses: 10.0.0.1 is a private \
             address (10.0.0.0/8); 127.0.0.1 is a loopback address (127.0.0.0/8); ::1 is a \
             loopback address: webhook targets must be public"
        ),
        "{mixed}"
    );
    let Err(Forbidden(missing)) = admit("https://nxdomain.example/", DENY).await else {
        panic!("nxdomain.example admitted");
    };
    assert!(
        missing.starts_with("`nxdomain.example` does not resolve"),
        "{missing}"
    );
}

/// The WHATWG parser turns every IPv4 spelling into an IPv4 host for `https`, so
/// `check_url` only has to judge `Host::Ipv4`.
#[test]
fn url_parser_normalizes_ipv4_spellings() {
    for spelling in [
        "https://2130706433/",
        "https://0177.0.0.1/",
        "https://0177.1/",
        "https://0x7f.1/",
        "https://0x7f000001/",
        "https://0x7f.0x0.0x0.0x1/",
        "https://127.1/",
        "https://127.0.0.1./",
        "https://%31%32%37.0.0.1/",
        "https://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}/",
    ] {
        let url = Url::parse(spelling).unwrap();
        assert_eq!(
            url.host(),
            Some(Host::Ipv4(Ipv4Addr::LOCALHOST)),
            "{spelling}"
        );
    }
    // A numeric last label that is no IPv4 address is not a name either.
    assert!(Url::parse("https://1.2.3.4.5/").is_err());
    assert!(Url::parse("https://0x100000000/").is_err());
}

#[test]
fn allow_loopback_lets_loopback_through_and_nothing_else() {
    for allowed in ["127.0.0.1", "127.9.9.9", "::1", "::ffff:127.0.0.1"] {
        assert_eq!(
            forbidden_address(ip(allowed), ALLOW_LOOPBACK),
            None,
            "{allowed}"
        );
    }
    for refused in [
        "10.0.0.1",
        "169.254.169.254",
        "0.0.0.0",
        "::",
        "fe80::1",
        "::127.0.0.1",
        "64:ff9b::127.0.0.1",
        "2002:7f00:1::",
    ] {
        assert!(
            forbidden_address(ip(refused), ALLOW_LOOPBACK).is_some(),
            "{refused}"
        );
    }
    assert!(check_url("https://localhost:8443/hook", ALLOW_LOOPBACK).is_ok());
    assert!(check_url("https://localhost./hook", ALLOW_LOOPBACK).is_ok());
    assert!(check_url("https://127.0.0.1:8443/hook", ALLOW_LOOPBACK).is_ok());
    assert!(check_url("https://[::1]:8443/hook", ALLOW_LOOPBACK).is_ok());
    for refused in [
        "https://app.localhost/",
        "https://10.0.0.1/",
        "https://metadata.google.internal/",
        "http://127.0.0.1/",
    ] {
        assert!(check_url(refused, ALLOW_LOOPBACK).is_err(), "{refused}");
    }
}

#[tokio::test]
async fn allow_loopback_still_refuses_names_resolving_to_private_addresses() {
    assert!(admit("https://nip.example/", ALLOW_LOOPBACK).await.is_ok());
    let Err(Forbidden(reason)) = admit("https://private.example/", ALLOW_LOOPBACK).await else {
        panic!("private.example admitted");
    };
    assert!(reason.contains("private address"), "{reason}");
}

#[test]
fn bad_ca_files_are_refused() {
    let lookup: Arc<dyn Lookup> = Arc::new(SystemLookup);
    let err = http_client(DENY, lookup.clone(), Some(b"not a certificate")).unwrap_err();
    assert!(err.contains("no PEM certificate"), "{err}");
    assert!(http_client(DENY, lookup.clone(), Some(CA_PEM.as_bytes())).is_ok());
    assert!(http_client(DENY, lookup, None).is_ok());
}

// Real connections.

/// Answers `first` on the first lookup and `later` on every other one, counting them.
struct RebindLookup {
    calls: AtomicUsize,
    first: Vec<IpAddr>,
    later: Vec<IpAddr>,
}

impl RebindLookup {
    fn new(first: Vec<IpAddr>, later: Vec<IpAddr>) -> Arc<Self> {
        Arc::new(Self {
            calls: AtomicUsize::new(0),
            first,
            later,
        })
    }

    fn calls(&self) -> usize {
        self.calls.load(Ordering::SeqCst)
    }
}

impl Lookup for RebindLookup {
    fn lookup(&self, _host: &str) -> BoxFuture<'static, io::Result<Vec<IpAddr>>> {
        let answer = if self.calls.fetch_add(1, Ordering::SeqCst) == 0 {
            self.first.clone()
        } else {
            self.later.clone()
        };
        Box::pin(async move { Ok(answer) })
    }
}

/// A TCP listener on 127.0.0.1 that counts the connections it accepts and drops them.
async fn counting_listener() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, accepted)
}

/// Gives a listener time to count a connection that is already under way.
async fn settle() {
    tokio::time::sleep(Duration::from_millis(200)).await;
}

#[tokio::test]
async fn rebinding_to_loopback_is_never_dialled() {
    let (port, accepted) = counting_listener().await;
    let lookup = RebindLookup::new(vec![PUBLIC], vec![LOOPBACK]);
    let url = check_url(&format!("https://rebind.test:{port}/"), DENY).unwrap();
    // Registration sees the public answer.
    let addrs = resolve_checked(&url, lookup.as_ref(), DENY).await.unwrap();
    assert_eq!(addrs, vec![SocketAddr::new(PUBLIC, port)]);

    // Delivery: the name now resolves to the loopback listener.
    let client = http_client(DENY, lookup.clone(), None).unwrap();
    let result = client.post(url).body("{}").send().await;
    settle().await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the loopback listener was dialled"
    );
    let err = result.unwrap_err();
    assert_eq!(
        lookup.calls(),
        2,
        "the client must look the name up through the guard"
    );
    let forbidden = forbidden_cause(&err).unwrap_or_else(|| panic!("{}", error_chain(&err)));
    assert!(
        forbidden.0.contains("resolves only to 127.0.0.1"),
        "{forbidden}"
    );
}

#[tokio::test]
async fn loopback_in_a_mixed_answer_is_never_dialled() {
    let (port, accepted) = counting_listener().await;
    let lookup = RebindLookup::new(vec![LOOPBACK, PUBLIC], vec![LOOPBACK, PUBLIC]);
    let url = check_url(&format!("https://rebind.test:{port}/"), DENY).unwrap();
    let addrs = resolve_checked(&url, lookup.as_ref(), DENY).await.unwrap();
    assert_eq!(addrs, vec![SocketAddr::new(PUBLIC, port)]);

    let client = http_client(DENY, lookup.clone(), None).unwrap();
    // The public address cannot be reached from here: bound the attempt.
    let sent =
        tokio::time::timeout(Duration::from_secs(2), client.post(url).body("{}").send()).await;
    settle().await;
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        0,
        "the loopback listener was dialled"
    );
    assert!(!matches!(sent, Ok(Ok(_))), "a request succeeded: {sent:?}");
    assert_eq!(lookup.calls(), 2);
}

#[tokio::test]
async fn allow_loopback_reaches_the_loopback_listener_only() {
    let (port, accepted) = counting_listener().await;
    let lookup = RebindLookup::new(vec![LOOPBACK], vec![LOOPBACK]);
    let client = http_client(ALLOW_LOOPBACK, lookup.clone(), None).unwrap();
    let url = check_url(&format!("https://rebind.test:{port}/"), ALLOW_LOOPBACK).unwrap();
    // The listener drops the connection, so the TLS handshake fails.
    let err = client.post(url).body("{}").send().await.unwrap_err();
    settle().await;
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "{}", error_chain(&err));
    assert!(forbidden_cause(&err).is_none(), "{}", error_chain(&err));

    // Private addresses stay refused, at registration and at connect time.
    let private = RebindLookup::new(vec![ip("10.0.0.1")], vec![ip("10.0.0.1")]);
    let url = check_url("https://private.test/", ALLOW_LOOPBACK).unwrap();
    assert!(
        resolve_checked(&url, private.as_ref(), ALLOW_LOOPBACK)
            .await
            .is_err()
    );
    let client = http_client(ALLOW_LOOPBACK, private.clone(), None).unwrap();
    let err = client.post(url).send().await.unwrap_err();
    assert!(forbidden_cause(&err).is_some(), "{}", error_chain(&err));
}

#[tokio::test]
async fn literal_addresses_are_refused_by_guarded_request() {
    let (port, accepted) = counting_listener().await;
    let url = Url::parse(&format!("https://127.0.0.1:{port}/")).unwrap();
    let lookup: Arc<dyn Lookup> = Arc::new(names());

    let client = http_client(DENY, lookup.clone(), None).unwrap();
    let refused = guarded_request(&client, reqwest::Method::POST, &url, DENY).unwrap_err();
    assert!(refused.0.contains("loopback"), "{refused}");
    let private = Url::parse("https://[::ffff:10.0.0.1]/").unwrap();
    assert!(guarded_request(&client, reqwest::Method::POST, &private, DENY).is_err());

    let client = http_client(ALLOW_LOOPBACK, lookup, None).unwrap();
    let request = guarded_request(&client, reqwest::Method::POST, &url, ALLOW_LOOPBACK).unwrap();
    assert!(request.body("{}").send().await.is_err());
    settle().await;
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

/// Also shows that `extra_roots` is trusted: the handshake with a certificate from
/// the test CA succeeds.
#[tokio::test]
async fn redirects_are_not_followed() {
    let (port, requests) = redirecting_server().await;
    let lookup = RebindLookup::new(vec![LOOPBACK], vec![LOOPBACK]);
    let client = http_client(ALLOW_LOOPBACK, lookup, Some(CA_PEM.as_bytes())).unwrap();
    let url = check_url(&format!("https://rebind.test:{port}/hook"), ALLOW_LOOPBACK).unwrap();
    let response = guarded_request(&client, reqwest::Method::POST, &url, ALLOW_LOOPBACK)
        .unwrap()
        .body("{\"event\":\"test\"}")
        .send()
        .await
        .unwrap_or_else(|err| panic!("{}", error_chain(&err)));
    assert_eq!(response.status(), reqwest::StatusCode::TEMPORARY_REDIRECT);
    assert_eq!(
        response.headers()[reqwest::header::LOCATION],
        format!("https://rebind.test:{port}/elsewhere").as_str()
    );
    settle().await;
    assert_eq!(
        requests.load(Ordering::SeqCst),
        1,
        "the redirect was followed"
    );
}
