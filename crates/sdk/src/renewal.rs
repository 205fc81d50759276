//! Credentials that renew: a [`Client`](crate::Client) whose bearer is a
//! short-lived access token gets each one from a [`TokenSource`], renews it ahead
//! of its expiry ([`renew_at`]) and once when the server answers 401, and shares
//! it between every clone of the client (the outbox, the consumer and the caller
//! keep working across renewals: each request takes the current token).
//!
//! Two sources are built in: a device login's refresh token
//! ([`login`](crate::login): the refresh-token grant, the rotated refresh token
//! saved in its store) and the local token broker ([`broker`](crate::broker): a
//! host process exchanges its own login for a narrower token on request). Any other
//! implementation of [`TokenSource`] plugs in through
//! [`ClientBuilder::build_with_source`](crate::ClientBuilder::build_with_source).

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use reqwest::header::HeaderValue;

use crate::{Error, Token};

/// How long before its expiry an access token is renewed (at most half its life).
pub const RENEW_AHEAD: Duration = Duration::from_secs(300);

/// When an access token that lives `expires_in` from `issued` is renewed:
/// [`RENEW_AHEAD`] before it expires, or half way for a short-lived one.
pub fn renew_at(issued: Instant, expires_in: Duration) -> Instant {
    issued + expires_in - RENEW_AHEAD.min(expires_in / 2)
}

/// A new access token and how long it lives from when it was asked for.
#[derive(Clone)]
#[non_exhaustive]
pub struct Fresh {
    pub token: Token,
    pub expires_in: Duration,
}

impl Fresh {
    pub fn new(token: Token, expires_in: Duration) -> Self {
        Self { token, expires_in }
    }
}

impl std::fmt::Debug for Fresh {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fresh")
            .field("token", &"<redacted>")
            .field("expires_in", &self.expires_in)
            .finish()
    }
}

/// Where a renewing client's access tokens come from. One fetch at a time per
/// client: the session serializes them, and a fetch that another task already made
/// since a token was refused or came due is not made again.
#[async_trait::async_trait]
pub trait TokenSource: Send + Sync + 'static {
    /// A new access token. `http` is the client's connection pool (its TLS roots
    /// and timeouts), for sources that ask the server. An error ends the request
    /// that needed the token; it should say what to do (log in again, start the
    /// broker) and never carry a secret.
    async fn fetch(&self, http: &reqwest::Client) -> Result<Fresh, Error>;

    /// What the log calls this source (`"refresh token"`, `"broker"`).
    fn describe(&self) -> &'static str;
}

/// The current access token of a renewing client, and the renewal of it.
pub(crate) struct Session {
    source: Arc<dyn TokenSource>,
    current: Mutex<Option<Current>>,
    /// One fetch at a time in this process.
    renewing: tokio::sync::Mutex<()>,
}

#[derive(Clone)]
struct Current {
    header: HeaderValue,
    renew_at: Instant,
    generation: u64,
}

impl Session {
    /// A session that fetches its first token when the first request needs it.
    pub(crate) fn new(source: Arc<dyn TokenSource>) -> Self {
        Self {
            source,
            current: Mutex::new(None),
            renewing: tokio::sync::Mutex::new(()),
        }
    }

    /// A session holding `first` already (issued at `issued`), e.g. the token that
    /// told where the server is.
    pub(crate) fn seeded(
        source: Arc<dyn TokenSource>,
        first: &Fresh,
        issued: Instant,
    ) -> Result<Self, Error> {
        let session = Self::new(source);
        let header = crate::call::bearer(&first.token)?;
        *session.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(Current {
            header,
            renew_at: renew_at(issued, first.expires_in),
            generation: 1,
        });
        Ok(session)
    }

    fn current(&self) -> Option<Current> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The last access token's header, fresh or not (for requests built by hand).
    pub(crate) fn last_header(&self) -> Option<HeaderValue> {
        self.current().map(|c| c.header)
    }

