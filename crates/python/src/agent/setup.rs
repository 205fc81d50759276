//! What `Agent`'s Python methods stand on: opening an agent over a client (the
//! gate, the state file, the background delivery), the consumer, and the helpers
//! that turn Python arguments into the SDK's.

use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use switchboard_sdk::consumer::ConsumerConfig;
use switchboard_sdk::outbox::{EntryState, OutboxConfig, OutboxError};
use switchboard_sdk::privacy::DEFAULT_SCHEMAS;
use switchboard_sdk::proto::SendMessage;
use switchboard_sdk::{Client, Consumer, Gate, LocalDb, Outbox, Target};
use tokio_util::sync::CancellationToken;

use crate::errors::{delivery_refused, outbox_error};
use crate::json::to_json;
use crate::results::Receipt;
use crate::wait::{quick, runtime};

use super::{Agent, DEFAULT_MESSAGE_TYPE, STATE_FILE};

impl Agent {
    /// The agent over `client`: the gate with `schemas`, the state file in
    /// `state`, the background delivery when `deliver`.
    pub(super) fn open(
        py: Python<'_>,
        client: Client,
        name: Option<String>,
        state: &std::path::Path,
        schemas: Option<&Bound<'_, PyAny>>,
        deliver: bool,
    ) -> PyResult<Self> {
        let schemas = match schemas {
            None => DEFAULT_SCHEMAS.to_owned(),
            Some(s) => match s.extract::<String>() {
                Ok(text) => text,
                Err(_) => to_json(s)?.to_string(),
            },
        };
        let gate = Gate::new()
            .load_schemas(&schemas)
            .map_err(|e| PyValueError::new_err(format!("schemas: {e}")))?;
        let path = state.join(STATE_FILE);
        let (db, outbox) = quick(py, async {
            let db = LocalDb::open(&path).await.map_err(OutboxError::from)?;
            let outbox = Outbox::open(db.clone(), &client, gate, OutboxConfig::default()).await?;
            Ok::<_, OutboxError>((db, outbox))
        })
        .map_err(outbox_error)?;
        let stop_delivery = CancellationToken::new();
        let delivering = deliver.then(|| {
            let (outbox, stop) = (outbox.clone(), stop_delivery.clone());
            runtime().spawn(async move { outbox.run(stop).await })
        });
        Ok(Self {
            name,
            client,
            db,
            outbox,
            stop_delivery,
            delivering: Mutex::new(delivering),
            mine: Mutex::default(),
            calls: Mutex::default(),
            streams: Mutex::default(),
        })
    }

    /// The SDK consumer `run()` and `events()` (`call`, for the error) use.
    pub(super) fn consumer(
        &self,
        call: &str,
        stop_when_idle: bool,
        lease_seconds: u64,
        batch: u32,
        max_local_failures: u32,
        retry_base: f64,
    ) -> PyResult<Consumer> {
        let Some(name) = self.name.clone() else {
            return Err(PyValueError::new_err(format!(
                "{call}() needs the agent's name: Agent(..., name=NAME)"
            )));
        };
        let mut config = ConsumerConfig::default();
        config.stop_when_idle = stop_when_idle;
        // A consumer that stops when idle needs no wake-ups.
        config.sse = !stop_when_idle;
        config.lease = Duration::from_secs(lease_seconds.max(1));
        config.batch = batch.clamp(1, 100);
        config.max_local_failures = max_local_failures.max(1);
        config.retry_base = seconds(retry_base, "retry_base")?;
        config.retry_cap = config.retry_cap.max(config.retry_base);
        Ok(Consumer::new(
            self.client.clone(),
            name,
            self.db.clone(),
            config,
        ))
    }

    /// A cancellation token for one `flush` or `run`, fired by `stop`.
    pub(super) fn call_token(&self) -> CancellationToken {
        self.calls
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .child_token()
    }

    pub(super) fn enqueue(
        &self,
        py: Python<'_>,
        target: Target,
        message_type: Option<&str>,
        message: SendMessage,
    ) -> PyResult<Receipt> {
        let message_type = message_type.unwrap_or(DEFAULT_MESSAGE_TYPE);
        let lane = target.lane();
        let enqueued = quick(py, self.outbox.try_enqueue(target, message_type, message))
            .map_err(outbox_error)?;
        self.mine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((enqueued.id, lane.clone()));
        Ok(Receipt {
            outbox_id: enqueued.id,
            target: lane,
            stripped: enqueued.stripped,
        })
    }

    /// Forgets this object's entries that ended; raises for the first one the
    /// server refused (POISON) or that expired unsent.
    pub(super) fn refused(&self, py: Python<'_>) -> PyResult<()> {
        let mine = self.mine.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let mut ended = Vec::new();
        let mut first_refusal = None;
        for (id, lane) in mine {
            let entry = quick(py, self.outbox.entry(id)).map_err(outbox_error)?;
            match entry {
                Some(e) if !e.state.is_terminal() => continue,
                Some(e)
                    if matches!(e.state, EntryState::Poison | EntryState::Expired)
                        && first_refusal.is_none() =>
                {
                    let reason = e.last_error.unwrap_or_else(|| e.state.to_string());
                    first_refusal = Some(delivery_refused(id, &lane, &reason));
                }
                _ => {}
            }
            ended.push(id);
        }
        self.mine
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(id, _)| !ended.contains(id));
        first_refusal.map_or(Ok(()), Err)
    }
}

/// The message for a payload.
pub(super) fn message(
    payload: &Bound<'_, PyAny>,
    correlation_id: Option<String>,
    priority: Option<i32>,
) -> PyResult<SendMessage> {
    Ok(SendMessage {
        payload: to_json(payload)?,
        correlation_id,
        priority,
        ..SendMessage::default()
    })
}

/// Delivery passes until no entry is open (returns 0), `timeout` passes or
/// `cancel` fires (returns how many are still open). Each pass finishes its
/// attempts, so nothing is left `SENDING`.
pub(super) async fn drain(
    outbox: &Outbox,
    timeout: Duration,
    cancel: &CancellationToken,
) -> Result<u64, OutboxError> {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let pass = outbox.dispatch_due(now_ms()).await?;
        let open = outbox.counts().await?.open();
        let now = tokio::time::Instant::now();
        if open == 0 || now >= deadline || cancel.is_cancelled() {
            return Ok(open);
        }
        // Until the next head is due; at most 1 s (another process, or the
        // background delivery, may change things meanwhile), at least 10 ms.
        let due = pass
            .next_due
            .map_or(200, |due| due - now_ms())
            .clamp(10, 1000);
        let wait = Duration::from_millis(u64::try_from(due).unwrap_or(10)).min(deadline - now);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = cancel.cancelled() => {}
        }
    }
}

pub(super) fn seconds(value: f64, what: &str) -> PyResult<Duration> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PyValueError::new_err(format!("{what} must be a number of seconds >= 0")))
}

/// Wall-clock Unix milliseconds (the outbox's clock).
pub(super) fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
