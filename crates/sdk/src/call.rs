//! [`Call`]: one HTTP exchange as data.
//!
//! A call holds everything needed to send a request again: method, URL (query
//! included), JSON body and idempotency key. Typed methods build one and hand it to
//! `Client::send`; the retry loop resends it, and a durable outbox can store it and
//! resend it after a crash with the same key (invariant I10). Its [`Repeat`] says
//! whether sending it twice can do harm, which decides what the retry loop may
//! retry.

use reqwest::header::HeaderValue;
use reqwest::{Method, Url};
use serde::Serialize;

use crate::Error;
use crate::retry::Repeat;

/// One HTTP exchange as data: everything needed to send it again.
#[derive(Debug, Clone)]
pub(crate) struct Call {
    pub(crate) method: Method,
    pub(crate) url: Url,
    /// A serialized JSON body.
    pub(crate) body: Option<Vec<u8>>,
    /// Sensitive: never logged (invariant I11).
    pub(crate) idempotency_key: Option<HeaderValue>,
    /// Other request headers (`Fencing-Token`, `If-Match`).
    pub(crate) headers: Vec<(&'static str, HeaderValue)>,
    /// An SSE stream: no request timeout (it stays open), `Accept:
    /// text/event-stream`, `Cache-Control: no-store`.
    pub(crate) stream: bool,
    /// Whether sending it again can do harm: set from the method, made `Safe` by
    /// an idempotency key, and set by hand for the calls the method misjudges
    /// (ack/release/extend, claim).
    pub(crate) repeat: Repeat,
}

impl Call {
    pub(crate) fn new(method: Method, url: Url) -> Self {
        Self {
            url,
            body: None,
            idempotency_key: None,
            headers: Vec::new(),
            stream: false,
            repeat: Repeat::of_method(&method),
            method,
        }
    }

    pub(crate) fn get(url: Url) -> Self {
        Self::new(Method::GET, url)
    }

    /// A `GET` of an SSE stream.
    pub(crate) fn stream(url: Url) -> Self {
        Self {
            stream: true,
            ..Self::get(url)
        }
    }

    /// Adds a JSON body.
    pub(crate) fn json(mut self, body: &impl Serialize) -> Result<Self, Error> {
        let body = serde_json::to_vec(body)
            .map_err(|e| Error::InvalidInput(format!("request body cannot be serialized: {e}")))?;
        self.body = Some(body);
        Ok(self)
    }

    /// Adds the `Idempotency-Key` header.
    pub(crate) fn idempotency_key(mut self, key: &str) -> Result<Self, Error> {
        let mut value = HeaderValue::from_str(key)
            .ok()
            .filter(|_| !key.is_empty())
            .ok_or_else(|| {
                Error::InvalidInput(
                    "the idempotency key must be non-empty visible ASCII (a UUID works)".into(),
                )
            })?;
        value.set_sensitive(true);
        self.idempotency_key = Some(value);
        // The server replays the stored answer to a repeat with the same key.
        self.repeat = Repeat::Safe;
        Ok(self)
    }

    /// Adds a request header.
    pub(crate) fn header(mut self, name: &'static str, value: &str) -> Result<Self, Error> {
        let value = HeaderValue::from_str(value)
            .map_err(|_| Error::InvalidInput(format!("{name} must be visible ASCII")))?;
        self.headers.push((name, value));
        Ok(self)
    }

    /// Overrides the repeat safety the method implies.
    pub(crate) fn repeat(mut self, repeat: Repeat) -> Self {
        self.repeat = repeat;
        self
    }

    /// Appends `name=value` to the query string.
    pub(crate) fn query(mut self, name: &str, value: &str) -> Self {
        self.url.query_pairs_mut().append_pair(name, value);
        self
    }
}

/// A server's base URL: http or https, no query or fragment, no trailing slash.
pub(crate) fn parse_base_url(base_url: &str) -> Result<Url, Error> {
    let mut url =
        Url::parse(base_url).map_err(|e| Error::InvalidUrl(format!("{base_url}: {e}")))?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Error::InvalidUrl(format!(
            "{base_url}: scheme must be http or https"
        )));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(Error::InvalidUrl(format!(
            "{base_url}: must not have a query or fragment"
        )));
    }
    url.path_segments_mut()
        .map_err(|()| Error::InvalidUrl(format!("{base_url} cannot be a base URL")))?
        .pop_if_empty();
    Ok(url)
}

/// The `Authorization` header of `token`, marked sensitive (never logged).
pub(crate) fn bearer(token: &crate::token::Token) -> Result<HeaderValue, Error> {
    let mut value = HeaderValue::from_str(&format!("Bearer {}", token.expose())).map_err(|_| {
        Error::InvalidInput("the token has characters an HTTP header cannot carry".into())
    })?;
    value.set_sensitive(true);
    Ok(value)
}
