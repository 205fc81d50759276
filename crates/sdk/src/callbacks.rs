//! Webhook callbacks (issue 14): registering one (the agent's own token, or an
//! operator), listing and removing it, the operator's controls, and [`webhook`],
//! the receiver's side (answering the challenge, verifying deliveries).
//!
//! An agent in a stable, routable place registers an HTTPS URL and a secret; the
//! server challenges the URL first, so the endpoint must already hold the secret
//! and answer with [`webhook::answer_challenge`]. Afterwards each committed event
//! of the inbox arrives there as a signed POST; check it with
//! [`webhook::verify_delivery`].

use std::fmt::Display;

use reqwest::Method;
use switchboard_proto::{
    Callback, CallbackAttempt, CallbackAttemptList, CallbackId, CallbackList, RegisterCallback,
};

use crate::call::Call;
use crate::retry::Repeat;
use crate::{Client, Error};

impl Client {
    /// `POST /agents/{agent}/callbacks`: registers the agent's webhook callback,
    /// replacing its earlier one. The server checks the URL (https, a public
    /// address), then challenges it; the answer comes only after the endpoint
    /// answered right. Make the secret with [`webhook::Secret::generate`] and
    /// configure it in the receiver *before* this call.
    ///
    /// `idempotency_key` makes retries safe, as for [`Client::send_message`]. A
    /// refused target or a failed challenge forgets the key, so the same request may
    /// be sent again once the endpoint is fixed.
    ///
    /// Errors: `validation_failed` (the secret is not `whsec_<base64 of 24..64
    /// bytes>`), `webhook_target_forbidden` (not https, a non-public address,
    /// userinfo, …), `webhook_verification_failed` (the challenge failed; the
    /// detail says how), `not_found`, `idempotency_key_reused`.
    pub async fn register_callback(
        &self,
        agent: impl Display,
        request: &RegisterCallback,
        idempotency_key: &str,
    ) -> Result<Callback, Error> {
        let agent = agent.to_string();
        let call = Call::new(
            Method::POST,
            self.api_url(&["agents", &agent, "callbacks"])?,
        )
        .json(request)?
        .idempotency_key(idempotency_key)?;
        self.fetch(call).await
    }

    /// `GET /agents/{agent}/callbacks`: the agent's callbacks (at most one), with
    /// their delivery state. Never the secret.
    ///
    /// Errors: `not_found`.
    pub async fn agent_callbacks(&self, agent: impl Display) -> Result<CallbackList, Error> {
        let agent = agent.to_string();
        self.fetch(Call::get(self.api_url(&["agents", &agent, "callbacks"])?))
            .await
    }

    /// `DELETE /agents/{agent}/callbacks/{callback_id}` (204): deliveries stop; the
    /// events stay in the inbox.
    ///
    /// Errors: `not_found` (no such agent, or the callback is not the agent's).
    pub async fn remove_callback(
        &self,
        agent: impl Display,
        callback_id: CallbackId,
    ) -> Result<(), Error> {
        let (agent, id) = (agent.to_string(), callback_id.to_string());
        let url = self.api_url(&["agents", &agent, "callbacks", &id])?;
        self.send(Call::new(Method::DELETE, url)).await.map(drop)
    }

