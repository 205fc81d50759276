//! Overview: live health tiles from `/api/v1/ops/overview` (per-minute rates from
//! the server's sample history), the queue table's health on PostgreSQL, and the
//! charts of the last hour.

use leptos::prelude::*;
use switchboard_proto::{Overview, QueueTableHealth, RetentionHealth};

use super::charts::Charts;
use super::{error_box, loading};
use crate::api;
use crate::context::Link;
use crate::format;
use crate::live::Live;
use crate::summary;

fn tile(id: &'static str, label: &'static str, value: String, hint: &'static str) -> AnyView {
    let alert = id == "quarantined" && value != "0";
    tile_with(id, label, value, hint, alert)
}

fn tile_with(
    id: &'static str,
    label: &'static str,
    value: String,
    hint: &'static str,
    alert: bool,
) -> AnyView {
    view! {
        <div class=if alert { "tile alert" } else { "tile" } id=format!("tile-{id}") title=hint>
            <span class="tile-label">{label}</span>
            <span class="tile-value">{value}</span>
        </div>
    }
    .into_any()
}

/// The PostgreSQL queue table's health (absent on SQLite).
fn queue_table(h: QueueTableHealth) -> AnyView {
    let long = h.oldest_transaction_age_seconds > summary::LONG_TRANSACTION_SECONDS;
    view! {
        <h2>"Queue table (PostgreSQL)"</h2>
        <div class="tiles" id="queue-table-tiles">
            {tile_with("dead-tuples", "Dead rows", h.dead_tuples.to_string(), "Dead row versions in the inbox table, waiting for vacuum", summary::vacuum_behind(&h))}
            {tile("live-tuples", "Live rows", h.live_tuples.to_string(), "Rows in the inbox table, completed ones included until retention")}
            {tile("vacuum-age", "Last vacuum", h.vacuum_age_seconds.map(|s| format!("{} ago", format::age(s))).unwrap_or_else(|| "never".to_owned()), "Since (auto)vacuum last finished on the inbox table")}
            {tile_with("oldest-transaction", "Oldest transaction", format::age(h.oldest_transaction_age_seconds), "Age of the database's oldest open transaction: vacuum cannot remove what it might still see", long)}
        </div>
        {summary::queue_table_advice(&h).map(|advice| view! { <p class="notice" id="queue-table-advice">{advice}</p> })}
    }
    .into_any()
}

/// Retention's archive: how much it took, and a notice while it holds retention back.
fn retention(r: RetentionHealth) -> AnyView {
    view! {
        {r.archiving.then(|| view! {
            <p class="muted" id="retention-archive">
                {format!("Retention archives before it removes: {} archived since the server started.", format::events(r.archived_total))}
            </p>
        })}
        {r.held_back.map(|h| view! {
            <p class="notice" id="retention-held-back">
                {format!("Retention is held back (since {}): {}", format::when(h.since), h.reason)}
            </p>
        })}
    }
    .into_any()
}

#[component]
pub(crate) fn OverviewPage() -> impl IntoView {
    let live = expect_context::<Live>();
    let data = LocalResource::new(move || {
        live.version.get();
        api::get::<Overview>("/api/v1/ops/overview")
    });
    view! {
        <section id="overview">
            <h1>"Overview"</h1>
            {move || match data.get() {
                None => loading(),
                Some(Err(e)) => error_box(&e),
                Some(Ok(o)) => {
                    let online = o.agents.iter().filter(|a| a.subscribers > 0).count();
                    let t = &o.totals;
                    let empty = o.agents.is_empty();
                    view! {
                        <div class="tiles" id="overview-tiles">
                            {tile("agents", "Agents", o.agents.len().to_string(), "Agents in this tenant")}
                            {tile("online", "Online", format!("{online}"), "Agents with an open SSE subscription")}
                            {tile("subscribers", "Subscribers", o.subscribers.to_string(), "Open SSE subscriptions on this server")}
                            {tile("pending", "Pending", t.pending.to_string(), "Waiting to be claimed")}
                            {tile("claimed", "Claimed", t.claimed.to_string(), "Held under a visibility lease")}
                            {tile("quarantined", "Quarantined", t.quarantined.to_string(), "Dead-lettered: attempts exhausted or failed for good")}
                            {tile("completed", "Completed", t.completed.to_string(), "Acked, kept as metadata until retention")}
                            {tile(
                                "oldest-pending",
                                "Oldest pending",
                                o.oldest_pending_age_seconds.map(format::age).unwrap_or_else(|| "–".to_owned()),
                                "Age of the oldest claimable event",
                            )}
                        </div>
                        {o.counters.clone().map(|c| {
                            let r = c.per_minute.clone().unwrap_or_default();
                            view! {
                                <h2>"Per minute"</h2>
                                <div class="tiles" id="counter-tiles">
                                    {tile("lease-expirations", "Lease expirations/min", format::rate(r.lease_expirations_per_minute), "Claims whose lease ran out before an ack, over the last minute")}
                                    {tile("stale-claims", "Stale-claim rejections/min", format::rate(r.stale_claim_rejections_per_minute), "Ack, release or extend with an outdated claim token (409 stale_claim), over the last minute")}
                                    {tile("fencing", "Fencing rejections/min", format::rate(r.fencing_rejections_per_minute), "Memory record calls refused for a stale fencing token, over the last minute")}
                                    {tile("delivered", "Delivered/min", format::rate(r.delivered_per_minute), "Events acked over the last minute")}
                                    {tile("latency-p50", "Latency p50", format::latency(c.delivery_latency_p50_seconds), "From available to acked, median since the server started")}
                                    {tile("latency-p99", "Latency p99", format::latency(c.delivery_latency_p99_seconds), "From available to acked, 99th percentile since the server started")}
                                </div>
                                <p class="muted" id="counter-totals">
                                    {format!(
                                        "Since the server started: {} lease expirations, {} stale-claim rejections, {} fencing rejections, {} quarantined, {} delivered.",
                                        c.lease_expirations_total, c.stale_claim_rejections_total, c.fencing_rejections_total, c.quarantined_total, c.delivered_total
                                    )}
                                </p>
                            }
                        })}
                        {o.queue_table.clone().map(queue_table)}
                        {o.retention.clone().map(retention)}
                        <Charts />
                        {(t.quarantined > 0).then(|| view! {
                            <p class="notice">
                                {format::events(t.quarantined)} " in the quarantine. "
                                <Link href="/quarantine">"Review them"</Link>
                            </p>
                        })}
                        {empty.then(|| view! {
                            <p class="empty">
                                "No agents yet. Create one with "
                                <code>"POST /api/v1/ops/agents {\"name\": \"build-bot\"}"</code>
                                " (see the README's API tour); its inbox shows up here live."
                            </p>
                        })}
                        <p class="muted">"Server time " {format::when(o.server_time)}</p>
                    }
                    .into_any()
                }
            }}
        </section>
    }
}
