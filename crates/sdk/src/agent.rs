//! The agent side: sending messages, reading and claiming an inbox, the SSE wake-up.
//!
//! `{agent}` arguments take an agent id (hyphenated UUID) or the agent's name;
//! anything that implements `Display` works (`&str`, `String`, [`AgentId`]).
//!
//! The usual loop: [`Client::subscribe`] for wake-ups, then [`Client::claim`] (work
//! queue) or [`Client::poll`] (read by cursor), and [`Client::ack`] each claimed event
//! with its claim token. On `410 cursor_gone` call [`Client::snapshot`] and poll on
//! from its `resume_cursor`.
//!
//! [`AgentId`]: switchboard_proto::AgentId

use std::fmt::Display;

use reqwest::Method;
use switchboard_proto::{
    AckBatch, AckBatchResult, AckEntry, AckRequest, ClaimRequest, ClaimResponse, ClaimToken,
    ClientReport, EffectiveClientSettings, EventId, EventState, ExtendRequest, InboxPage,
    ReleaseRequest, SendMessage, SendReceipt, Snapshot,
};

use crate::call::Call;
use crate::client::Sent;
use crate::retry::Repeat;
use crate::{Client, Error, SseStream};

impl Client {
    /// `POST /agents/{agent}/messages`: puts a message into `agent`'s inbox.
    ///
    /// `idempotency_key` makes retries safe: resend the same request with the same
    /// key and the server answers with the stored receipt (see
    /// [`Client::send_message_detailed`] to tell a replay apart). Errors:
    /// `not_found` (no such agent), `validation_failed`, `payload_too_large`,
    /// `idempotency_key_required`, `idempotency_key_reused` (same key, other body),
    /// `request_in_progress` (the first request with this key is still running).
    pub async fn send_message(
        &self,
        agent: impl Display,
        message: &SendMessage,
        idempotency_key: &str,
    ) -> Result<SendReceipt, Error> {
        Ok(self
            .send_message_detailed(agent, message, idempotency_key)
            .await?
            .0)
    }

    /// [`Client::send_message`], also returning the status and whether the answer
    /// was a replay of an earlier request with the same key.
    pub async fn send_message_detailed(
        &self,
        agent: impl Display,
        message: &SendMessage,
        idempotency_key: &str,
    ) -> Result<(SendReceipt, Sent), Error> {
        let agent = agent.to_string();
        let call = Call::new(Method::POST, self.api_url(&["agents", &agent, "messages"])?)
            .json(message)?
            .idempotency_key(idempotency_key)?;
        self.fetch_with_response(call).await
    }

    /// `GET /agents/{agent}/inbox`: the events with `seq > after_cursor`, in order,
    /// without claiming them. Read on from the page's `next_cursor`.
    ///
    /// Errors: `cursor_gone` (410) when `after_cursor` is below the retention
    /// low-water mark; [`Error::oldest_cursor`] gives the oldest valid cursor.
    /// `not_found`, `validation_failed` (limit out of range).
    pub async fn poll(
        &self,
        agent: impl Display,
        after_cursor: u64,
        limit: Option<u32>,
    ) -> Result<InboxPage, Error> {
        let agent = agent.to_string();
        let mut call = Call::get(self.api_url(&["agents", &agent, "inbox"])?)
            .query("after_cursor", &after_cursor.to_string());
        if let Some(limit) = limit {
            call = call.query("limit", &limit.to_string());
        }
        self.fetch(call).await
    }

    /// `POST /agents/{agent}/inbox/claim`: claims up to `limit` claimable events
    /// (highest priority first, then sequence order), each invisible to other
    /// claimers until its lease expires. An empty list means nothing is claimable.
    ///
    /// With an `attempt_id`, the claim is safe to repeat: a repeat after a lost
    /// answer returns the same events and tokens, so this call retries it like any
    /// idempotent request. Without one, a lost answer leaves events leased to
    /// nobody until their lease expires, so it is retried only when it surely did
    /// not run.
    ///
    /// Errors: `not_found`, `validation_failed` (limit or lease out of range).
    pub async fn claim(
        &self,
        agent: impl Display,
        request: &ClaimRequest,
    ) -> Result<ClaimResponse, Error> {
        let agent = agent.to_string();
        let url = self.api_url(&["agents", &agent, "inbox", "claim"])?;
        let repeat = if request.attempt_id.is_some() {
            Repeat::Safe
        } else {
            Repeat::Claim
        };
        let call = Call::new(Method::POST, url).json(request)?.repeat(repeat);
        self.fetch(call).await
    }