    /// `GET /ops/callbacks`: every callback of the tenant, oldest first.
    pub async fn callbacks(&self) -> Result<CallbackList, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "callbacks"])?))
            .await
    }

    /// `POST /ops/callbacks/{id}/disable`: stops deliveries; the events wait in
    /// the inbox.
    ///
    /// Errors: `not_found`.
    pub async fn disable_callback(&self, callback_id: CallbackId) -> Result<Callback, Error> {
        self.callback_action(callback_id, "disable", Repeat::Safe)
            .await
    }

    /// `POST /ops/callbacks/{id}/enable`: resumes deliveries at once with a clean
    /// failure record.
    ///
    /// Errors: `not_found`.
    pub async fn enable_callback(&self, callback_id: CallbackId) -> Result<Callback, Error> {
        self.callback_action(callback_id, "enable", Repeat::Safe)
            .await
    }

    /// `POST /ops/callbacks/{id}/verify`: challenges the endpoint again with the
    /// stored secret (the callback's state does not change).
    ///
    /// Errors: `webhook_verification_failed` (the detail says what failed),
    /// `not_found`, `unavailable` (this instance cannot open the secret).
    pub async fn verify_callback(&self, callback_id: CallbackId) -> Result<CallbackAttempt, Error> {
        // A second challenge is as harmless as the first.
        self.callback_action(callback_id, "verify", Repeat::Safe)
            .await
    }

    /// `POST /ops/callbacks/{id}/test`: sends a `callback.test` delivery (a
    /// made-up event, in no inbox) and reports what the endpoint answered; a
    /// failing endpoint is not an error here, see the attempt's `status`/`error`.
    ///
    /// Errors: `not_found`, `unavailable`.
    pub async fn test_callback(&self, callback_id: CallbackId) -> Result<CallbackAttempt, Error> {
        // Not retried after it may have left: each try posts to the endpoint.
        self.callback_action(callback_id, "test", Repeat::Unsafe)
            .await
    }

    /// `DELETE /ops/callbacks/{id}` (204): deliveries stop; the events stay.
    ///
    /// Errors: `not_found`.
    pub async fn delete_callback(&self, callback_id: CallbackId) -> Result<(), Error> {
        let id = callback_id.to_string();
        let url = self.api_url(&["ops", "callbacks", &id])?;
        self.send(Call::new(Method::DELETE, url)).await.map(drop)
    }

    /// `GET /ops/callbacks/{id}/attempts`: the recent attempts (deliveries,
    /// challenges, tests), newest first.
    ///
    /// Errors: `not_found`.
    pub async fn callback_attempts(
        &self,
        callback_id: CallbackId,
    ) -> Result<CallbackAttemptList, Error> {
        let id = callback_id.to_string();
        self.fetch(Call::get(self.api_url(&[
            "ops",
            "callbacks",
            &id,
            "attempts",
        ])?))
        .await
    }

    async fn callback_action<T: serde::de::DeserializeOwned>(
        &self,
        callback_id: CallbackId,
        action: &str,
        repeat: Repeat,
    ) -> Result<T, Error> {
        let id = callback_id.to_string();
        let url = self.api_url(&["ops", "callbacks", &id, action])?;
        self.fetch(Call::new(Method::POST, url).repeat(repeat))
            .await
    }
}

