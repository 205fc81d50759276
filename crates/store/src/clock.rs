//! Time as an input. Every store method takes `now` from a [`Clock`], so a lease test
//! advances a [`ManualClock`] instead of sleeping through a real lease.
//!
//! On SQLite the server process is the database host, so the system clock *is* the
//! database clock. PostgreSQL and MariaDB instances use their own clocks too;
//! `switchboard doctor` reports how far one is from the database's.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};

/// Milliseconds since the Unix epoch.
pub type Millis = i64;

pub trait Clock: Send + Sync + 'static {
    fn now_ms(&self) -> Millis;
}

/// The real clock.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        let now = time::OffsetDateTime::now_utc();
        (now.unix_timestamp_nanos() / 1_000_000) as Millis
    }
}

/// A clock that only moves when told to. For tests.
#[derive(Debug, Clone)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// Starts at the current system time.
    pub fn new() -> Self {
        Self(Arc::new(AtomicI64::new(SystemClock.now_ms())))
    }

    pub fn advance(&self, ms: Millis) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }

    pub fn advance_secs(&self, secs: i64) {
        self.advance(secs * 1000);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// Converts stored milliseconds into a wire timestamp.
pub fn to_timestamp(ms: Millis) -> time::OffsetDateTime {
    time::OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH)
}

/// Converts a wire timestamp into stored milliseconds.
pub fn from_timestamp(ts: time::OffsetDateTime) -> Millis {
    (ts.unix_timestamp_nanos() / 1_000_000) as Millis
}
