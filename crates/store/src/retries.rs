//! How many times each backend ran a whole write transaction again, by the database's
//! code for the failure that made it (`engine::retry_transaction`): PostgreSQL's
//! SQLSTATE `40001` (serialization failure) and `40P01` (deadlock), MariaDB /
//! MySQL's error numbers `1213` (deadlock) and `1205` (lock wait timeout). SQLite
//! never retries (its single writer cannot deadlock).
//!
//! The counts are this process's own, since it started, like every counter of
//! `/metrics`: scrape each instance and sum. [`Store::transaction_retries`]
//! (crate::Store::transaction_retries) reads them.

use std::collections::BTreeMap;
use std::sync::Mutex;

/// One counter: `count` retries of transactions that failed with `code` on
/// `backend` (`postgres`, `mysql`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryCount {
    pub backend: &'static str,
    /// A SQLSTATE (`40001`, `40P01`) or a MariaDB / MySQL error number (`1213`,
    /// `1205`), as text.
    pub code: &'static str,
    pub count: u64,
}

/// The counters of one store. Retries are rare (each one is a failed transaction),
/// so a lock around a small map costs nothing worth an atomic per code.
#[derive(Debug)]
pub(crate) struct Retries {
    backend: &'static str,
    counts: Mutex<BTreeMap<&'static str, u64>>,
}

impl Retries {
    pub(crate) fn new(backend: &'static str) -> Self {
        Self {
            backend,
            counts: Mutex::new(BTreeMap::new()),
        }
    }

    /// One more retry after a failure with `code`.
    pub(crate) fn record(&self, code: &'static str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(code)
            .or_default() += 1;
    }

    /// Every code seen so far, in code order.
    pub(crate) fn counts(&self) -> Vec<RetryCount> {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|(code, count)| RetryCount {
                backend: self.backend,
                code,
                count: *count,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_kept_per_code() {
        let r = Retries::new("postgres");
        assert!(r.counts().is_empty());
        r.record("40P01");
        r.record("40001");
        r.record("40P01");
        let count = |code, count| RetryCount {
            backend: "postgres",
            code,
            count,
        };
        assert_eq!(r.counts(), [count("40001", 1), count("40P01", 2)]);
    }
}
