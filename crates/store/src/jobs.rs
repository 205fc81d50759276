//! The store's bulk-job seam (the runner is the server's `workers/jobs.rs`): its
//! records. The trait, [`JobStore`](crate::JobStore), is declared with its one
//! implementation in `engine/jobs.rs`; the operator views and bulk actions at once,
//! [`OpsStore`](crate::OpsStore), in `engine/ops.rs`.

use super::*;

/// The events an operator action covers: those `ids` and/or `filter` name that the
/// action applies to (replay: quarantined; release: claimed; purge: not yet purged).
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    pub action: BulkAction,
    pub ids: Option<&'a [EventId]>,
    pub filter: Option<&'a EventFilter>,
}

/// A bulk job as its runner holds it.
#[derive(Debug, Clone)]
pub struct JobSpec {
    pub tenant: TenantId,
    pub action: BulkAction,
    pub ids: Option<Vec<EventId>>,
    pub filter: Option<EventFilter>,
    /// Events per second; `None`: unpaced.
    pub rate: Option<u32>,
    pub actor: Actor,
}

impl JobSpec {
    pub fn scope(&self) -> Scope<'_> {
        Scope {
            action: self.action,
            ids: self.ids.as_deref(),
            filter: self.filter.as_ref(),
        }
    }
}

/// A job's audit row, written, and the largest matching id then: later events are
/// not the job's.
#[derive(Debug, Clone)]
pub struct JobStarted {
    pub job: switchboard_proto::Job,
    pub upto: Option<EventId>,
}

/// One committed batch: the job after it, and the last event it changed.
#[derive(Debug, Clone)]
pub struct JobStep {
    pub job: switchboard_proto::Job,
    pub last: Option<EventId>,
}
