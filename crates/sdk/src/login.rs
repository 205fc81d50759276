//! Logins that refresh (issue 15): device login (RFC 8628) gives a refresh token
//! (`sb_rt_…`); a [`Client`](crate::Client) built with one
//! ([`ClientBuilder::build_with_login`](crate::ClientBuilder::build_with_login))
//! gets short-lived access tokens from the token endpoint, renews them about
//! 5 minutes before they expire and again when the server answers 401, and saves
//! each rotated refresh token in its [`RefreshTokenStore`].
//!
//! Refresh tokens are used once: one used twice (two processes of one login each
//! holding a copy) ends the whole login. So every refresh takes the store's lock,
//! reads the newest token from the store, and saves its successor before letting
//! go: processes sharing a login (the CLI's `agent run` and `agent send`) take
//! turns instead of racing.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::Url;
use serde::Deserialize;

use crate::{Error, Token};

/// What refresh tokens start with.
pub const REFRESH_PREFIX: &str = "sb_rt_";
const GRANT_DEVICE_CODE: &str = "urn:ietf:params:oauth:grant-type:device_code";
/// Why a device login gave up.
const NOT_IN_TIME: &str = "nobody approved the login in time; start it again";

pub use crate::renewal::{RENEW_AHEAD, renew_at};

/// Whether `token` is a refresh token (a device login) rather than a static token.
pub fn is_refresh_token(token: &Token) -> bool {
    token.expose().starts_with(REFRESH_PREFIX)
}

/// Where a login's refresh token lives between refreshes.
pub trait RefreshTokenStore: Send + Sync + 'static {
    /// Holds every other user of this login (other processes too) off until the
    /// returned guard is dropped.
    fn lock(&self) -> Result<Box<dyn Send>, Error>;
    /// The newest refresh token.
    fn load(&self) -> Result<Token, Error>;
    /// Keeps `token`, the successor of the one loaded.
    fn save(&self, token: &Token) -> Result<(), Error>;
}

/// A refresh token held in memory only (one process; tests).
pub struct MemoryRefreshStore(Mutex<Token>);

impl MemoryRefreshStore {
    pub fn new(token: Token) -> Self {
        Self(Mutex::new(token))
    }
}

impl RefreshTokenStore for MemoryRefreshStore {
    fn lock(&self) -> Result<Box<dyn Send>, Error> {
        // The session's own mutex already serializes refreshes in this process.
        Ok(Box::new(()))
    }

    fn load(&self) -> Result<Token, Error> {
        Ok(self.0.lock().unwrap_or_else(|e| e.into_inner()).clone())
    }

    fn save(&self, token: &Token) -> Result<(), Error> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = token.clone();
        Ok(())
    }
}

/// The token endpoint's answer.
#[derive(Deserialize)]
pub(crate) struct Tokens {
    pub(crate) access_token: String,
    pub(crate) expires_in: u64,
    #[serde(default)]
    pub(crate) refresh_token: Option<String>,
    #[serde(default)]
    pub(crate) scope: String,
}

/// An OAuth error answer.
#[derive(Deserialize)]
pub(crate) struct OAuthError {
    pub(crate) error: String,
    #[serde(default)]
    pub(crate) error_description: String,
}

/// `application/x-www-form-urlencoded` of `pairs` (reqwest's `form` feature is
/// not built).
pub(crate) fn form_body(pairs: &[(&str, &str)]) -> String {
    reqwest::Url::parse_with_params("http://form.invalid/", pairs)
        .ok()
        .and_then(|u| u.query().map(str::to_owned))
        .unwrap_or_default()
}

/// A form POST.
pub(crate) fn post_form(
    http: &reqwest::Client,
    url: Url,
    pairs: &[(&str, &str)],
) -> reqwest::RequestBuilder {
    http.post(url)
        .header(
            reqwest::header::CONTENT_TYPE,
            "application/x-www-form-urlencoded",
        )
        .body(form_body(pairs))
}

/// What an OAuth endpoint answered: what was asked for, or its refusal.
pub(crate) enum Answer<T> {
    Granted(T),
    Refused(OAuthError),
}

