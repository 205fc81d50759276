//! The conformance suite written from the three seeds (issue 38), next to our own
//! suites and, like them, run on SQLite, PostgreSQL and MariaDB: a client that knows
//! only the seeds' documents (`../shared/seeds/`), their paths, bodies, answers and
//! status codes, spoken with a plain HTTP client and read as plain JSON. No proto
//! type and no SDK call, except where the test is about the SDK (the region header).
//!
//! - `inbox.rs`: seed 000, "Concrete API Contract": subscribe, poll after a cursor
//!   (`sequence_number`), claim, ack, release; the least-privilege read scope
//!   (`agent:project_A:read`).
//! - `leases.rs`: seed 001, "Complete Proposed HTTP API" and "Transaction
//!   Algorithms": `display_name`, the owner's upsert, 423 with `Retry-After`,
//!   memories registered under the client's UUIDv7.
//! - `discovery.rs`: seed 002, §4.4 and §9.3: `/v1/capabilities`, no API path
//!   answered by the console, the regional boundary header.

mod discovery;
mod inbox;
mod leases;

use serde_json::Value;
use switchboard_tests::sdk::reqwest;

use crate::support::{Reply, call};

/// A client of the seeds: a base URL and a bearer token, nothing of ours.
pub(crate) struct Seed {
    http: reqwest::Client,
    url: String,
    token: String,
}

impl Seed {
    pub(crate) fn new(url: &str, token: &str) -> Self {
        Self {
            http: reqwest::Client::new(),
            url: url.to_owned(),
            token: token.to_owned(),
        }
    }

    pub(crate) async fn get(&self, path: &str) -> Reply {
        call(
            self.http
                .get(format!("{}{path}", self.url))
                .bearer_auth(&self.token),
        )
        .await
    }

    /// A POST with a JSON body, and an `Idempotency-Key` when one is given.
    pub(crate) async fn post(&self, path: &str, body: Value, key: Option<&str>) -> Reply {
        self.post_with(path, body, key, &[]).await
    }

    pub(crate) async fn post_with(
        &self,
        path: &str,
        body: Value,
        key: Option<&str>,
        headers: &[(&str, &str)],
    ) -> Reply {
        let mut req = self
            .http
            .post(format!("{}{path}", self.url))
            .bearer_auth(&self.token)
            .json(&body);
        if let Some(k) = key {
            req = req.header("Idempotency-Key", k);
        }
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        call(req).await
    }
}
