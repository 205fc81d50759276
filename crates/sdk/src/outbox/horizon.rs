//! The outbox's horizon: how long an entry may still be resent with its key.
//!
//! The server keeps an idempotency key for its *key TTL* (`idempotency_ttl_seconds`
//! in `/api/v1/capabilities`; 24 h by default and never less: invariant I8),
//! counted from when an attempt carrying the key reached it. A resend after that is
//! a fresh request to the server, so a message whose answer was lost would be
//! stored twice. The outbox therefore resends an entry only while
//! `now - first_attempt_at < key TTL - margin` ([`OutboxConfig::horizon_margin`]),
//! where `first_attempt_at` is the start of the first attempt that may have reached
//! the server (the earliest the key can have been recorded; an attempt that failed
//! to connect sent nothing and does not start the clock). Past that, the entry
//! becomes `EXPIRED` with the reason, never resent and never silently deleted.
//!
//! The key TTL is learned from the server and cached in the local file, so an agent
//! that starts offline still knows it. Until it has been learned once, the outbox
//! assumes 24 h, the least any server keeps keys.
//!
//! [`OutboxConfig::horizon_margin`]: super::OutboxConfig::horizon_margin

use std::sync::Mutex;
use std::time::Duration;

use serde::Serialize;

use crate::Client;
use crate::local::{LocalDb, ms};

use super::OutboxError;

/// What the outbox assumes until it has learned the server's key TTL: the least
/// a server keeps keys (I8; `switchboard serve` refuses a shorter TTL).
pub const DEFAULT_KEY_TTL: Duration = Duration::from_secs(24 * 3600);

/// Where the learned TTL is kept in the local file (`agent_state`).
const CACHE_NAME: &str = "outbox.server_idempotency_ttl_seconds";
/// How long a learned TTL is trusted before it is asked for again (the server may
/// have been reconfigured), in ms.
const RELEARN_AFTER_MS: i64 = 3_600_000;
/// How long after a failed attempt to learn it the outbox asks again, in ms.
const RETRY_LEARN_MS: i64 = 60_000;

/// The server's idempotency key TTL as the outbox knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct KeyTtl {
    /// How long the server keeps idempotency keys.
    #[serde(rename = "seconds", serialize_with = "as_seconds")]
    pub ttl: Duration,
    /// Unix ms when it was learned from the server; `None`: never, the default
    /// ([`DEFAULT_KEY_TTL`]) is assumed.
    pub learned_at: Option<i64>,
}

fn as_seconds<S: serde::Serializer>(ttl: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u64(ttl.as_secs())
}

impl KeyTtl {
    const ASSUMED: Self = Self {
        ttl: DEFAULT_KEY_TTL,
        learned_at: None,
    };
}

/// The key TTL the state file `db` knows (also for a process that only reads the
/// file, like `switchboard agent status`).
pub async fn key_ttl(db: &LocalDb) -> Result<KeyTtl, OutboxError> {
    let cached = db.published(CACHE_NAME).await?;
    Ok(cached
        .and_then(|(value, at)| {
            let seconds = value.parse::<u64>().ok()?;
            Some(KeyTtl {
                ttl: Duration::from_secs(seconds),
                learned_at: Some(at),
            })
        })
        .unwrap_or(KeyTtl::ASSUMED))
}

/// The horizon of a running outbox: the key TTL it goes by, and when to ask the
/// server again.
#[derive(Debug)]
pub(super) struct Horizon {
    margin: Duration,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    known: KeyTtl,
    /// When this process last asked the server (`now` of that pass), and whether
    /// it answered. Unset: not yet asked by this process.
    asked: Option<(i64, bool)>,
}

impl Horizon {
    /// The cached TTL from `db`, or the default.
    pub(super) async fn load(db: &LocalDb, margin: Duration) -> Result<Self, OutboxError> {
        Ok(Self {
            margin,
            state: Mutex::new(State {
                known: key_ttl(db).await?,
                asked: None,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The TTL in force.
    pub(super) fn known(&self) -> KeyTtl {
        self.state().known
    }

    /// The newest `first_attempt_at` that is too old to resend at `now`: entries
    /// first tried at or before it are past the horizon.
    pub(super) fn cutoff(&self, now: i64) -> i64 {
        now.saturating_sub(ms(self.known().ttl.saturating_sub(self.margin)))
    }

    /// Whether to ask the server for its TTL in the pass at `now`: once per process
    /// before its first attempt, then hourly, and a minute after a failure.
    pub(super) fn due(&self, now: i64) -> bool {
        match self.state().asked {
            None => true,
            // A `now` before the last ask (a test's clock, a clock set back): ask.
            Some((at, _)) if now < at => true,
            Some((at, answered)) => {
                now - at
                    >= if answered {
                        RELEARN_AFTER_MS
                    } else {
                        RETRY_LEARN_MS
                    }
            }
        }
    }

    /// Asks the server for its key TTL and keeps the answer (in memory and in
    /// `db`). When the server cannot be asked, the TTL in force stays: the cached
    /// one or the default, which no server undercuts.
    pub(super) async fn learn(&self, db: &LocalDb, client: &Client, now: i64) {
        let answer = client.capabilities().await;
        let ttl = match answer {
            Ok(capabilities) => Duration::from_secs(capabilities.limits.idempotency_ttl_seconds),
            Err(error) => {
                tracing::debug!(%error, "could not learn the server's idempotency key TTL");
                self.state().asked = Some((now, false));
                return;
            }
        };
        if let Err(error) = db.publish(CACHE_NAME, &ttl.as_secs().to_string()).await {
            tracing::warn!(%error, "could not cache the server's idempotency key TTL");
        }
        let mut state = self.state();
        if state.known.ttl != ttl {
            tracing::info!(
                seconds = ttl.as_secs(),
                "the server keeps idempotency keys this long; the outbox resends within it"
            );
        }
        state.known = KeyTtl {
            ttl,
            learned_at: Some(now),
        };
        state.asked = Some((now, true));
    }

    /// Why an entry past the horizon is not resent.
    pub(super) fn reason(&self) -> String {
        format!(
            "not sent within the server's idempotency window ({} keys, less a {} margin) \
             since its first attempt: an attempt may have been stored without its answer \
             arriving, and the server no longer keeps that key, so resending could \
             deliver it twice; inspect the recipient's inbox and resend by hand if it is \
             missing",
            human(self.known().ttl),
            human(self.margin)
        )
    }
}

/// `24 h`, `90 min`, `45 s`.
pub(crate) fn human(duration: Duration) -> String {
    let s = duration.as_secs();
    if s >= 3600 && s.is_multiple_of(3600) {
        format!("{} h", s / 3600)
    } else if s >= 60 && s.is_multiple_of(60) {
        format!("{} min", s / 60)
    } else {
        format!("{s} s")
    }
}

#[cfg(test)]
mod tests {
    use super::human;
    use std::time::Duration;

    #[test]
    fn human_durations_use_the_largest_whole_unit() {
        assert_eq!(human(Duration::from_secs(86_400)), "24 h");
        assert_eq!(human(Duration::from_secs(5400)), "90 min");
        assert_eq!(human(Duration::from_secs(45)), "45 s");
        assert_eq!(human(Duration::ZERO), "0 s");
    }
}
