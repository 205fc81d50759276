//! The console's client-side routes, and the filters that travel in their query
//! strings. Pure functions: unit-tested on the host.
//!
//! | path | page |
//! |---|---|
//! | `/` | overview |
//! | `/agents` | agents |
//! | `/inbox?agent=&status=&correlation_id=&q=` | inbox explorer |
//! | `/events/{id}` | event inspector |
//! | `/quarantine?agent=` | quarantine (dead letter) |
//! | `/audit` | audit log |
//! | `/leases` | leases and memory lineage |
//! | `/fencing` | fencing rejections |
//! | `/webhooks` | webhook callbacks and their attempts |
//! | `/devices?user_code=` | device login requests (the link a device shows) |
//! | `/oauth/authorize?…` | an app's sign-in: the consent page (the server checked the request) |

/// Which events a list shows: the operator API's filter, as the URL carries it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct EventQuery {
    pub(crate) agent: Option<String>,
    pub(crate) status: Option<String>,
    pub(crate) correlation_id: Option<String>,
    pub(crate) q: Option<String>,
    /// Kept as typed: the server says if it is not a number.
    pub(crate) priority: Option<String>,
}

impl EventQuery {
    /// Reads `agent`, `status`, `correlation_id` and `q`; ignores anything else and
    /// empty values.
    pub(crate) fn parse(query: &str) -> Self {
        let mut out = Self::default();
        for (key, value) in parse_pairs(query) {
            let value = Some(value).filter(|v| !v.trim().is_empty());
            match key.as_str() {
                "agent" => out.agent = value,
                "status" => out.status = value,
                "correlation_id" => out.correlation_id = value,
                "q" => out.q = value,
                "priority" => out.priority = value,
                _ => {}
            }
        }
        out
    }

    /// `agent=a&status=b…` (empty when nothing filters), in a fixed order.
    pub(crate) fn to_query_string(&self) -> String {
        [
            ("agent", &self.agent),
            ("status", &self.status),
            ("correlation_id", &self.correlation_id),
            ("q", &self.q),
            ("priority", &self.priority),
        ]
        .iter()
        .filter_map(|(k, v)| v.as_ref().filter(|v| !v.is_empty()).map(|v| (k, v)))
        .map(|(k, v)| format!("{k}={}", encode(v)))
        .collect::<Vec<_>>()
        .join("&")
    }

    /// The same filter with `status` forced (the quarantine page's view).
    pub(crate) fn with_status(&self, status: &str) -> Self {
        Self {
            status: Some(status.to_owned()),
            ..self.clone()
        }
    }

    pub(crate) fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Route {
    Overview,
    Agents,
    Inbox(EventQuery),
    Event(String),
    Quarantine(EventQuery),
    Audit,
    Leases,
    Fencing,
    Webhooks,
    /// Device login requests, with the user code the link named.
    Devices(Option<String>),
    /// An app's sign-in (the authorization request's query string).
    Authorize(SignInRequest),
    NotFound(String),
}

impl Route {
    /// The route of `path` (which may carry `?query`).
    pub(crate) fn parse(location: &str) -> Self {
        let (path, query) = location.split_once('?').unwrap_or((location, ""));
        let path = path.trim_end_matches('/');
        match path {
            "" => Self::Overview,
            "/agents" => Self::Agents,
            "/inbox" => Self::Inbox(EventQuery::parse(query)),
            "/quarantine" => Self::Quarantine(EventQuery::parse(query)),
            "/audit" => Self::Audit,
            "/leases" => Self::Leases,
            "/fencing" => Self::Fencing,
            "/webhooks" => Self::Webhooks,
            "/devices" => Self::Devices(marked_code(query)),
            "/oauth/authorize" => Self::Authorize(SignInRequest::parse(query)),
            _ => match path.strip_prefix("/events/") {
                Some(id) if !id.is_empty() && !id.contains('/') => Self::Event(decode(id)),
                _ => Self::NotFound(path.to_owned()),
            },
        }
    }

