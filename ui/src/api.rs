//! Calls to the server's HTTP API from the browser (`window.fetch`).
//!
//! The console authenticates with its session cookie (same origin, sent by the
//! browser); it never holds a token after login. A 401 from any call means the
//! session is over: [`on_unauthorized`] tells the app to show the login page.
//! Errors carry the server's problem `detail`, which is what the page shows.

use std::cell::RefCell;

use serde::Serialize;
use serde::de::DeserializeOwned;
use switchboard_proto::Problem;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::{Headers, RequestCredentials, RequestInit, Response};

/// A failed call: the HTTP status (0 when the server could not be reached) and the
/// sentence to show.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    pub(crate) status: u16,
    pub(crate) detail: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

pub(crate) type ApiResult<T> = Result<T, ApiError>;

thread_local! {
    static UNAUTHORIZED: RefCell<Option<Box<dyn Fn()>>> = const { RefCell::new(None) };
}

/// Registers what to do when a call answers 401 (the app shows its login page).
pub(crate) fn on_unauthorized(f: impl Fn() + 'static) {
    UNAUTHORIZED.with(|u| *u.borrow_mut() = Some(Box::new(f)));
}

fn describe(value: &JsValue) -> String {
    value.as_string().unwrap_or_else(|| format!("{value:?}"))
}

fn unreachable(e: &JsValue) -> ApiError {
    ApiError {
        status: 0,
        detail: format!(
            "the server did not answer ({}); is it still running?",
            describe(e)
        ),
    }
}

async fn call(method: &str, path: &str, body: Option<String>) -> ApiResult<(u16, String)> {
    let window = web_sys::window().ok_or_else(|| ApiError {
        status: 0,
        detail: "no browser window".to_owned(),
    })?;
    let init = RequestInit::new();
    init.set_method(method);
    init.set_credentials(RequestCredentials::SameOrigin);
    let headers = Headers::new().map_err(|e| unreachable(&e))?;
    headers
        .append("accept", "application/json")
        .map_err(|e| unreachable(&e))?;
    if let Some(body) = body {
        headers
            .append("content-type", "application/json")
            .map_err(|e| unreachable(&e))?;
        init.set_body(&JsValue::from_str(&body));
    }
    init.set_headers(&headers);
    let response: Response = JsFuture::from(window.fetch_with_str_and_init(path, &init))
        .await
        .map_err(|e| unreachable(&e))?
        .dyn_into()
        .map_err(|e| unreachable(&e))?;
    let status = response.status();
    let text = match response.text() {
        Ok(p) => JsFuture::from(p)
            .await
            .ok()
            .and_then(|v| v.as_string())
            .unwrap_or_default(),
        Err(_) => String::new(),
    };
    if response.ok() {
        return Ok((status, text));
    }
    if status == 401 {
        UNAUTHORIZED.with(|u| {
            if let Some(f) = u.borrow().as_ref() {
                f();
            }
        });
    }
    let detail = serde_json::from_str::<Problem>(&text)
        .ok()
        .and_then(|p| p.detail.or(Some(p.title)))
        .unwrap_or_else(|| format!("{method} {path}: HTTP {status}"));
    Err(ApiError { status, detail })
}

fn parse<T: DeserializeOwned>(path: &str, text: &str) -> ApiResult<T> {
    serde_json::from_str(text).map_err(|e| ApiError {
        status: 0,
        detail: format!("{path}: unexpected answer from the server: {e}"),
    })
}

pub(crate) async fn get<T: DeserializeOwned>(path: &str) -> ApiResult<T> {
    let (_, text) = call("GET", path, None).await?;
    parse(path, &text)
}

pub(crate) async fn send<B: Serialize, T: DeserializeOwned>(
    method: &str,
    path: &str,
    body: &B,
) -> ApiResult<T> {
    let body = serde_json::to_string(body).map_err(|e| ApiError {
        status: 0,
        detail: e.to_string(),
    })?;
    let (_, text) = call(method, path, Some(body)).await?;
    parse(path, &text)
}

/// A call whose answer has no body worth reading (logout).
pub(crate) async fn send_empty(method: &str, path: &str) -> ApiResult<()> {
    call(method, path, None).await.map(drop)
}

/// A `DELETE`, answering `T`.
pub(crate) async fn delete<T: DeserializeOwned>(path: &str) -> ApiResult<T> {
    let (_, text) = call("DELETE", path, None).await?;
    parse(path, &text)
}

/// A `POST` that takes no body, answering `T`.
pub(crate) async fn post<T: DeserializeOwned>(path: &str) -> ApiResult<T> {
    let (_, text) = call("POST", path, None).await?;
    parse(path, &text)
}

/// Webhook callbacks of the operator's tenant (`/api/v1/ops/callbacks…`). The
/// answers never carry a callback's secret.
pub(crate) mod callbacks {
    use switchboard_proto::{Callback, CallbackAttempt, CallbackAttemptList, CallbackId};

    use super::{ApiResult, call, get, post};

    fn path(id: CallbackId, action: &str) -> String {
        format!("/api/v1/ops/callbacks/{id}/{action}")
    }

    /// Every registration, oldest first.
    pub(crate) async fn list() -> ApiResult<Vec<Callback>> {
        get::<switchboard_proto::CallbackList>("/api/v1/ops/callbacks")
            .await
            .map(|l| l.callbacks)
    }

    /// The callback's recent attempts (deliveries, challenges, tests), newest first.
    pub(crate) async fn attempts(id: CallbackId) -> ApiResult<Vec<CallbackAttempt>> {
        get::<CallbackAttemptList>(&path(id, "attempts"))
            .await
            .map(|l| l.attempts)
    }

    /// Disables (deliveries stop) or enables (deliveries resume at once) a callback.
    pub(crate) async fn set_enabled(id: CallbackId, enabled: bool) -> ApiResult<Callback> {
        post(&path(id, if enabled { "enable" } else { "disable" })).await
    }

    /// Challenges the endpoint again: the attempt, or a 422 whose detail says what
    /// failed.
    pub(crate) async fn verify(id: CallbackId) -> ApiResult<CallbackAttempt> {
        post(&path(id, "verify")).await
    }

    /// Sends a `callback.test` delivery: what the endpoint answered, success or not.
    pub(crate) async fn test(id: CallbackId) -> ApiResult<CallbackAttempt> {
        post(&path(id, "test")).await
    }

    /// Removes the registration (its events stay in the inbox).
    pub(crate) async fn delete(id: CallbackId) -> ApiResult<()> {
        call("DELETE", &format!("/api/v1/ops/callbacks/{id}"), None)
            .await
            .map(drop)
    }
}
