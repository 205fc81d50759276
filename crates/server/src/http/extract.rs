//! Extractors whose rejections are RFC 9457 problems with a message that says how to
//! fix the request (axum's own rejections are plain text).

use crate::error::{ApiError, ApiResult};
use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use switchboard_proto::ErrorCode;

/// Parses a JSON body: syntax errors are 400 `malformed_json`, well-formed JSON of the
/// wrong shape (unknown field, wrong type, out of range) is 422 `validation_failed`.
pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    // Every request body is an object; serde would also read a struct from an array.
    if let Some(first) = bytes.iter().find(|b| !b.is_ascii_whitespace())
        && *first == b'['
    {
        return Err(ApiError::unprocessable(
            "the body must be a JSON object, not an array",
        ));
    }
    parse_json_value(bytes)
}

/// Parses a JSON body that may be any JSON value (a memory record's value, where an
/// array is as good as an object), with the errors of [`parse_json`].
///
/// A shape error names the field it is about (`serde_path_to_error`): serde's own
/// message says "invalid value: integer `-1`, expected u64" but not where.
pub fn parse_json_value<T: DeserializeOwned>(bytes: &[u8]) -> ApiResult<T> {
    let mut deserializer = serde_json::Deserializer::from_slice(bytes);
    let value = serde_path_to_error::deserialize(&mut deserializer).map_err(|e| {
        let path = e.path().to_string();
        json_error(&e.into_inner(), Some(path).filter(|p| p != "."))
    })?;
    // Trailing characters after the value, as `serde_json::from_slice` refuses them.
    deserializer.end().map_err(|e| json_error(&e, None))?;
    Ok(value)
}

/// The problem for a body serde refused, with the field it is about if known.
fn json_error(e: &serde_json::Error, path: Option<String>) -> ApiError {
    use serde_json::error::Category;
    match (e.classify(), path) {
        (Category::Syntax | Category::Eof | Category::Io, _) => ApiError::new(
            ErrorCode::MalformedJson,
            format!("the body is not valid JSON ({e}); send a JSON object"),
        ),
        (Category::Data, Some(path)) => ApiError::unprocessable(format!(
            "the body does not match the expected shape at `{path}`: {e}; see \
             /api/v1/openapi.json"
        )),
        (Category::Data, None) => ApiError::unprocessable(format!(
            "the body does not match the expected shape: {e}; see /api/v1/openapi.json"
        )),
    }
}

fn body_rejection(r: BytesRejection) -> ApiError {
    if r.status().as_u16() == 413 {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            "the request body is larger than the server's limit (see max_body_bytes at \
             /api/v1/capabilities); send a smaller payload",
        )
    } else {
        ApiError::validation(format!("could not read the request body: {r}"))
    }
}

fn check_json_content_type(req: &Request) -> ApiResult<()> {
    match req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    {
        None => Ok(()),
        Some(ct) if ct.starts_with("application/json") || ct.contains("+json") => Ok(()),
        Some(ct) => Err(ApiError::new(
            ErrorCode::UnsupportedMediaType,
            format!("content type {ct:?} is not accepted; send application/json"),
        )),
    }
}

/// The raw body of a JSON request (for idempotency fingerprints), size-checked.
pub struct RawJson(pub Bytes);

impl<S: Send + Sync> FromRequest<S> for RawJson {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        check_json_content_type(&req)?;
        let bytes = Bytes::from_request(req, state)
            .await
            .map_err(body_rejection)?;
        Ok(Self(bytes))
    }
}

/// A JSON body parsed into `T`.
pub struct Json<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Json<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let RawJson(bytes) = RawJson::from_request(req, state).await?;
        let bytes = if bytes.is_empty() {
            Bytes::from_static(b"{}")
        } else {
            bytes
        };
        parse_json(&bytes).map(Json)
    }
}

/// A query string parsed into `T`.
pub struct Query<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for Query<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|q| Query(q.0))
            .map_err(|e: QueryRejection| {
                ApiError::validation(format!(
                    "{}; numbers must be non-negative integers in range, and only documented \
                     parameters are accepted",
                    e.body_text()
                ))
            })
    }
}

/// Path parameters parsed into `T`.
pub struct Path<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for Path<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| Path(p.0))
            .map_err(|e: PathRejection| {
                ApiError::validation(format!("{}; check the ids in the URL", e.body_text()))
            })
    }
}
