//! [`Client::exchange_token`]: the token exchange (RFC 8693) of this client's own
//! credential for a narrower, short-lived access token (the local token broker's
//! way of making a sidecar's token, `broker.rs`).

use std::time::Duration;

use reqwest::header::{ACCEPT, AUTHORIZATION, HeaderValue};

use super::Client;
use crate::login::{OAuthError, post_form};
use crate::proto::Problem;
use crate::{Error, Token};

const GRANT_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
const TOKEN_TYPE_ACCESS: &str = "urn:ietf:params:oauth:token-type:access_token";

/// What a token exchange gave. The token is never in `Debug`.
#[derive(Clone)]
#[non_exhaustive]
pub struct Exchanged {
    pub access_token: Token,
    /// Seconds from now.
    pub expires_in: u64,
    /// The scopes it carries, space-separated.
    pub scope: String,
}

impl std::fmt::Debug for Exchanged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Exchanged")
            .field("access_token", &"<redacted>")
            .field("expires_in", &self.expires_in)
            .field("scope", &self.scope)
            .finish()
    }
}

#[derive(serde::Deserialize)]
struct Answer {
    access_token: String,
    expires_in: u64,
    #[serde(default)]
    scope: String,
}

impl Client {
    /// `POST /oauth/token` with the token-exchange grant: this client's credential
    /// (its static token, or a login's current access token) for an access token
    /// with `scope` (space-separated; `None`: every scope of the credential), bound
    /// to `signing_key` (a public Ed25519 JWK) when given, so that every request
    /// with it must be signed by that key. The request is signed with this client's
    /// own key when it holds one (a login bound to a key must sign it).
    ///
    /// A refusal is [`Error::Api`] whose problem `code` is the OAuth error
    /// (`invalid_scope`: more than the credential holds; `invalid_grant`: the
    /// credential is revoked or the login ended). A login's access token that the
    /// server refuses is renewed once first; a login that cannot renew is
    /// [`Error::Login`]. Not retried: the caller decides.
    pub async fn exchange_token(
        &self,
        scope: Option<&str>,
        signing_key: Option<&serde_json::Value>,
    ) -> Result<Exchanged, Error> {
        let Some(session) = &self.inner.session else {
            return self
                .exchange_subject(&self.inner.authorization, scope, signing_key)
                .await;
        };
        let (header, generation) = session.authorization(&self.inner.http).await?;
        match self.exchange_subject(&header, scope, signing_key).await {
            Err(e) if oauth_code(&e) == Some("invalid_grant") => {
                // The login's access token may have ended early (revoked, another
                // clock): renew it once; a login that ended says so there.
                let (header, _) = session.renew(&self.inner.http, Some(generation)).await?;
                self.exchange_subject(&header, scope, signing_key).await
            }
            other => other,
        }
    }

    async fn exchange_subject(
        &self,
        authorization: &HeaderValue,
        scope: Option<&str>,
        signing_key: Option<&serde_json::Value>,
    ) -> Result<Exchanged, Error> {
        let subject = authorization
            .to_str()
            .ok()
            .and_then(|h| h.strip_prefix("Bearer "))
            .ok_or_else(|| Error::InvalidInput("the credential is not a bearer token".into()))?;
        let jwk = signing_key.map(serde_json::Value::to_string);
        let mut form = vec![
            ("grant_type", GRANT_TOKEN_EXCHANGE),
            ("subject_token", subject),
            ("subject_token_type", TOKEN_TYPE_ACCESS),
        ];
        if let Some(scope) = scope {
            form.push(("scope", scope));
        }
        if let Some(jwk) = &jwk {
            form.push(("signing_key", jwk));
        }
        let url = self
            .inner
            .root
            .join("oauth/token")
            .map_err(|e| Error::InvalidUrl(e.to_string()))?;
        let mut request = post_form(&self.inner.http, url.clone(), &form)
            .header(ACCEPT, "application/json")
            .timeout(self.inner.request_timeout)
            .build()?;
        // The form carries the subject; no other credential goes along.
        request.headers_mut().remove(AUTHORIZATION);
        if let Some(held) = self.inner.signer.current() {
            self.inner.signer.sign(&mut request, &held)?;
        }
        let response = self.inner.http.execute(request).await?;
        let status = response.status();
        let body = response.bytes().await?;
        if status.is_success() {
            let answer: Answer = serde_json::from_slice(&body)
                .map_err(|e| Error::Decode(format!("the token exchange's answer: {e}")))?;
            return Ok(Exchanged {
                access_token: Token::from(answer.access_token),
                expires_in: answer.expires_in,
                scope: answer.scope,
            });
        }
        // An OAuth error (RFC 6749 §5.2) becomes a problem whose code is its
        // `error`; anything else is read as any error answer is.
        match serde_json::from_slice::<OAuthError>(&body) {
            Ok(e) => Err(Error::Api {
                status: status.as_u16(),
                problem: Box::new(Problem {
                    type_: "about:blank".to_owned(),
                    title: e.error.clone(),
                    status: status.as_u16(),
                    detail: Some(e.error_description),
                    instance: None,
                    code: Some(e.error),
                    extensions: serde_json::Map::new(),
                }),
                retry_after: None,
            }),
            Err(_) => Err(Error::Api {
                status: status.as_u16(),
                problem: Box::new(crate::error::decode_problem(
                    status,
                    Some("application/json"),
                    Some(&url),
                    &body,
                )),
                retry_after: None,
            }),
        }
    }
}

/// The OAuth error code an exchange was refused with.
pub(crate) fn oauth_code(error: &Error) -> Option<&str> {
    error.problem()?.code.as_deref()
}

impl Exchanged {
    /// How long the token lives from when it was asked for.
    pub fn lifetime(&self) -> Duration {
        Duration::from_secs(self.expires_in)
    }
}
