//! Server-side bulk jobs and the overview's sample history.
//!
//! A *job* applies a bulk action (replay, release, purge) to every event matching a
//! filter, in batches of its own transactions, so other requests keep flowing while
//! it runs. Its progress is stored with its audit row (the job id *is* the audit id)
//! and pushed on the operator stream as `job` events. It can be cancelled, and replay
//! can be paced (`rate_per_second`).
//!
//! The *history* is what the overview's charts draw: a sample of the inbox depth and
//! of the server's counters every few seconds, kept in memory for the last hour.

use crate::{BulkAction, EventFilter, EventId};
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `POST /api/v1/ops/jobs`: start a bulk job over `ids` or `filter`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct StartJob {
    pub action: BulkAction,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ids: Option<Vec<EventId>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<EventFilter>,
    /// Events per second, 1..=10,000; absent: as fast as the store allows, in
    /// batches that leave room for other writers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "openapi", schema(minimum = 1, maximum = 10000))]
    pub rate_per_second: Option<u32>,
}

/// Where a job is in its life. `running` and `cancelling` are the live states.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(rename_all = "snake_case")]
pub enum JobState {
    Running,
    /// Cancel requested; the job stops before its next batch.
    Cancelling,
    Completed,
    Cancelled,
    /// The server stopped while the job ran; `done` events were changed.
    Interrupted,
    /// A batch failed (for example the database went away); `done` were changed.
    Failed,
}

impl JobState {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Running => "running",
            Self::Cancelling => "cancelling",
            Self::Completed => "completed",
            Self::Cancelled => "cancelled",
            Self::Interrupted => "interrupted",
            Self::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "running" => Self::Running,
            "cancelling" => Self::Cancelling,
            "completed" => Self::Completed,
            "cancelled" => Self::Cancelled,
            "interrupted" => Self::Interrupted,
            "failed" => Self::Failed,
            _ => return None,
        })
    }

    /// Still changing events (or about to stop).
    pub fn is_live(self) -> bool {
        matches!(self, Self::Running | Self::Cancelling)
    }
}

/// A bulk job: `GET /api/v1/ops/jobs/{job_id}`, and the data of the stream's `job`
/// event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct Job {
    /// Also the id of its audit row.
    pub job_id: i64,
    pub action: BulkAction,
    pub actor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub filter: Option<EventFilter>,
    /// How many ids it was given, when started with ids.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id_count: Option<u64>,
    /// Events that matched when it started (events arriving later are not included).
    pub total: u64,
    /// Events changed so far.
    pub done: u64,
    pub state: JobState,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_per_second: Option<u32>,
    #[serde(with = "time::serde::rfc3339")]
    pub started_at: OffsetDateTime,
    #[serde(default, with = "time::serde::rfc3339::option")]
    pub finished_at: Option<OffsetDateTime>,
    /// Why a `failed` job stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `GET /api/v1/ops/jobs`: the newest jobs first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct JobPage {
    pub jobs: Vec<Job>,
}

/// One sample of the overview's history.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsSample {
    #[serde(with = "time::serde::rfc3339")]
    pub at: OffsetDateTime,
    /// Inbox depth of the tenant by status at `at`.
    pub pending: u64,
    pub claimed: u64,
    pub quarantined: u64,
    /// Server counters at `at` (since the server started).
    pub lease_expirations_total: u64,
    pub stale_claim_rejections_total: u64,
    #[serde(default)]
    pub fencing_rejections_total: u64,
    pub delivered_total: u64,
}

/// One bucket of the delivery latency distribution: acks whose latency was above the
/// previous bucket's bound and at most `le_seconds` (`None`: above the last bound).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct LatencyBucket {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub le_seconds: Option<f64>,
    pub count: u64,
}

/// `GET /api/v1/ops/history`: the samples behind the overview's charts, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsHistory {
    pub interval_seconds: f64,
    pub samples: Vec<OpsSample>,
    /// Delivery latency of the acks made during the window of `samples`.
    pub latency: Vec<LatencyBucket>,
}

/// Counters over the last minute (or since the server started, when that is shorter).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct OpsRates {
    pub lease_expirations_per_minute: f64,
    pub stale_claim_rejections_per_minute: f64,
    #[serde(default)]
    pub fencing_rejections_per_minute: f64,
    pub quarantined_per_minute: f64,
    pub delivered_per_minute: f64,
}
