//! Sign-in of a native app (the desktop console) to this server: the
//! authorization code grant (RFC 6749 §4.1) with PKCE, S256 only (RFC 7636), for
//! apps that receive the code on a loopback redirect (RFC 8252 §7.3). No client
//! is registered: any app on the operator's own machine may ask, and the
//! signed-in operator decides on the consent page, which names the app and the
//! loopback address it listens on.
//!
//! 1. The app opens `GET /oauth/authorize?response_type=code&client_id&
//!    redirect_uri&code_challenge&code_challenge_method=S256&state[&scope]` in the
//!    system browser. Checked here: a bad `client_id` or `redirect_uri` gets a
//!    page saying so and never a redirect (§4.1.2.1); other faults go back to the
//!    app as `error=…`. A good request gets the console, which shows its login
//!    page first when the browser has no session, then the consent page.
//! 2. The operator allows or denies: `POST /api/v1/ops/authorizations` with the
//!    request's query string, checked again; allowing grants the asked scopes,
//!    each one the operator holds, and makes a one-minute code bound to the
//!    client, the redirect URI and the challenge. The answer is where the browser
//!    goes next: the redirect URI with `code` and `state`, or `error`.
//! 3. The app redeems the code at the token endpoint with its verifier
//!    (`token.rs`): a new credential of the tenant ("sign-in: <client>", listed
//!    and revocable) with a rotating refresh token and an access token.

use super::{check_client_id, unique_pairs};
use crate::app::signin::{self as app, AUTHORIZATION_CODE_TTL_MS, NewAuthorizationCode};
use crate::error::{ApiError, ApiResult};
use crate::http::AppState;
use crate::http::auth::{
    Principal, SCOPE_ADMIN, SCOPE_METRICS_READ, SCOPE_OPS_READ, SCOPE_OPS_WRITE, generate_token,
    hash_token,
};
use crate::http::extract::Json;
use crate::oauth::{self, pkce};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use std::collections::BTreeMap;
use switchboard_proto::{
    AuthorizeDecision, AuthorizeRedirect, ErrorCode, Problem, SIGN_IN_DEFAULT_SCOPE,
};
use tower::ServiceExt as _;
use url::Url;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// The scopes a sign-in may ask for: an operator's, never an agent's.
const SIGN_IN_SCOPES: [&str; 4] = [
    SCOPE_OPS_READ,
    SCOPE_OPS_WRITE,
    SCOPE_METRICS_READ,
    SCOPE_ADMIN,
];
/// The longest redirect URI (and `state`) accepted.
const MAX_REDIRECT_URI: usize = 512;
const MAX_STATE: usize = 512;

pub(in crate::http) fn api_routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(decide))
}

/// A checked authorization request.
#[derive(Debug)]
struct AuthorizeRequest {
    client_id: String,
    redirect_uri: Url,
    state: Option<String>,
    code_challenge: String,
    scopes: Vec<String>,
}

/// Why a request is refused.
#[derive(Debug)]
enum Refusal {
    /// The client or its redirect URI cannot be trusted with an answer: say so
    /// on a page, never redirect (RFC 6749 §4.1.2.1).
    Shown(String),
    /// The app is told through its redirect URI.
    Redirect(Box<Redirected>),
}

/// An error the app is told through its redirect URI (RFC 6749 §4.1.2.1).
#[derive(Debug)]
struct Redirected {
    to: Url,
    state: Option<String>,
    error: &'static str,
    description: String,
}

impl Redirected {
    /// The redirect URI with the error and `state`.
    fn url(self) -> Url {
        back(
            self.to,
            &[
                ("error", self.error),
                ("error_description", &self.description),
            ],
            self.state.as_deref(),
        )
    }
}

impl Refusal {
    /// An API caller's view: the redirect carrying the error, or a 400.
    fn into_api(self) -> ApiResult<axum::Json<AuthorizeRedirect>> {
        match self {
            Self::Shown(message) => Err(ApiError::validation(message).with("field", "request")),
            Self::Redirect(r) => Ok(redirect_answer(r.url())),
        }
    }
}

