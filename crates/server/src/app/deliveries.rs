//! Webhook delivery as a use case: one event of one callback, with the HTTP request
//! outside every transaction (a slow endpoint holds no lock and never the SQLite
//! writer; it holds its event's claim and its callback's lease). The room that
//! decides when to deliver is `workers/deliverer.rs`.
//!
//! Outcomes, after Svix: 2xx acks the event. 410 releases it (for pull) and disables
//! the callback. Anything else (another status, a 3xx, a timeout, a refused
//! connection) releases it with the schedule's next delay, or the endpoint's
//! `Retry-After` on a 429 or 503, and the callback waits as long; the claim counts
//! towards the event's attempts, so a poison event ends in the quarantine. A
//! callback failing for `disable_after` is disabled. The claim, ack and release are
//! the inbox's own use cases (`inbox.rs`), with their counters and signals.

use super::AppState;
use super::inbox::{self, ClaimArgs, ReleaseArgs};
use crate::clock::to_timestamp;
use crate::error::ApiResult;
use crate::metrics::Outcome;
use crate::store::{AttemptRecord, StoreError, StoredCallback};
use std::time::{Duration, Instant};
use switchboard_proto::{CallbackAttempt, CallbackState, ErrorCode};

/// The claim's lease and the callback's: longer than the request may take.
const LEASE_MS: i64 = 60_000;
/// The longest `Retry-After` honoured.
const MAX_RETRY_AFTER: Duration = Duration::from_secs(24 * 3600);

/// What one delivery did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivered {
    /// Another instance holds the callback (or it was disabled meanwhile).
    NotLeased,
    /// The agent had nothing claimable after all.
    Nothing,
    /// This instance cannot open the secret (another webhook key).
    Unreadable(String),
    /// The endpoint took the event (2xx).
    Acked { status: u16 },
    /// Released for a retry after `delay`.
    Retried { error: String, delay: Duration },
    /// Released and the callback disabled.
    Disabled { reason: String },
}

