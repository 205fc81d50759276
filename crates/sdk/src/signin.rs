//! Sign-in of a native app to a server as the operator at its browser: the
//! authorization code grant (RFC 6749 §4.1) with PKCE, S256 (RFC 7636), through
//! the system browser and a loopback redirect (RFC 8252). The desktop console
//! signs in to a remote team server this way.
//!
//! 1. [`SignIn::start`] binds `127.0.0.1:0`, makes a code verifier (32 random
//!    bytes, base64url) and a `state`, and builds the authorization URL; the app
//!    opens it in the system browser (never in its own webview: RFC 8252 §8.12).
//! 2. The operator logs in to the server's console there (or already is) and
//!    allows the app on its consent page; the browser is sent to the loopback
//!    address with a code.
//! 3. [`SignIn::finish`] takes that one request (its `state` must match: other
//!    requests to the port are turned away and waited past), answers the browser
//!    with a page saying it may close, and redeems the code with the verifier for
//!    a refresh token and an access token ([`SignedIn`]).
//!
//! The refresh token feeds [`ClientBuilder::build_with_login`](crate::ClientBuilder::build_with_login),
//! as a device login's does. The verifier, the code and the tokens never reach
//! `Debug` output or logs.

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use http::{Response, StatusCode};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use reqwest::Url;
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::sync::oneshot;

use crate::login::{Answer, Tokens, oauth_post};
use crate::{Error, Token};

/// The path of the loopback redirect.
const CALLBACK_PATH: &str = "/callback";

/// The S256 challenge of `verifier`: `BASE64URL(SHA256(verifier))`, unpadded
/// (RFC 7636 §4.2).
pub fn code_challenge(verifier: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes()))
}

fn random_b64(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    rand::fill(&mut buf[..]);
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buf)
}

/// A sign-in waiting for the browser: show or open [`SignIn::authorize_url`],
/// then [`SignIn::finish`].
pub struct SignIn {
    token_url: Url,
    client_id: String,
    verifier: String,
    state: String,
    redirect_uri: String,
    authorize_url: Url,
    listener: TcpListener,
}

/// What a finished sign-in holds.
#[non_exhaustive]
pub struct SignedIn {
    /// Feeds [`ClientBuilder::build_with_login`](crate::ClientBuilder::build_with_login).
    pub refresh_token: Token,
    pub access_token: Token,
    pub expires_in: u64,
    /// Space-separated, as granted.
    pub scope: String,
}

impl std::fmt::Debug for SignedIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedIn")
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for SignIn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignIn")
            .field("client_id", &self.client_id)
            .field("redirect_uri", &self.redirect_uri)
            .finish_non_exhaustive()
    }
}

/// What the browser brought back.
enum Callback {
    Code(String),
    Refused { error: String, description: String },
}