/// RFC 8252 §7.3: `http://127.0.0.1:PORT/…` or `http://[::1]:PORT/…`, with the port
/// the app listens on. (`localhost` is refused, §8.3: a name can resolve
/// elsewhere.)
fn loopback(uri: &str) -> Result<Url, String> {
    const HOW: &str = "redirect_uri must be a loopback address with a port, \
                       http://127.0.0.1:PORT/path or http://[::1]:PORT/path (RFC 8252 §7.3)";
    if uri.len() > MAX_REDIRECT_URI {
        return Err(format!(
            "redirect_uri is longer than {MAX_REDIRECT_URI} bytes"
        ));
    }
    let url = Url::parse(uri).map_err(|_| HOW.to_owned())?;
    let loopback_ip = match url.host() {
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        _ => false,
    };
    if url.scheme() != "http"
        || !loopback_ip
        || url.port().is_none()
        || !url.username().is_empty()
        || url.password().is_some()
        || url.fragment().is_some()
    {
        return Err(HOW.to_owned());
    }
    Ok(url)
}

/// Checks an authorization request's parameters.
fn parse(params: &BTreeMap<String, String>) -> Result<AuthorizeRequest, Refusal> {
    let client_id = params
        .get("client_id")
        .ok_or_else(|| Refusal::Shown("the parameter \"client_id\" is missing".to_owned()))?;
    check_client_id(client_id).map_err(|e| Refusal::Shown(e.description))?;
    let redirect_uri = params
        .get("redirect_uri")
        .ok_or_else(|| Refusal::Shown("the parameter \"redirect_uri\" is missing".to_owned()))?;
    let redirect_uri = loopback(redirect_uri).map_err(Refusal::Shown)?;
    // From here on, faults go back to the app.
    let state = params.get("state").cloned();
    let refuse = |error: &'static str, description: &str| {
        Refusal::Redirect(Box::new(Redirected {
            to: redirect_uri.clone(),
            state: state.clone().filter(|s| s.len() <= MAX_STATE),
            error,
            description: description.to_owned(),
        }))
    };
    if state.as_ref().is_some_and(|s| s.len() > MAX_STATE) {
        return Err(refuse("invalid_request", "state is longer than 512 bytes"));
    }
    match params.get("response_type").map(String::as_str) {
        Some("code") => {}
        Some(_) => {
            return Err(refuse(
                "unsupported_response_type",
                "this server answers response_type=code only",
            ));
        }
        None => return Err(refuse("invalid_request", "response_type=code is missing")),
    }
    let code_challenge = params.get("code_challenge").ok_or_else(|| {
        refuse(
            "invalid_request",
            "code_challenge is missing: this server requires PKCE (RFC 7636) with S256",
        )
    })?;
    if params.get("code_challenge_method").map(String::as_str) != Some(pkce::METHOD_S256) {
        return Err(refuse(
            "invalid_request",
            "code_challenge_method must be S256 (plain is not accepted)",
        ));
    }
    if !pkce::valid_s256_challenge(code_challenge) {
        return Err(refuse(
            "invalid_request",
            "code_challenge must be the 43-character base64url SHA-256 of the code verifier",
        ));
    }
    let asked = params
        .get("scope")
        .map(String::as_str)
        .unwrap_or(SIGN_IN_DEFAULT_SCOPE);
    let mut scopes: Vec<String> = Vec::new();
    for scope in asked.split_whitespace() {
        if !SIGN_IN_SCOPES.contains(&scope) {
            return Err(refuse(
                "invalid_scope",
                &format!("a sign-in may ask for {SIGN_IN_SCOPES:?} only"),
            ));
        }
        if !scopes.iter().any(|s| s == scope) {
            scopes.push(scope.to_owned());
        }
    }
    if scopes.is_empty() {
        return Err(refuse("invalid_scope", "scope names no scope"));
    }
    Ok(AuthorizeRequest {
        client_id: client_id.clone(),
        redirect_uri,
        state,
        code_challenge: code_challenge.clone(),
        scopes,
    })
}

/// `to` with `pairs` and `state` added to its query (RFC 6749 §4.1.2).
fn back(mut to: Url, pairs: &[(&str, &str)], state: Option<&str>) -> Url {
    {
        let mut query = to.query_pairs_mut();
        for (name, value) in pairs {
            query.append_pair(name, value);
        }
        if let Some(state) = state {
            query.append_pair("state", state);
        }
    }
    to
}