    /// `POST /agents/{agent}/inbox/{event_id}/ack`: marks a claimed event completed.
    ///
    /// Errors: `stale_claim` (409) when `claim_token` is not the event's current
    /// token (the lease expired and someone else claimed it, or it was released);
    /// `not_found`.
    pub async fn ack(
        &self,
        agent: impl Display,
        event_id: EventId,
        claim_token: ClaimToken,
    ) -> Result<EventState, Error> {
        self.event_action(agent, event_id, "ack", &AckRequest { claim_token })
            .await
    }

    /// `POST /agents/{agent}/inbox/ack`: acks up to 100 claimed events in one
    /// transaction. Each entry gets its own result, in order (`state`, or the
    /// `problem` a single ack would answer); a stale entry does not fail the rest.
    ///
    /// Errors (the whole batch): `validation_failed` (empty, more than 100, an event
    /// twice), `not_found`.
    pub async fn ack_batch(
        &self,
        agent: impl Display,
        acks: &[AckEntry],
    ) -> Result<AckBatchResult, Error> {
        let agent = agent.to_string();
        let url = self.api_url(&["agents", &agent, "inbox", "ack"])?;
        // Safe to repeat, as a single ack is: a repeated entry answers as before.
        let call = Call::new(Method::POST, url)
            .json(&AckBatch {
                acks: acks.to_vec(),
                claim: None,
            })?
            .repeat(Repeat::Safe);
        self.fetch(call).await
    }

    /// `POST /agents/{agent}/inbox/ack` with a claim: acks `acks` (up to 100, may be
    /// empty) and claims as [`claim`](Self::claim) with `claim` would, in one
    /// transaction: a consumer's ack of one batch and its claim of the next cost one
    /// commit. The answer has each ack's result (as [`ack_batch`](Self::ack_batch))
    /// and the claim's in `claimed`.
    ///
    /// Retried like [`claim`](Self::claim): safe to repeat with an `attempt_id` (acks
    /// repeat as before, the claim returns the same events).
    ///
    /// Errors: `validation_failed` (more than 100 acks, an event twice, a limit or
    /// lease out of range), `not_found`.
    pub async fn ack_and_claim(
        &self,
        agent: impl Display,
        acks: &[AckEntry],
        claim: &ClaimRequest,
    ) -> Result<AckBatchResult, Error> {
        let agent = agent.to_string();
        let url = self.api_url(&["agents", &agent, "inbox", "ack"])?;
        let repeat = if claim.attempt_id.is_some() {
            Repeat::Safe
        } else {
            Repeat::Claim
        };
        let call = Call::new(Method::POST, url)
            .json(&AckBatch {
                acks: acks.to_vec(),
                claim: Some(claim.clone()),
            })?
            .repeat(repeat);
        self.fetch(call).await
    }

    /// `POST /agents/{agent}/inbox/{event_id}/release`: gives a claimed event back
    /// (pending again after `delay_seconds`), or quarantines it when `terminal` is
    /// set or its attempts are used up.
    ///
    /// Errors: `stale_claim`, `not_found`, `validation_failed`.
    pub async fn release(
        &self,
        agent: impl Display,
        event_id: EventId,
        request: &ReleaseRequest,
    ) -> Result<EventState, Error> {
        self.event_action(agent, event_id, "release", request).await
    }

    /// `POST /agents/{agent}/inbox/{event_id}/extend`: renews the visibility lease
    /// of a claimed event, from now.
    ///
    /// Errors: `stale_claim`, `not_found`, `validation_failed`.
    pub async fn extend(
        &self,
        agent: impl Display,
        event_id: EventId,
        request: &ExtendRequest,
    ) -> Result<EventState, Error> {
        self.event_action(agent, event_id, "extend", request).await
    }