    /// The navigation entry this route belongs to (for `aria-current`).
    pub(crate) fn section(&self) -> &'static str {
        match self {
            Self::Overview => "/",
            Self::Agents => "/agents",
            Self::Inbox(_) | Self::Event(_) => "/inbox",
            Self::Quarantine(_) => "/quarantine",
            Self::Audit => "/audit",
            Self::Leases => "/leases",
            Self::Fencing => "/fencing",
            Self::Webhooks => "/webhooks",
            Self::Devices(_) => "/devices",
            Self::Authorize(_) | Self::NotFound(_) => "",
        }
    }
}

/// What an app's sign-in asks for, as the consent page shows it. The server
/// checked the request before it served this page, and checks it again when the
/// operator decides (the query travels back as it came).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SignInRequest {
    /// The query string, as it came (without `?`).
    pub(crate) query: String,
    pub(crate) client_id: String,
    /// Where the app listens: `127.0.0.1:PORT`.
    pub(crate) listener: String,
    pub(crate) scopes: Vec<String>,
}

impl SignInRequest {
    pub(crate) fn parse(query: &str) -> Self {
        let pairs = parse_pairs(query);
        let get = |name: &str| {
            pairs
                .iter()
                .find(|(k, v)| k == name && !v.is_empty())
                .map(|(_, v)| v.clone())
        };
        let redirect = get("redirect_uri").unwrap_or_default();
        let listener = redirect
            .strip_prefix("http://")
            .and_then(|rest| rest.split(['/', '?']).next())
            .unwrap_or_default()
            .to_owned();
        let scopes = get("scope")
            .unwrap_or_else(|| switchboard_proto::SIGN_IN_DEFAULT_SCOPE.to_owned())
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        Self {
            query: query.trim_start_matches('?').to_owned(),
            client_id: get("client_id").unwrap_or_default(),
            listener,
            scopes,
        }
    }
}

/// The user code a link names (`?user_code=XXXX-XXXX`), upper case with its dash.
pub(crate) fn marked_code(query: &str) -> Option<String> {
    parse_pairs(query)
        .into_iter()
        .find(|(k, _)| k == "user_code")
        .map(|(_, v)| {
            let letters: String = v
                .chars()
                .filter(|c| c.is_ascii_alphabetic())
                .map(|c| c.to_ascii_uppercase())
                .collect();
            match letters.len() {
                8 => format!("{}-{}", &letters[..4], &letters[4..]),
                _ => letters,
            }
        })
        .filter(|c| !c.is_empty())
}

/// The operator API's path for one page of events matching `query`.
pub(crate) fn events_api_path(query: &EventQuery, after: Option<&str>, limit: u32) -> String {
    let mut qs = query.to_query_string();
    if let Some(after) = after {
        if !qs.is_empty() {
            qs.push('&');
        }
        qs.push_str(&format!("after={}", encode(after)));
    }
    if !qs.is_empty() {
        qs.push('&');
    }
    format!("/api/v1/ops/events?{qs}limit={limit}")
}

/// `path` plus `?query` when the query is not empty.
pub(crate) fn href(path: &str, query: &EventQuery) -> String {
    let qs = query.to_query_string();
    if qs.is_empty() {
        path.to_owned()
    } else {
        format!("{path}?{qs}")
    }
}