fn redirect_answer(to: Url) -> axum::Json<AuthorizeRedirect> {
    axum::Json(AuthorizeRedirect {
        redirect_to: to.to_string(),
    })
}

/// `GET /oauth/authorize`: checks the request, then serves the console, whose
/// consent page asks the signed-in operator.
pub(super) async fn authorize(State(state): State<AppState>, request: Request) -> Response {
    let query = request.uri().query().unwrap_or("").to_owned();
    let checked = unique_pairs(query.as_bytes())
        .map_err(Refusal::Shown)
        .and_then(|params| parse(&params));
    let mut response = match checked {
        Err(Refusal::Shown(message)) => refused_page(&message),
        Err(Refusal::Redirect(redirected)) => {
            let to = redirected.url();
            let mut r = StatusCode::SEE_OTHER.into_response();
            if let Ok(location) = HeaderValue::from_str(to.as_str()) {
                r.headers_mut().insert(header::LOCATION, location);
            }
            r
        }
        Ok(_) => {
            let console = super::super::console::router(&state.config).with_state(state.clone());
            match console.oneshot(request).await {
                Ok(r) => r,
                Err(never) => match never {},
            }
        }
    };
    // The consent page is never framed (clickjacking), cached or leaked.
    let h = response.headers_mut();
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static("frame-ancestors 'none'"),
    );
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

fn refused_page(message: &str) -> Response {
    let escaped: String = message
        .chars()
        .map(|c| match c {
            '&' => "&amp;".to_owned(),
            '<' => "&lt;".to_owned(),
            '>' => "&gt;".to_owned(),
            '"' => "&quot;".to_owned(),
            '\'' => "&#39;".to_owned(),
            c => c.to_string(),
        })
        .collect();
    let body = format!(
        "<!doctype html><meta charset=utf-8><title>Sign-in refused</title>\
         <h1>This sign-in cannot go on</h1><p id=refused>{escaped}</p>\
         <p>Nothing was granted. Start the sign-in again from the app.</p>"
    );
    (StatusCode::BAD_REQUEST, Html(body)).into_response()
}

/// Allow or deny a sign-in (the console's consent page; `ops:write`). Allowing
/// grants the asked scopes, each one the caller holds, to the app as a one-minute
/// code on its loopback redirect; the answer says where the browser goes next.
#[utoipa::path(post, path = "/api/v1/ops/authorizations", tag = "console",
    request_body = AuthorizeDecision,
    responses((status = 200, body = AuthorizeRedirect), (status = 400, body = Problem),
        (status = 403, body = Problem)))]
