//! The scavenger: leases that ran out go back to pending, or to the quarantine at
//! the attempt limit (I5); events past their `expires_at` expire. Claims reap their
//! own agent's expired leases too; this pass finds the rest. It also saves the
//! signed requests' nonces a process that owns its database saw (`access/replays.rs`).

use super::{TickReport, Workers};

/// One pass.
pub(super) async fn pass(w: &Workers, now: i64, report: &mut TickReport) {
    let state = &w.state;
    let reap = w.task("scavenger", report, state.store.reap(now)).await;
    state.reaped(&reap);
    if reap.lease_expirations + reap.expired > 0 {
        tracing::info!(
            lease_expirations = reap.lease_expirations,
            quarantined = reap.quarantined,
            expired = reap.expired,
            "scavenger pass"
        );
    }
    report.reap = reap;
    // Every pass: what a crash can lose of the nonces seen (`access/replays.rs`).
    w.task(
        "signature_nonces_saved",
        report,
        state.replays.save(state.store.as_ref(), now),
    )
    .await;
}