/// The receiver's side of webhook callbacks, with nothing else to depend on.
///
/// An endpoint gets three kinds of signed POSTs: the registration challenge
/// (answer it with [`answer_challenge`]), `inbox.event` deliveries and an
/// operator's `callback.test` (check both with [`verify_delivery`]). Answer a
/// verified delivery 2xx to acknowledge it (deliveries come in order and are
/// retried until then; deduplicate on the event id), `410 Gone` to disable the
/// callback, and anything else (say 401 for a failed verification) to have it
/// retried later.
///
/// ```
/// use switchboard_sdk::webhook::{self, Outgoing, Secret, http};
/// # use switchboard_sdk::proto::*;
/// # let secret = Secret::generate();
/// # let callback_id = CallbackId::new();
/// # let now = webhook::now();
/// # let event = InboxEvent { event_id: EventId::new(), agent_id: AgentId::new(), seq: 1,
/// #     sender: Sender::Operator, room_id: None, room_seq: None, correlation_id: None,
/// #     priority: 0, status: EventStatus::Claimed, payload: Some(serde_json::json!({"n": 1})),
/// #     attempts: 1, max_attempts: 3, created_at: time::OffsetDateTime::now_utc(),
/// #     available_at: time::OffsetDateTime::now_utc(), expires_at: None, last_error: None };
/// # let body = serde_json::to_vec(&CallbackDelivery { kind: "inbox.event".into(), event: event.clone() })?;
/// # let id = event.event_id.to_string();
/// # let keyid = callback_id.to_string();
/// # let mut request = http::Request::post("https://hooks.example.com/switchboard")
/// #     .body(body.clone())?;
/// # let outgoing = Outgoing { method: "POST", authority: "hooks.example.com", path: "/switchboard",
/// #     webhook_id: &id, timestamp: now, keyid: &keyid, body: &body };
/// # for (name, value) in webhook::sign(&secret, &outgoing) {
/// #     request.headers_mut().insert(name, value.parse()?);
/// # }
/// // In the endpoint's handler (axum, hyper, …): the request's parts and its exact
/// // body bytes, the secret given at registration and the callback id it returned.
/// let (parts, body) = request.into_parts();
/// if let Some(reply) = webhook::answer_challenge(&secret, &parts, &body, webhook::now())? {
///     // Answer 200 with `reply` as the JSON body.
///     # let _ = reply;
/// } else {
///     let delivery = webhook::verify_delivery(&secret, callback_id, &parts, &body, webhook::now())?;
///     assert_eq!(delivery.kind, webhook::INBOX_EVENT);
///     assert_eq!(delivery.event.payload, Some(serde_json::json!({"n": 1})));
///     // Handle it, then answer 204 (after storing it, if it must not be lost).
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub mod webhook {
    use std::fmt::Display;

    pub use http;
    pub use switchboard_proto::{CallbackChallenge, CallbackDelivery, ChallengeResponse};
    pub use switchboard_webhook::{
        CHALLENGE_TYPE, Outgoing, Secret, SecretError, TIMESTAMP_TOLERANCE_SECS, Verified,
        VerifyError, sign,
    };

    /// The `type` of a delivery of an inbox event.
    pub const INBOX_EVENT: &str = "inbox.event";
    /// The `type` of an operator's test delivery (a made-up event, in no inbox).
    pub const CALLBACK_TEST: &str = "callback.test";

    /// Why a request was refused. Messages never contain the secret or a MAC.
    #[derive(thiserror::Error, Debug, Clone, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum ReceiveError {
        /// A signature, the digest or the timestamp did not check out.
        #[error("the request's signature does not verify: {0}")]
        Signature(#[from] VerifyError),
        /// The (signed) body is not a challenge or a delivery as the API defines.
        #[error("the body is not a Switchboard {what}: {reason}")]
        Body {
            /// `challenge` or `delivery`.
            what: &'static str,
            /// What the JSON parser said.
            reason: String,
        },
        /// A delivery of a `type` this SDK does not know.
        #[error("unknown delivery type {0:?}")]
        UnknownType(String),
        /// `webhook-id` is not the delivered event's id.
        #[error("webhook-id {webhook_id:?} is not the delivered event's id {event_id}")]
        IdMismatch {
            /// The signed `webhook-id` header.
            webhook_id: String,
            /// The event id in the body.
            event_id: String,
        },
    }

    /// The receiver's clock for `now`: Unix seconds.
    pub fn now() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
    }

    /// The answer to a registration challenge: `Ok(Some(json))` when `body` is a
    /// `callback.challenge` (send `json` back with status 200 and
    /// `Content-Type: application/json`), `Ok(None)` when it is something else
    /// (pass it to [`verify_delivery`]).
    ///
    /// The challenge's Standard Webhooks signature is checked first (`now` is Unix
    /// seconds): answering unsigned challenges would hand anyone the HMAC of any
    /// text they choose, which is exactly what forging a delivery's signature
    /// takes. (The RFC 9421 `keyid` is the callback id the registration is about
    /// to return, unknown to the endpoint yet, so only that scheme is checked.)
    pub fn answer_challenge(
        secret: &Secret,
        parts: &http::request::Parts,
        body: &[u8],
        now: i64,
    ) -> Result<Option<Vec<u8>>, ReceiveError> {
        #[derive(serde::Deserialize)]
        struct Kind<'a> {
            #[serde(rename = "type", borrow)]
            kind: Option<std::borrow::Cow<'a, str>>,
        }
        let is_challenge = serde_json::from_slice::<Kind<'_>>(body)
            .ok()
            .and_then(|k| k.kind)
            .is_some_and(|k| k == CHALLENGE_TYPE);
        if !is_challenge {
            return Ok(None);
        }
        switchboard_webhook::verify_standard(secret, &parts.headers, body, now)?;
        let challenge: CallbackChallenge =
            serde_json::from_slice(body).map_err(|e| ReceiveError::Body {
                what: "challenge",
                reason: e.to_string(),
            })?;
        let answer = ChallengeResponse {
            challenge_response: switchboard_webhook::challenge_response(
                secret,
                &challenge.challenge,
            ),
        };
        // A struct of one string serializes infallibly.
        Ok(Some(serde_json::to_vec(&answer).unwrap_or_default()))
    }

    /// Verifies a delivery and parses it: both signatures (Standard Webhooks, and
    /// RFC 9421 with `keyid` = `callback_id`, the id registration returned), the
    /// `Content-Digest`, the timestamps against `now` (Unix seconds, 300 s either
    /// way), a known `type` ([`INBOX_EVENT`] or [`CALLBACK_TEST`]), and that the
    /// signed `webhook-id` is the event's id, so the event id can be the
    /// deduplication key. `parts` gives the method, the path and the authority
    /// (the URI's, else `Host`); behind a proxy that rewrites them, rebuild `parts`
    /// with the public URL the callback was registered with.
    pub fn verify_delivery(
        secret: &Secret,
        callback_id: impl Display,
        parts: &http::request::Parts,
        body: &[u8],
        now: i64,
    ) -> Result<CallbackDelivery, ReceiveError> {
        let keyid = callback_id.to_string();
        let verified = switchboard_webhook::verify_parts(secret, &keyid, parts, body, now)?;
        let delivery: CallbackDelivery =
            serde_json::from_slice(body).map_err(|e| ReceiveError::Body {
                what: "delivery",
                reason: e.to_string(),
            })?;
        if delivery.kind != INBOX_EVENT && delivery.kind != CALLBACK_TEST {
            return Err(ReceiveError::UnknownType(delivery.kind));
        }
        let event_id = delivery.event.event_id.to_string();
        if verified.webhook_id != event_id {
            return Err(ReceiveError::IdMismatch {
                webhook_id: verified.webhook_id,
                event_id,
            });
        }
        Ok(delivery)
    }
}