/// POSTs `form` to `url` (`what` names the answer in errors): the decoded answer or
/// the OAuth error; a transport failure, an undecodable body or a non-OAuth error
/// answer is the `Err`.
pub(crate) async fn oauth_post<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &Url,
    form: &[(&str, &str)],
    what: &str,
) -> Result<Answer<T>, Error> {
    let response = post_form(http, url.clone(), form).send().await?;
    let status = response.status();
    let body = response.bytes().await?;
    if status.is_success() {
        return serde_json::from_slice(&body)
            .map(Answer::Granted)
            .map_err(|e| Error::Decode(format!("{what}: {e}")));
    }
    serde_json::from_slice(&body)
        .map(Answer::Refused)
        .map_err(|_| {
            Error::Login(format!(
                "{url} answered HTTP {status} without an OAuth error (is it a Switchboard server?)"
            ))
        })
}

/// The access tokens of a login, from its refresh token: a
/// [`TokenSource`](crate::renewal::TokenSource) for the renewing client.
pub(crate) struct RefreshLogin {
    token_url: Url,
    store: Arc<dyn RefreshTokenStore>,
}

impl RefreshLogin {
    pub(crate) fn new(root: &Url, store: Arc<dyn RefreshTokenStore>) -> Result<Self, Error> {
        let token_url = root
            .join("oauth/token")
            .map_err(|e| Error::InvalidUrl(e.to_string()))?;
        Ok(Self { token_url, store })
    }
}

#[async_trait::async_trait]
impl crate::renewal::TokenSource for RefreshLogin {
    /// Takes the store's lock, spends the newest refresh token and saves its
    /// successor before letting go.
    async fn fetch(&self, http: &reqwest::Client) -> Result<crate::renewal::Fresh, Error> {
        let store = self.store.clone();
        let guard = tokio::task::spawn_blocking(move || store.lock())
            .await
            .map_err(|e| Error::Login(format!("waiting for the login's lock failed: {e}")))??;
        let refresh = self.store.load()?;
        let answer = oauth_post::<Tokens>(
            http,
            &self.token_url,
            &[
                ("grant_type", "refresh_token"),
                ("refresh_token", refresh.expose()),
            ],
            "the token endpoint's answer",
        )
        .await?;
        let tokens = match answer {
            Answer::Granted(tokens) => tokens,
            Answer::Refused(e) => {
                return Err(Error::Login(format!(
                    "the login ended ({}: {}); log in again with `switchboard agent login`",
                    e.error, e.error_description
                )));
            }
        };
        if let Some(next) = &tokens.refresh_token {
            self.store.save(&Token::from(next.as_str()))?;
        }
        drop(guard);
        Ok(crate::renewal::Fresh::new(
            Token::from(tokens.access_token),
            Duration::from_secs(tokens.expires_in),
        ))
    }

    fn describe(&self) -> &'static str {
        "refresh token"
    }
}

/// A device login in progress (RFC 8628 §3.2): show `user_code` and
/// `verification_uri_complete` to the user, then [`DeviceLogin::wait`].
#[derive(Clone, Deserialize)]
#[non_exhaustive]
pub struct DeviceLogin {
    /// Secret until the login ends: never in `Debug` or logs.
    device_code: String,
    pub user_code: String,
    pub verification_uri: String,
    pub verification_uri_complete: String,
    pub expires_in: u64,
    pub interval: u64,
    #[serde(skip)]
    client_id: String,
    #[serde(skip)]
    token_url: Option<Url>,
    /// The public key (a JWK, JSON) to bind to the login, if any.
    #[serde(skip)]
    signing_key: Option<String>,
}