impl SignIn {
    /// Starts signing in to `server` as `client_id` (a name people recognise on
    /// the consent page), asking for `scope` (space-separated; the server's
    /// default, `ops:read ops:write`, when `None`).
    pub async fn start(server: &str, client_id: &str, scope: Option<&str>) -> Result<Self, Error> {
        let root = crate::call::parse_base_url(server)?;
        let join = |path: &str| {
            root.join(path)
                .map_err(|e| Error::InvalidUrl(e.to_string()))
        };
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .map_err(|e| Error::Login(format!("cannot listen on the loopback interface: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| Error::Login(format!("the loopback listener has no port: {e}")))?
            .port();
        let redirect_uri = format!("http://127.0.0.1:{port}{CALLBACK_PATH}");
        let verifier = random_b64(32);
        let state = random_b64(16);
        let mut authorize_url = join("oauth/authorize")?;
        {
            let mut q = authorize_url.query_pairs_mut();
            q.append_pair("response_type", "code")
                .append_pair("client_id", client_id)
                .append_pair("redirect_uri", &redirect_uri)
                .append_pair("code_challenge", &code_challenge(&verifier))
                .append_pair("code_challenge_method", "S256")
                .append_pair("state", &state);
            if let Some(scope) = scope {
                q.append_pair("scope", scope);
            }
        }
        Ok(Self {
            token_url: join("oauth/token")?,
            client_id: client_id.to_owned(),
            verifier,
            state,
            redirect_uri,
            authorize_url,
            listener,
        })
    }

    /// The page to open in the system browser.
    pub fn authorize_url(&self) -> &Url {
        &self.authorize_url
    }

    /// The loopback redirect URI the browser comes back to.
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits for the browser to come back (forever: wrap it in a timeout), then
    /// redeems the code. `Error::Login` when the operator denied, the server
    /// refused, or the code did not redeem.
    pub async fn finish(self, http: &reqwest::Client) -> Result<SignedIn, Error> {
        let callback = self.wait_for_browser().await?;
        let code = match callback {
            Callback::Code(code) => code,
            Callback::Refused { error, description } => {
                return Err(Error::Login(match error.as_str() {
                    "access_denied" => "the operator denied the sign-in".to_owned(),
                    _ => format!("the server refused the sign-in ({error}: {description})"),
                }));
            }
        };
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code.as_str()),
            ("redirect_uri", self.redirect_uri.as_str()),
            ("client_id", self.client_id.as_str()),
            ("code_verifier", self.verifier.as_str()),
        ];
        match oauth_post::<Tokens>(http, &self.token_url, &form, "the token endpoint's answer")
            .await?
        {
            Answer::Granted(tokens) => Ok(SignedIn {
                refresh_token: tokens.refresh_token.map(Token::from).ok_or_else(|| {
                    Error::Login("the server gave no refresh token for the sign-in".into())
                })?,
                access_token: Token::from(tokens.access_token),
                expires_in: tokens.expires_in,
                scope: tokens.scope,
            }),
            Answer::Refused(e) => Err(Error::Login(format!(
                "the server did not redeem the sign-in's code ({}: {})",
                e.error, e.error_description
            ))),
        }
    }

    /// Serves the loopback listener until a request with our `state` arrives.
    async fn wait_for_browser(&self) -> Result<Callback, Error> {
        let (tx, mut rx) = oneshot::channel::<Callback>();
        let tx = Arc::new(Mutex::new(Some(tx)));
        let mut connections = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                done = &mut rx => {
                    // Let the page that said "done" reach the browser.
                    let drain = async { while connections.join_next().await.is_some() {} };
                    let _ = tokio::time::timeout(std::time::Duration::from_secs(2), drain).await;
                    return done.map_err(|_| Error::Login("the sign-in listener stopped".into()));
                }
                accepted = self.listener.accept() => {
                    let Ok((stream, _)) = accepted else { continue };
                    let tx = tx.clone();
                    let state = self.state.clone();
                    connections.spawn(async move {
                        let service = hyper::service::service_fn(move |req| {
                            let answer = callback(&req, &state, &tx);
                            async move { Ok::<_, Infallible>(answer) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .keep_alive(false)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        }
    }
}

/// Answers one request to the loopback listener; hands a matching callback on.
fn callback(
    req: &hyper::Request<Incoming>,
    state: &str,
    tx: &Mutex<Option<oneshot::Sender<Callback>>>,
) -> Response<String> {
    let page = |status: StatusCode, text: &str| {
        Response::builder()
            .status(status)
            .header("content-type", "text/html; charset=utf-8")
            .header("cache-control", "no-store")
            .header("referrer-policy", "no-referrer")
            .body(format!(
                "<!doctype html><meta charset=utf-8><title>Switchboard sign-in</title>\
                 <h1>Switchboard sign-in</h1><p id=signin-result>{text}</p>"
            ))
            .unwrap_or_default()
    };
    if req.uri().path() != CALLBACK_PATH {
        return page(StatusCode::NOT_FOUND, "Nothing here.");
    }
    let params: Vec<(String, String)> = Url::parse(&format!("http://127.0.0.1{}", req.uri()))
        .map(|u| u.query_pairs().into_owned().collect())
        .unwrap_or_default();
    let get = |name: &str| {
        params
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
    };
    // Only the browser this sign-in sent away comes back with its state.
    if get("state").as_deref() != Some(state) {
        return page(
            StatusCode::BAD_REQUEST,
            "This answer belongs to another sign-in; start it again from the app.",
        );
    }
    let (callback, text) = match (get("code"), get("error")) {
        (Some(code), None) => (
            Callback::Code(code),
            "Signed in. You can close this tab and return to the app.",
        ),
        (_, Some(error)) => (
            Callback::Refused {
                description: get("error_description").unwrap_or_default(),
                error,
            },
            "The sign-in did not go through; the app says why.",
        ),
        (None, None) => {
            return page(
                StatusCode::BAD_REQUEST,
                "The answer has neither a code nor an error.",
            );
        }
    };
    match tx.lock().unwrap_or_else(|e| e.into_inner()).take() {
        Some(sender) => {
            let _ = sender.send(callback);
            page(StatusCode::OK, text)
        }
        None => page(StatusCode::CONFLICT, "This sign-in has already finished."),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636_appendix_b() {
        // The shared vector (`shared/vectors/oauth_pkce_device_flow.json`).
        assert_eq!(
            code_challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
    }

    #[test]
    fn a_verifier_is_43_unreserved_characters() {
        let v = random_b64(32);
        assert_eq!(v.len(), 43);
        assert!(
            v.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
        );
        assert_ne!(v, random_b64(32));
    }

    #[tokio::test]
    async fn the_authorization_url_carries_pkce_and_a_loopback_redirect() {
        let s = SignIn::start("http://10.0.0.5:7700/", "switchboard-desktop", None)
            .await
            .unwrap();
        let url = s.authorize_url();
        assert_eq!(url.path(), "/oauth/authorize");
        let q: std::collections::HashMap<_, _> = url.query_pairs().into_owned().collect();
        assert_eq!(q["response_type"], "code");
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["code_challenge"], code_challenge(&s.verifier));
        assert!(!url.as_str().contains(&s.verifier), "never the verifier");
        assert!(q["redirect_uri"].starts_with("http://127.0.0.1:"));
        assert_eq!(q["state"], s.state);
        assert!(!q.contains_key("scope"));
        assert!(!format!("{s:?}").contains(&s.verifier));
    }
}
