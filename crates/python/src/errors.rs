//! SDK errors turned into the package's exceptions. The classes are defined in
//! Python (`python/switchboard/errors.py`, which draws their tree), so some can
//! also derive from a builtin (`ValueError`, `TimeoutError`, `OSError`); this
//! module creates them and sets their attributes.
//!
//! Attributes hold rules, paths and codes, never payload text (invariant I11).

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use switchboard_sdk::consumer::ConsumerError;
use switchboard_sdk::outbox::OutboxError;
use switchboard_sdk::privacy::{Blocked, Refusal};
use switchboard_sdk::{Error, LocalError};

/// An exception of `switchboard.errors.<class>` with `message` and the attributes
/// `attrs` sets.
fn raise(
    class: &str,
    message: String,
    attrs: impl FnOnce(&Bound<'_, PyAny>) -> PyResult<()>,
) -> PyErr {
    Python::attach(|py| {
        let made = (|| {
            let class = py.import("switchboard.errors")?.getattr(class)?;
            let error = class.call1((message,))?;
            attrs(&error)?;
            Ok::<_, PyErr>(PyErr::from_value(error))
        })();
        made.unwrap_or_else(|e| e)
    })
}

/// An SDK call's error.
pub(crate) fn api_error(error: &Error) -> PyErr {
    let problem = error.problem();
    let code = problem.and_then(|p| p.code.clone());
    let detail = problem.and_then(|p| p.detail.clone());
    let (status, kind) = (error.status(), error.kind());
    raise("ApiError", error.to_string(), |e| {
        e.setattr("code", code)?;
        e.setattr("status", status)?;
        e.setattr("detail", detail)?;
        e.setattr("kind", kind)
    })
}

/// A refusal of the privacy gate.
pub(crate) fn privacy_refused(blocked: &Blocked) -> PyErr {
    let refusals: Vec<String> = blocked.refusals.iter().map(ToString::to_string).collect();
    let rules: Vec<String> = blocked
        .refusals
        .iter()
        .map(|r| match r {
            Refusal::Finding(f) => f.rule.code().to_owned(),
            Refusal::UnknownMessageType => "schema.unknown_message_type".to_owned(),
            Refusal::NotAnObject { .. } => "schema.not_an_object".to_owned(),
            Refusal::WrongType { .. } => "schema.wrong_type".to_owned(),
            _ => "schema.other".to_owned(),
        })
        .collect();
    let message_type = blocked.message_type.clone();
    raise("PrivacyRefused", blocked.to_string(), |e| {
        e.setattr("message_type", message_type)?;
        e.setattr("refusals", refusals)?;
        e.setattr("rules", rules)
    })
}

/// A refusal of the outbox, or its failure.
pub(crate) fn outbox_error(error: OutboxError) -> PyErr {
    match error {
        OutboxError::Blocked(blocked) => privacy_refused(&blocked),
        OutboxError::TooLarge { size, limit } => raise(
            "MessageTooLarge",
            OutboxError::TooLarge { size, limit }.to_string(),
            |e| {
                e.setattr("size", size)?;
                e.setattr("limit", limit)
            },
        ),
        OutboxError::Full { capacity } => raise(
            "OutboxFull",
            OutboxError::Full { capacity }.to_string(),
            |e| e.setattr("capacity", capacity),
        ),
        OutboxError::Local(local) => local_error(&local),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// Why a consumer (`run`, or the one behind `events()`) stopped.
pub(crate) fn consumer_error(error: ConsumerError) -> PyErr {
    match error {
        ConsumerError::Refused(error) => api_error(&error),
        ConsumerError::Local(error) => local_error(&error),
        other => PyValueError::new_err(other.to_string()),
    }
}

/// An `events()` event's outcome could not be applied: its consumer stopped first.
pub(crate) fn consumer_stopped(event_id: &str) -> PyErr {
    raise(
        "ConsumerStopped",
        format!(
            "the consumer stopped before event {event_id}'s outcome was applied (the stream \
             raises why); the event comes back when its lease ends, and is not handed out \
             again if it was handled"
        ),
        |e| e.setattr("event_id", event_id),
    )
}

/// A failure of the local state file.
pub(crate) fn local_error(error: &LocalError) -> PyErr {
    raise("LocalStateError", error.to_string(), |_| Ok(()))
}

/// An outbox entry the server refused for good. `reason` is the stored
/// `last_error`, which for an answer from the server begins `HTTP <status>
/// <code>: ` (the SDK's error text); status and code are read back from it.
pub(crate) fn delivery_refused(outbox_id: i64, target: &str, reason: &str) -> PyErr {
    let (status, code, detail) = parse_reason(reason);
    raise(
        "DeliveryRefused",
        format!("the server refused outbox entry #{outbox_id} for {target}: {reason}"),
        |e| {
            e.setattr("outbox_id", outbox_id)?;
            e.setattr("reason", reason)?;
            e.setattr("code", code)?;
            e.setattr("status", status)?;
            e.setattr("detail", detail)?;
            e.setattr("kind", "api")
        },
    )
}

/// flush() ran out of time.
pub(crate) fn flush_timeout(pending: u64, last_error: Option<String>) -> PyErr {
    let why = last_error.map_or_else(String::new, |e| format!("; last error: {e}"));
    raise(
        "FlushTimeout",
        format!("{pending} outbox entries are still unsent{why}; they stay queued"),
        |e| e.setattr("pending", pending),
    )
}

/// `(status, code, detail)` out of `HTTP 404 not_found: detail`.
fn parse_reason(reason: &str) -> (Option<u16>, Option<String>, Option<String>) {
    let Some(rest) = reason.strip_prefix("HTTP ") else {
        return (None, None, None);
    };
    let (status, rest) = rest.split_once(' ').unwrap_or((rest, ""));
    let Ok(status) = status.parse::<u16>() else {
        return (None, None, None);
    };
    let (code, detail) = match rest.split_once(": ") {
        Some((code, detail)) => (code, Some(detail.to_owned())),
        None => (rest, None),
    };
    let is_code = !code.is_empty()
        && code
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    (Some(status), is_code.then(|| code.to_owned()), detail)
}