impl DeviceLogin {
    /// Asks `server` to log this device in as `agent` (in `tenant`, when named; the
    /// server's default tenant otherwise). `client_id` names the program.
    pub async fn start(
        http: &reqwest::Client,
        server: &str,
        client_id: &str,
        agent: &str,
        tenant: Option<&str>,
    ) -> Result<Self, Error> {
        let root = crate::call::parse_base_url(server)?;
        let url = root
            .join("oauth/device_authorization")
            .map_err(|e| Error::InvalidUrl(e.to_string()))?;
        let scope = format!("agent:{agent}");
        let mut form = vec![("client_id", client_id), ("scope", scope.as_str())];
        if let Some(tenant) = tenant {
            form.push(("tenant", tenant));
        }
        let mut login: Self =
            match oauth_post(http, &url, &form, "the device authorization").await? {
                Answer::Granted(login) => login,
                Answer::Refused(e) => {
                    return Err(Error::Login(format!(
                        "{server} refused the device login ({}: {})",
                        e.error, e.error_description
                    )));
                }
            };
        login.client_id = client_id.to_owned();
        login.token_url = Some(
            root.join("oauth/token")
                .map_err(|e| Error::InvalidUrl(e.to_string()))?,
        );
        Ok(login)
    }

    /// Binds `key` to the login when it is approved (the token request presents it
    /// as `signing_key`): every access token of the login is then bound to it
    /// (`cnf.jkt`), and a request with one must be signed by it
    /// ([`ClientBuilder::signing_key`](crate::ClientBuilder::signing_key)).
    pub fn with_signing_key(mut self, key: &crate::signing::PublicKey) -> Self {
        self.signing_key = serde_json::to_string(&key.to_jwk()).ok();
        self
    }

    /// Polls until an operator decided, at the interval the server asks for
    /// (`slow_down` adds 5 s): the login's refresh token once approved.
    pub async fn wait(&self, http: &reqwest::Client) -> Result<Token, Error> {
        let url = self
            .token_url
            .clone()
            .ok_or_else(|| Error::Login("a device login not started with start()".into()))?;
        let mut interval = Duration::from_secs(self.interval.max(1));
        let deadline = Instant::now() + Duration::from_secs(self.expires_in);
        loop {
            let mut form = vec![
                ("grant_type", GRANT_DEVICE_CODE),
                ("device_code", self.device_code.as_str()),
                ("client_id", &self.client_id),
            ];
            if let Some(jwk) = &self.signing_key {
                form.push(("signing_key", jwk));
            }
            let answer =
                oauth_post::<Tokens>(http, &url, &form, "the token endpoint's answer").await;
            match answer {
                Ok(Answer::Granted(tokens)) => {
                    return tokens.refresh_token.map(Token::from).ok_or_else(|| {
                        Error::Login("the server gave no refresh token for the device".into())
                    });
                }
                Ok(Answer::Refused(e)) => match e.error.as_str() {
                    "authorization_pending" => {}
                    "slow_down" => interval += Duration::from_secs(5),
                    "access_denied" => {
                        return Err(Error::Login("an operator denied the login".into()));
                    }
                    "expired_token" => return Err(Error::Login(NOT_IN_TIME.into())),
                    _ => {
                        return Err(Error::Login(format!(
                            "the device login failed ({}: {})",
                            e.error, e.error_description
                        )));
                    }
                },
                // The network comes and goes: keep polling until the code expires.
                Err(e) if Instant::now() < deadline => {
                    tracing::debug!(error = %e, "device login poll failed; polling again");
                }
                Err(e) => return Err(e),
            }
            if Instant::now() >= deadline {
                return Err(Error::Login(NOT_IN_TIME.into()));
            }
            tokio::time::sleep(interval).await;
        }
    }
}

impl std::fmt::Debug for DeviceLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceLogin")
            .field("user_code", &self.user_code)
            .field("verification_uri", &self.verification_uri)
            .field("expires_in", &self.expires_in)
            .finish_non_exhaustive()
    }
}

/// Revokes `token` (a refresh token ends its whole login) at `server` (RFC 7009).
pub async fn revoke(http: &reqwest::Client, server: &str, token: &Token) -> Result<(), Error> {
    let root = crate::call::parse_base_url(server)?;
    let url = root
        .join("oauth/revoke")
        .map_err(|e| Error::InvalidUrl(e.to_string()))?;
    let response = post_form(http, url, &[("token", token.expose())])
        .send()
        .await?;
    if response.status().is_success() {
        Ok(())
    } else {
        Err(Error::Login(format!(
            "{server} did not revoke the login (HTTP {})",
            response.status()
        )))
    }
}
