//! What an attempt's result means for an entry: sent, retry (when), or poison.

use std::time::Duration;

use crate::Error;
use crate::retry::is_transient;

/// What an attempt's result means for the entry.
#[derive(Debug, PartialEq)]
pub(super) enum Judged {
    Sent(serde_json::Value),
    Retry {
        retry_after: Option<Duration>,
        reason: String,
        /// The request never left the machine (the connection could not be made),
        /// so the server cannot have recorded its key.
        never_left: bool,
    },
    /// The token was refused: wait the longest delay.
    Unauthorized(String),
    Poison(String),
}

/// The error and its sources on one line: what an operator needs in `last_error`.
fn describe(error: &Error) -> String {
    crate::error::with_causes(error)
}

pub(super) fn judge(result: Result<serde_json::Value, Error>) -> Judged {
    match result {
        Ok(receipt) => Judged::Sent(receipt),
        // A 2xx whose body is not a receipt: the server took the message.
        Err(Error::Decode(reason)) => {
            tracing::warn!(%reason, "outbox entry sent, but the receipt was unreadable");
            Judged::Sent(serde_json::Value::Null)
        }
        // An expired or revoked token: logging in again fixes it, so the message
        // waits instead of being thrown away.
        // So is a device login that ended (revoked, or its refresh token refused).
        Err(error) if error.status() == Some(401) || matches!(error, Error::Login(_)) => {
            Judged::Unauthorized(format!(
                "{}; log in again (`switchboard agent login`)",
                describe(&error)
            ))
        }
        Err(error) if is_transient(&error) => Judged::Retry {
            retry_after: error.retry_after(),
            reason: describe(&error),
            // Only a failed connect is known to have sent nothing; a timeout or a
            // reset may come after the server read (and stored) the request.
            never_left: matches!(&error, Error::Transport(e) if e.is_connect()),
        },
        Err(error) => Judged::Poison(describe(&error)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_login_that_ended_keeps_the_message_waiting() {
        let judged = judge(Err(Error::Login("the login ended".into())));
        assert!(
            matches!(&judged, Judged::Unauthorized(reason) if reason.contains("log in again")),
            "{judged:?}"
        );
    }
}