    /// An `Authorization` value that is not due for renewal, and its generation.
    pub(crate) async fn authorization(
        &self,
        http: &reqwest::Client,
    ) -> Result<(HeaderValue, u64), Error> {
        match self.current() {
            Some(c) if Instant::now() < c.renew_at => Ok((c.header, c.generation)),
            stale => self.renew(http, stale.map(|c| c.generation)).await,
        }
    }

    /// Renews the access token now, whatever its age (a key rotation: the new token
    /// is bound to the login's newest key).
    pub(crate) async fn renew_now(
        &self,
        http: &reqwest::Client,
    ) -> Result<(HeaderValue, u64), Error> {
        let stale = self.current().map(|c| c.generation);
        self.renew(http, stale).await
    }

    /// Renews the access token unless another task did since `stale` (the
    /// generation that was refused or due).
    pub(crate) async fn renew(
        &self,
        http: &reqwest::Client,
        stale: Option<u64>,
    ) -> Result<(HeaderValue, u64), Error> {
        let _one = self.renewing.lock().await;
        if let Some(c) = self.current()
            && Some(c.generation) != stale
            && Instant::now() < c.renew_at
        {
            return Ok((c.header, c.generation));
        }
        let issued = Instant::now();
        let fresh = self.source.fetch(http).await?;
        let header = crate::call::bearer(&fresh.token)?;
        let generation = stale.map_or(1, |g| g + 1);
        *self.current.lock().unwrap_or_else(|e| e.into_inner()) = Some(Current {
            header: header.clone(),
            renew_at: renew_at(issued, fresh.expires_in),
            generation,
        });
        tracing::debug!(
            source = self.source.describe(),
            expires_in = fresh.expires_in.as_secs(),
            "access token renewed"
        );
        Ok((header, generation))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[test]
    fn an_access_token_is_renewed_five_minutes_ahead_or_half_way() {
        let t = Instant::now();
        assert_eq!(
            renew_at(t, Duration::from_secs(900)),
            t + Duration::from_secs(600)
        );
        assert_eq!(
            renew_at(t, Duration::from_secs(120)),
            t + Duration::from_secs(60)
        );
    }

    struct Counting(AtomicU32, Duration);

    #[async_trait::async_trait]
    impl TokenSource for Counting {
        async fn fetch(&self, _: &reqwest::Client) -> Result<Fresh, Error> {
            let n = self.0.fetch_add(1, Ordering::SeqCst) + 1;
            Ok(Fresh::new(Token::from(format!("t{n}")), self.1))
        }

        fn describe(&self) -> &'static str {
            "test"
        }
    }

    #[tokio::test]
    async fn a_refused_token_is_renewed_once_however_many_tasks_saw_it_refused() {
        let source = Arc::new(Counting(AtomicU32::new(0), Duration::from_secs(900)));
        let session = Arc::new(Session::new(source.clone()));
        let http = reqwest::Client::new();
        let (first, generation) = session.authorization(&http).await.unwrap();
        assert_eq!(first, "Bearer t1");
        let renewals: Vec<_> = (0..4)
            .map(|_| {
                let (session, http) = (session.clone(), http.clone());
                tokio::spawn(async move { session.renew(&http, Some(generation)).await })
            })
            .collect();
        for renewal in renewals {
            assert_eq!(renewal.await.unwrap().unwrap().0, "Bearer t2");
        }
        assert_eq!(source.0.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_seeded_session_uses_its_first_token_until_it_is_due() {
        let source = Arc::new(Counting(AtomicU32::new(0), Duration::from_secs(2)));
        let first = Fresh::new(Token::from("seed"), Duration::from_secs(2));
        let session = Session::seeded(source.clone(), &first, Instant::now()).unwrap();
        let http = reqwest::Client::new();
        assert_eq!(session.authorization(&http).await.unwrap().0, "Bearer seed");
        // Due half way through a short life.
        tokio::time::sleep(Duration::from_millis(1100)).await;
        assert_eq!(session.authorization(&http).await.unwrap().0, "Bearer t1");
    }
}
