//! Retention: terminal events older than the retention window are removed (archived
//! first when `--archive-dir` is set, and held back while the archive cannot take
//! them), each agent's low-water mark advances (I6), and webhook attempts are kept
//! as long as terminal events.

use super::{TickReport, Workers};

/// One pass.
pub(super) async fn pass(w: &Workers, now: i64, report: &mut TickReport) {
    let state = &w.state;
    let cutoff = now - state.config.retention.as_millis() as i64;
    let archive = state
        .archive
        .as_ref()
        .map(|a| a as &dyn crate::store::ArchiveSink);
    let retention = w
        .task(
            "retention",
            report,
            state.store.retain(cutoff, now, archive),
        )
        .await;
    if retention.events_removed > 0 {
        tracing::info!(
            events_removed = retention.events_removed,
            archived = retention.archived,
            "retention pass"
        );
    }
    if !report.failed("retention") {
        state.retention_pass(&retention, now);
    }
    report.retention = retention;
    w.task(
        "callback_attempts",
        report,
        state.store.trim_callback_attempts(cutoff),
    )
    .await;
}