#[cfg(test)]
mod tests {
    use super::webhook::{self, Outgoing, ReceiveError, Secret, VerifyError, http};
    use switchboard_proto::{
        AgentId, CallbackDelivery, CallbackId, EventId, EventStatus, InboxEvent, Sender,
    };

    const NOW: i64 = 1_750_000_000;
    const HOST: &str = "hooks.example.com:8443";
    const PATH: &str = "/hooks/agent";

    fn event() -> InboxEvent {
        let at = time::OffsetDateTime::from_unix_timestamp(NOW).unwrap();
        InboxEvent {
            event_id: EventId::new(),
            agent_id: AgentId::new(),
            seq: 7,
            sender: Sender::Operator,
            room_id: None,
            room_seq: None,
            correlation_id: Some("c-1".into()),
            priority: 0,
            status: EventStatus::Claimed,
            payload: Some(serde_json::json!({"task": "index"})),
            attempts: 1,
            max_attempts: 3,
            created_at: at,
            available_at: at,
            expires_at: None,
            last_error: None,
        }
    }

    /// A request as the server sends it, signed with `secret`, as the receiver's
    /// HTTP/1.1 stack hands it over (authority in `Host`).
    fn signed(secret: &Secret, keyid: &str, webhook_id: &str, body: &[u8]) -> http::request::Parts {
        let request = Outgoing {
            method: "POST",
            authority: HOST,
            path: PATH,
            webhook_id,
            timestamp: NOW,
            keyid,
            body,
        };
        let mut builder = http::Request::post(PATH).header("host", HOST);
        for (name, value) in webhook::sign(secret, &request) {
            builder = builder.header(name, value);
        }
        builder.body(()).unwrap().into_parts().0
    }

    fn delivery(kind: &str, event: &InboxEvent) -> Vec<u8> {
        serde_json::to_vec(&CallbackDelivery {
            kind: kind.into(),
            event: event.clone(),
        })
        .unwrap()
    }

    #[test]
    fn a_signed_delivery_verifies_and_parses() {
        let (secret, id, event) = (Secret::generate(), CallbackId::new(), event());
        let body = delivery(webhook::INBOX_EVENT, &event);
        let parts = signed(&secret, &id.to_string(), &event.event_id.to_string(), &body);
        let got = webhook::verify_delivery(&secret, id, &parts, &body, NOW + 5).unwrap();
        assert_eq!(got.kind, "inbox.event");
        assert_eq!(got.event, event);
        let test = delivery(webhook::CALLBACK_TEST, &event);
        let parts = signed(&secret, &id.to_string(), &event.event_id.to_string(), &test);
        let got = webhook::verify_delivery(&secret, id, &parts, &test, NOW).unwrap();
        assert_eq!(got.kind, "callback.test");
    }

    #[test]
    fn a_tampered_body_is_refused() {
        let (secret, id, event) = (Secret::generate(), CallbackId::new(), event());
        let body = delivery(webhook::INBOX_EVENT, &event);
        let parts = signed(&secret, &id.to_string(), &event.event_id.to_string(), &body);
        let mut other = event.clone();
        other.payload = Some(serde_json::json!({"task": "delete everything"}));
        let tampered = delivery(webhook::INBOX_EVENT, &other);
        let err = webhook::verify_delivery(&secret, id, &parts, &tampered, NOW).unwrap_err();
        assert!(matches!(err, ReceiveError::Signature(_)), "{err}");
    }