/// Delivers `callback`'s next event, if it can take the callback's lease.
pub async fn deliver(state: &AppState, callback: &StoredCallback) -> ApiResult<Delivered> {
    let webhooks = &state.webhooks;
    let id = callback.callback.callback_id;
    let secret = match webhooks.secret(id, &callback.key_id, &callback.sealed) {
        Ok(secret) => secret,
        Err(e) => {
            tracing::warn!(callback_id = %id, error = %e, "cannot open a webhook secret");
            return Ok(Delivered::Unreadable(e));
        }
    };
    let Ok(url) = url::Url::parse(&callback.callback.url) else {
        return Ok(Delivered::Unreadable(
            "the stored URL does not parse".to_owned(),
        ));
    };
    let lease = uuid::Uuid::new_v4();
    let now = state.now();
    if !state
        .store
        .lease_callback(id, lease, now + LEASE_MS, now)
        .await?
    {
        return Ok(Delivered::NotLeased);
    }
    let agent = match state
        .store
        .agent(callback.tenant, &callback.callback.agent_id.to_string())
        .await
    {
        Ok(agent) => agent,
        Err(StoreError::NotFound) => {
            state.store.unlease_callback(id, lease).await?;
            return Ok(Delivered::Nothing);
        }
        Err(e) => return Err(e.into()),
    };
    let args = ClaimArgs {
        limit: 1,
        lease_ms: LEASE_MS,
        attempt: None,
    };
    let claimed = inbox::claim(state, &agent, args).await?;
    let m = state.metrics.tenant(agent.tenant_id);
    let Some(event) = claimed.events.into_iter().next() else {
        state.store.unlease_callback(id, lease).await?;
        return Ok(Delivered::Nothing);
    };
    let event_id = event.event.event_id;
    let started = Instant::now();
    let sent = webhooks
        .deliver(id, (&url, &secret), "inbox.event", &event.event, now / 1000)
        .await;
    let latency = started.elapsed();
    m.webhook_latency.observe(latency.as_secs_f64());
    let now = state.now();
    let (status, retry_after) = match &sent {
        Ok(response) => {
            let retry_after = response
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(|v| switchboard_proto::parse_retry_after(v, to_timestamp(now)));
            (Some(response.status().as_u16()), retry_after)
        }
        Err(_) => (None, None),
    };
    let attempt = CallbackAttempt {
        at: to_timestamp(now),
        event_id: Some(event_id),
        kind: "delivery".to_owned(),
        status,
        error: None,
        latency_ms: latency.as_millis() as u64,
    };
    let mut record = AttemptRecord {
        tenant: callback.tenant,
        callback: id,
        lease_token: Some(lease),
        attempt,
        at: now,
        succeeded: false,
        next_attempt_at: now,
        disable: None,
    };
    let outcome = match (status, sent) {
        (Some(s), _) if (200..300).contains(&s) => {
            match inbox::ack(state, &agent, event_id, event.claim_token).await {
                Ok(_) => {}
                // The claim's lease ran out meanwhile (a very slow answer): the
                // event was handed out again and goes out again.
                Err(e) if e.code() == Some(ErrorCode::StaleClaim) => {}
                Err(e) => return Err(e),
            }
            record.succeeded = true;
            m.webhook_outcome(Outcome::Delivered);
            Delivered::Acked { status: s }
        }
        (Some(410), _) => {
            let reason = "the endpoint answered 410 Gone".to_owned();
            record.attempt.error = Some("HTTP 410 Gone".to_owned());
            record.disable = Some(reason.clone());
            release(
                state,
                &agent,
                &event,
                0,
                "HTTP 410 Gone: the callback is disabled",
            )
            .await?;
            m.webhook_outcome(Outcome::Gone);
            Delivered::Disabled { reason }
        }
        (status, sent) => {
            let error = match (status, sent) {
                (Some(s), _) => format!("HTTP {s}"),
                (None, Err(failure)) => failure.to_string(),
                (None, Ok(_)) => "no answer".to_owned(),
            };
            let streak = callback.callback.failure_streak.saturating_add(1);
            let delay = retry_after
                .filter(|_| matches!(status, Some(429 | 503)))
                .map(|d| d.min(MAX_RETRY_AFTER))
                .unwrap_or_else(|| webhooks.retry_delay(streak));
            let delay_ms = delay.as_millis() as i64;
            record.attempt.error = Some(error.clone());
            record.next_attempt_at = now + delay_ms;
            let since = callback.failing_since.unwrap_or(now);
            let limit = webhooks.config.disable_after.as_millis() as i64;
            let detail = format!("webhook delivery failed: {error}");
            release(state, &agent, &event, delay_ms, &detail).await?;
            m.webhook_outcome(Outcome::Failed);
            if now - since >= limit {
                let reason = format!(
                    "every delivery failed for {} (the last: {error})",
                    humanize(Duration::from_millis((now - since).max(0) as u64))
                );
                record.disable = Some(reason.clone());
                Delivered::Disabled { reason }
            } else {
                Delivered::Retried { error, delay }
            }
        }
    };
    let after = state.store.record_attempt(&record).await?;
    if let Some(after) = after
        && after.state == CallbackState::Disabled
        && record.disable.is_some()
    {
        tracing::warn!(
            callback_id = %id,
            agent = %after.agent,
            reason = after.disabled_reason.as_deref().unwrap_or_default(),
            "webhook callback disabled"
        );
    }
    state.hub.callbacks(callback.tenant);
    Ok(outcome)
}

/// Gives the event back for a retry (or for pull, after a 410).
async fn release(
    state: &AppState,
    agent: &crate::store::AgentRecord,
    event: &switchboard_proto::ClaimedEvent,
    delay_ms: i64,
    error: &str,
) -> ApiResult<()> {
    let args = ReleaseArgs {
        delay_ms,
        error: Some(error.to_owned()),
        terminal: false,
    };
    match inbox::release(state, agent, event.event.event_id, event.claim_token, &args).await {
        Ok(_) => Ok(()),
        // The lease ran out meanwhile: the scavenger has returned it.
        Err(e) if e.code() == Some(ErrorCode::StaleClaim) => Ok(()),
        Err(e) => Err(e),
    }
}

/// "5 days", "3 h", "40 min", "12 s".
fn humanize(d: Duration) -> String {
    let s = d.as_secs();
    match s {
        s if s >= 2 * 86_400 => format!("{} days", s / 86_400),
        s if s >= 3_600 => format!("{} h", s / 3_600),
        s if s >= 60 => format!("{} min", s / 60),
        s => format!("{s} s"),
    }
}
