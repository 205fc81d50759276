//! The sampler: the overview's history (inbox depth by state, the counters' rates)
//! gets a sample every `--sample-interval`, and the console is told.

use super::{TickReport, Workers};

/// One pass: a sample, if one is due at `now`.
pub(super) async fn pass(w: &Workers, now: i64, report: &mut TickReport) {
    let state = &w.state;
    if !state.history.due(now) {
        return;
    }
    let sampled = w.task("history", report, state.store.depth(None)).await;
    if !report.failed("history") && state.history.record(now, &sampled, state.metrics.samples()) {
        state.hub.sampled();
    }
}