    #[test]
    fn another_secret_callback_or_clock_is_refused() {
        let (secret, id, event) = (Secret::generate(), CallbackId::new(), event());
        let body = delivery(webhook::INBOX_EVENT, &event);
        let parts = signed(&secret, &id.to_string(), &event.event_id.to_string(), &body);
        let err = webhook::verify_delivery(&Secret::generate(), id, &parts, &body, NOW);
        assert_eq!(
            err.unwrap_err(),
            ReceiveError::Signature(VerifyError::StandardSignatureMismatch)
        );
        let err = webhook::verify_delivery(&secret, CallbackId::new(), &parts, &body, NOW);
        assert!(matches!(
            err.unwrap_err(),
            ReceiveError::Signature(VerifyError::KeyidMismatch { .. })
        ));
        let err = webhook::verify_delivery(&secret, id, &parts, &body, NOW + 301);
        assert!(matches!(
            err.unwrap_err(),
            ReceiveError::Signature(VerifyError::TimestampTooOld { .. })
        ));
    }

    #[test]
    fn a_webhook_id_other_than_the_event_id_is_refused() {
        let (secret, id, event) = (Secret::generate(), CallbackId::new(), event());
        let body = delivery(webhook::INBOX_EVENT, &event);
        let parts = signed(&secret, &id.to_string(), "msg_other", &body);
        let err = webhook::verify_delivery(&secret, id, &parts, &body, NOW).unwrap_err();
        assert!(matches!(err, ReceiveError::IdMismatch { .. }), "{err}");
    }

    #[test]
    fn a_signed_body_of_another_shape_is_refused() {
        let (secret, id) = (Secret::generate(), CallbackId::new());
        let body = br#"{"type":"inbox.event","event":{"event_id":"nope"}}"#;
        let parts = signed(&secret, &id.to_string(), "msg_1", body);
        let err = webhook::verify_delivery(&secret, id, &parts, body, NOW).unwrap_err();
        assert!(matches!(err, ReceiveError::Body { .. }), "{err}");
        let event = event();
        let body = delivery("inbox.surprise", &event);
        let parts = signed(&secret, &id.to_string(), &event.event_id.to_string(), &body);
        let err = webhook::verify_delivery(&secret, id, &parts, &body, NOW).unwrap_err();
        assert_eq!(err, ReceiveError::UnknownType("inbox.surprise".into()));
    }

    #[test]
    fn a_signed_challenge_is_answered_with_the_hmac() {
        let secret = Secret::generate();
        let body = br#"{"type":"callback.challenge","challenge":"q9Zx-token"}"#;
        let parts = signed(&secret, &CallbackId::new().to_string(), "challenge_1", body);
        let reply = webhook::answer_challenge(&secret, &parts, body, NOW)
            .unwrap()
            .expect("a challenge");
        let reply: webhook::ChallengeResponse = serde_json::from_slice(&reply).unwrap();
        assert!(switchboard_webhook::verify_challenge_response(
            &secret,
            "q9Zx-token",
            &reply.challenge_response
        ));
        assert_eq!(
            reply.challenge_response,
            switchboard_webhook::challenge_response(&secret, "q9Zx-token")
        );
    }

    #[test]
    fn an_unsigned_or_forged_challenge_gets_no_answer() {
        let secret = Secret::generate();
        let body = br#"{"type":"callback.challenge","challenge":"msg_1.1750000000.{}"}"#;
        let unsigned = http::Request::post(PATH)
            .header("host", HOST)
            .body(())
            .unwrap()
            .into_parts()
            .0;
        let err = webhook::answer_challenge(&secret, &unsigned, body, NOW).unwrap_err();
        assert!(matches!(err, ReceiveError::Signature(_)), "{err}");
        let forged = signed(&Secret::generate(), "cb", "challenge_1", body);
        let err = webhook::answer_challenge(&secret, &forged, body, NOW).unwrap_err();
        assert_eq!(
            err,
            ReceiveError::Signature(VerifyError::StandardSignatureMismatch)
        );
    }

    #[test]
    fn a_delivery_is_not_a_challenge() {
        let (secret, event) = (Secret::generate(), event());
        let body = delivery(webhook::INBOX_EVENT, &event);
        let parts = signed(&secret, "cb", &event.event_id.to_string(), &body);
        assert_eq!(
            webhook::answer_challenge(&secret, &parts, &body, NOW),
            Ok(None)
        );
        assert_eq!(
            webhook::answer_challenge(&secret, &parts, b"not json", NOW),
            Ok(None)
        );
    }
}