/// Percent-encodes everything but RFC 3986 unreserved characters.
pub(crate) fn encode(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for b in value.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Decodes `%XX` and `+` (a space in form encoding); bad escapes stay as they are.
pub(crate) fn decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes[i];
        if b == b'%'
            && let Some(hex) = value.get(i + 1..i + 3)
            && hex.bytes().all(|h| h.is_ascii_hexdigit())
            && let Ok(v) = u8::from_str_radix(hex, 16)
        {
            out.push(v);
            i += 3;
            continue;
        }
        out.push(if b == b'+' { b' ' } else { b });
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn parse_pairs(query: &str) -> Vec<(String, String)> {
    query
        .trim_start_matches('?')
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (decode(k), decode(v))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_map_to_pages() {
        assert_eq!(Route::parse("/"), Route::Overview);
        assert_eq!(Route::parse(""), Route::Overview);
        assert_eq!(Route::parse("/agents/"), Route::Agents);
        assert_eq!(Route::parse("/audit"), Route::Audit);
        assert_eq!(Route::parse("/webhooks"), Route::Webhooks);
        assert_eq!(Route::parse("/devices"), Route::Devices(None));
        // The link a device shows, and the code typed loosely.
        assert_eq!(
            Route::parse("/devices?user_code=BCDF-GHJK"),
            Route::Devices(Some("BCDF-GHJK".into()))
        );
        assert_eq!(
            Route::parse("/devices?user_code=bcdfghjk"),
            Route::Devices(Some("BCDF-GHJK".into()))
        );
        assert_eq!(
            Route::parse("/events/0193-ab"),
            Route::Event("0193-ab".into())
        );
        assert_eq!(
            Route::parse("/agents/anything"),
            Route::NotFound("/agents/anything".into())
        );
        assert_eq!(Route::parse("/events/"), Route::NotFound("/events".into()));
    }

    #[test]
    fn a_sign_in_request_shows_its_app_listener_and_scopes() {
        let query = "response_type=code&client_id=switchboard-desktop&redirect_uri=\
                     http%3A%2F%2F127.0.0.1%3A49152%2Fcallback&code_challenge=x&state=y";
        let Route::Authorize(r) = Route::parse(&format!("/oauth/authorize?{query}")) else {
            panic!("not the consent page");
        };
        assert_eq!(r.client_id, "switchboard-desktop");
        assert_eq!(r.listener, "127.0.0.1:49152");
        assert_eq!(r.scopes, ["ops:read", "ops:write"], "the default");
        assert_eq!(r.query, query, "sent back as it came");
        let r = SignInRequest::parse(
            "?scope=ops%3Aread&redirect_uri=http%3A%2F%2F%5B%3A%3A1%5D%3A80%2F",
        );
        assert_eq!(r.scopes, ["ops:read"]);
        assert_eq!(r.listener, "[::1]:80");
    }

    #[test]
    fn filters_round_trip_through_the_query_string() {
        let q = EventQuery {
            agent: Some("build-bot".into()),
            status: Some("quarantined".into()),
            correlation_id: None,
            q: Some("schema mismatch & more".into()),
            priority: Some("-5".into()),
        };
        let qs = q.to_query_string();
        assert_eq!(
            qs,
            "agent=build-bot&status=quarantined&q=schema%20mismatch%20%26%20more&priority=-5"
        );
        assert_eq!(EventQuery::parse(&qs), q);
        assert_eq!(Route::parse(&format!("/inbox?{qs}")), Route::Inbox(q));
    }

    #[test]
    fn empty_and_unknown_parameters_are_ignored() {
        let q = EventQuery::parse("agent=&status=pending&bogus=1&q=a+b");
        assert_eq!(q.agent, None, "an empty value does not filter");
        assert_eq!(q.status.as_deref(), Some("pending"));
        assert_eq!(q.q.as_deref(), Some("a b"), "+ is a space");
        assert!(EventQuery::default().to_query_string().is_empty());
        assert_eq!(href("/inbox", &EventQuery::default()), "/inbox");
    }

    #[test]
    fn decoding_is_total() {
        assert_eq!(
            decode("%41%zz%4%+1"),
            "A%zz%4% 1",
            "bad escapes stay as they are (and + is a space)"
        );
        assert_eq!(decode("%C3%A9"), "é");
        assert_eq!(encode("é/ x"), "%C3%A9%2F%20x");
    }

    #[test]
    fn event_pages_carry_filter_cursor_and_limit() {
        let q = EventQuery::default().with_status("quarantined");
        assert_eq!(
            events_api_path(&q, Some("01ab"), 50),
            "/api/v1/ops/events?status=quarantined&after=01ab&limit=50"
        );
        assert_eq!(
            events_api_path(&EventQuery::default(), None, 100),
            "/api/v1/ops/events?limit=100"
        );
    }

    #[test]
    fn sections_mark_the_navigation() {
        assert_eq!(Route::parse("/events/x").section(), "/inbox");
        assert_eq!(Route::parse("/quarantine?agent=a").section(), "/quarantine");
    }
}