async fn decide(
    State(state): State<AppState>,
    principal: Principal,
    Json(decision): Json<AuthorizeDecision>,
) -> ApiResult<axum::Json<AuthorizeRedirect>> {
    // Signing an app in makes a credential: a change, as approving a device is.
    principal.require(SCOPE_OPS_WRITE)?;
    if principal.agent_id.is_some() {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            "an agent cannot sign an app in; sign in to the console as an operator",
        ));
    }
    let query = decision.request.trim_start_matches('?');
    let params = unique_pairs(query.as_bytes())
        .map_err(|e| ApiError::validation(e).with("field", "request"))?;
    let request = match parse(&params) {
        Ok(request) => request,
        Err(refusal) => return refusal.into_api(),
    };
    let state_param = request.state.as_deref();
    if !decision.allow {
        tracing::info!(client = %request.client_id, "sign-in denied");
        return Ok(redirect_answer(back(
            request.redirect_uri,
            &[
                ("error", "access_denied"),
                ("error_description", "the operator denied the sign-in"),
            ],
            state_param,
        )));
    }
    if let Some(missing) = request.scopes.iter().find(|s| !principal.has(s)) {
        return Err(ApiError::new(
            ErrorCode::Forbidden,
            format!(
                "the app asks for {missing:?}, which this session does not hold; deny, or \
                 log in to the console with a token that holds it"
            ),
        ));
    }
    let code = generate_token(oauth::AUTHORIZATION_CODE_PREFIX);
    let now = state.now();
    let granted_by = crate::access::token_id(&principal.token_hash);
    let note = principal
        .note(format!("app:{}", request.client_id))
        .detail(request.scopes.join(" "));
    app::allow(
        &state,
        &NewAuthorizationCode {
            code_hash: &hash_token(&code),
            tenant: principal.tenant_id,
            client_id: &request.client_id,
            redirect_uri: request.redirect_uri.as_str(),
            code_challenge: &request.code_challenge,
            scopes: &request.scopes,
            granted_by: &granted_by,
            parent_hash: &principal.token_hash,
            created_at: now,
            expires_at: now + AUTHORIZATION_CODE_TTL_MS,
        },
        &note,
    )
    .await?;
    tracing::info!(client = %request.client_id, scopes = %request.scopes.join(" "), "sign-in allowed");
    Ok(redirect_answer(back(
        request.redirect_uri,
        &[("code", &code)],
        state_param,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    const CHALLENGE: &str = "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM";

    fn good() -> Vec<(&'static str, &'static str)> {
        vec![
            ("response_type", "code"),
            ("client_id", "switchboard-desktop"),
            ("redirect_uri", "http://127.0.0.1:49152/callback"),
            ("code_challenge", CHALLENGE),
            ("code_challenge_method", "S256"),
            ("state", "xyz"),
        ]
    }

    fn with(change: (&'static str, Option<&'static str>)) -> BTreeMap<String, String> {
        let mut p = params(&good());
        match change.1 {
            Some(v) => p.insert(change.0.to_owned(), v.to_owned()),
            None => p.remove(change.0),
        };
        p
    }

    #[test]
    fn a_good_request_gets_the_default_scopes() {
        let r = parse(&params(&good())).unwrap();
        assert_eq!(r.scopes, ["ops:read", "ops:write"]);
        assert_eq!(r.redirect_uri.as_str(), "http://127.0.0.1:49152/callback");
        let r = parse(&with(("redirect_uri", Some("http://[::1]:8000/")))).unwrap();
        assert_eq!(r.redirect_uri.port(), Some(8000));
    }

    #[test]
    fn only_loopback_redirects_with_a_port_are_trusted() {
        for bad in [
            "https://127.0.0.1:8000/cb",
            "http://localhost:8000/cb",
            "http://10.0.0.5:8000/cb",
            "http://127.0.0.1/cb",
            "http://user@127.0.0.1:8000/cb",
            "http://127.0.0.1:8000/cb#frag",
            "http://evil.example/cb",
            "not a url",
        ] {
            match parse(&with(("redirect_uri", Some(bad)))) {
                Err(Refusal::Shown(_)) => {}
                other => panic!("{bad}: {other:?}"),
            }
        }
        assert!(matches!(
            parse(&with(("client_id", None))),
            Err(Refusal::Shown(_))
        ));
    }

    #[test]
    fn other_faults_go_back_to_the_app() {
        for (change, error) in [
            (
                ("response_type", Some("token")),
                "unsupported_response_type",
            ),
            (("response_type", None), "invalid_request"),
            (("code_challenge", None), "invalid_request"),
            (("code_challenge_method", Some("plain")), "invalid_request"),
            (("code_challenge_method", None), "invalid_request"),
            (("code_challenge", Some("short")), "invalid_request"),
            (("scope", Some("agent:x")), "invalid_scope"),
            (("scope", Some("  ")), "invalid_scope"),
        ] {
            match parse(&with(change)) {
                Err(Refusal::Redirect(r)) => {
                    assert_eq!(r.error, error, "{change:?}");
                    assert_eq!(r.state.as_deref(), Some("xyz"));
                }
                other => panic!("{change:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn the_answer_keeps_the_redirect_query_and_adds_state() {
        let to = Url::parse("http://127.0.0.1:5000/cb?app=1").unwrap();
        let url = back(to, &[("code", "sb_ac_x")], Some("a b"));
        assert_eq!(
            url.as_str(),
            "http://127.0.0.1:5000/cb?app=1&code=sb_ac_x&state=a+b"
        );
    }

    #[test]
    fn repeated_parameters_are_refused() {
        assert!(unique_pairs(b"a=1&a=2").is_err());
        assert_eq!(unique_pairs(b"a=1&b=").unwrap().len(), 1);
    }
}
