//! Expiry: what runs out with time but no inbox holds. The signing keys rotate,
//! expired access tokens and authorization codes are forgotten, and the tables that
//! only grow (audit log, lease audit, fencing rejections, credentials, refresh
//! tokens) are trimmed to their horizons in batches. Every minute: a pass more
//! often would only find nothing.

use super::{TickReport, Workers};
use crate::store::Horizon;

/// How often the expiry tasks run.
pub(super) const EVERY_MS: i64 = 60_000;

/// One pass: signing keys, expired tokens and codes, and the horizons of the
/// tables that only grow.
pub(super) async fn pass(w: &Workers, now: i64, report: &mut TickReport) {
    let state = &w.state;
    w.task(
        "signing_keys",
        report,
        state
            .signing
            .maintain_if_due(state.store.as_ref(), &state.webhooks.key, now),
    )
    .await;
    w.task(
        "access_tokens",
        report,
        state.store.forget_access_tokens(now),
    )
    .await;
    w.task("signature_nonces", report, state.store.forget_nonces(now))
        .await;
    w.task(
        "authorization_codes",
        report,
        state.store.forget_authorization_codes(now),
    )
    .await;
    let h = &state.config.horizons;
    let ms = |d: std::time::Duration| d.as_millis() as i64;
    let refresh = state.config.refresh_lifetimes.absolute_ms;
    for table in Horizon::ALL {
        let keep = match table {
            Horizon::AuditLog => ms(h.audit_log),
            Horizon::LeaseAudit => ms(h.lease_audit),
            Horizon::FencingRejections => ms(h.fencing_rejections),
            Horizon::RevokedTokens | Horizon::IssuedTokens => ms(h.credentials),
            // None can be used once its login's absolute lifetime is over.
            Horizon::RefreshTokens => refresh.max(ms(h.credentials)),
        };
        let trimmed = w
            .task(table.as_str(), report, state.store.trim(table, now - keep))
            .await;
        if trimmed > 0 {
            tracing::info!(table = table.as_str(), rows = trimmed, "horizon trimmed");
            report.trimmed.push((table.as_str(), trimmed));
        }
    }
}