    async fn event_action(
        &self,
        agent: impl Display,
        event_id: EventId,
        action: &str,
        body: &impl serde::Serialize,
    ) -> Result<EventState, Error> {
        let (agent, event_id) = (agent.to_string(), event_id.to_string());
        let url = self.api_url(&["agents", &agent, "inbox", &event_id, action])?;
        // The claim token makes a repeat harmless: a repeated ack answers as the
        // first did, a repeated extend renews from now again, and a release whose
        // answer was lost answers `stale_claim` on the repeat (the token is spent)
        // without releasing twice. So these POSTs are retried like `PUT`.
        let call = Call::new(Method::POST, url)
            .json(body)?
            .repeat(Repeat::Safe);
        self.fetch(call).await
    }

    /// `PUT /agents/{agent}/client-report`: replaces the agent's report about its
    /// own side (see [`crate::report`], which builds and sends it).
    ///
    /// Errors: `not_found`, `validation_failed` (a list or text over its bound).
    pub async fn put_client_report(
        &self,
        agent: impl Display,
        report: &ClientReport,
    ) -> Result<(), Error> {
        let agent = agent.to_string();
        let url = self.api_url(&["agents", &agent, "client-report"])?;
        self.send(Call::new(Method::PUT, url).json(report)?)
            .await
            .map(drop)
    }

    /// `GET /agents/{agent}/client-settings`: the remote client settings this
    /// agent's SDK is to obey. Every response to the agent carries them too (see
    /// [`Client::client_settings`]); this reads them on purpose, for a reporter
    /// whose reports are paused and that would otherwise send nothing.
    ///
    /// Errors: `not_found`.
    pub async fn own_client_settings(
        &self,
        agent: impl Display,
    ) -> Result<EffectiveClientSettings, Error> {
        let agent = agent.to_string();
        let url = self.api_url(&["agents", &agent, "client-settings"])?;
        self.fetch(Call::get(url)).await
    }

    /// `GET /agents/{agent}/snapshot`: the baseline for a full state sync: head and
    /// oldest cursors, the cursor to resume polling from, and counts by status.
    ///
    /// Errors: `not_found`.
    pub async fn snapshot(&self, agent: impl Display) -> Result<Snapshot, Error> {
        let agent = agent.to_string();
        self.fetch(Call::get(self.api_url(&["agents", &agent, "snapshot"])?))
            .await
    }

    /// `GET /agents/{agent}/subscribe`: the wake-up stream. Events are `heartbeat`
    /// (data `{}`) and `inbox_updated` (see [`crate::SseEvent::inbox_updated`]); no
    /// payloads travel on it, so poll or claim after a wake-up.
    ///
    /// Resolves once the server has accepted the subscription, so `unauthorized` and
    /// `not_found` come back here rather than from the stream. The stream has no
    /// request timeout (only the connect timeout) and ends, or yields an error,
    /// when the connection drops. **Reconnecting is the caller's job**: wait
    /// [`SseStream::retry`] (or a backoff), subscribe again, then poll from your
    /// cursor, since wake-ups sent while disconnected are lost. Treat a silence
    /// longer than about twice the heartbeat interval
    /// (`capabilities().limits.heartbeat_seconds`) as a dead connection.
    pub async fn subscribe(&self, agent: impl Display) -> Result<SseStream, Error> {
        let agent = agent.to_string();
        self.open_stream(self.api_url(&["agents", &agent, "subscribe"])?)
            .await
    }

    /// Opens an SSE stream at `url`.
    pub(crate) async fn open_stream(&self, url: reqwest::Url) -> Result<SseStream, Error> {
        let response = self.send(Call::stream(url)).await?;
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if !content_type.starts_with("text/event-stream") {
            return Err(Error::Decode(format!(
                "expected a text/event-stream response, got {content_type:?}"
            )));
        }
        Ok(SseStream::new(response.bytes_stream()))
    }
}
