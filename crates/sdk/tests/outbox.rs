//! The durable outbox against a scripted stand-in server: every rule of the state
//! machine, driven by hand through `Outbox::dispatch_due(now)` so the schedule is
//! checked to the millisecond without sleeping. The local state is a real SQLite file.
//! The stand-in publishes an idempotency key TTL at `/api/v1/capabilities` as the
//! server does (or answers 404, as a server that cannot be asked).

mod common;

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use common::{TOKEN, TestServer, problem};
use serde_json::{Value, json};
use switchboard_sdk::outbox::{EntryState, Pass};
use switchboard_sdk::privacy::{FieldKind, Gate, Schema};
use switchboard_sdk::proto::{Capabilities, ErrorCode, Limits, Problem, SendMessage};
use switchboard_sdk::{Client, LocalDb, Outbox, OutboxConfig, OutboxError, Target};

/// What the stand-in does with the next request.
#[derive(Debug, Clone)]
enum Plan {
    /// Store it and answer 201 (or replay 200 for a known key).
    Accept,
    /// Answer with this problem (status from the problem), storing nothing.
    Refuse(Problem, Option<&'static str>),
    /// Store nothing and answer only after this long (the client times out first).
    Hang(Duration),
    /// Store it, then answer only after this long (the answer is lost).
    StoreThenHang(Duration),
}

#[derive(Default)]
struct Script {
    plans: VecDeque<Plan>,
    /// Idempotency key → stored receipt.
    stored: HashMap<String, Value>,
    /// Every attempt: (path, key, body).
    attempts: Vec<(String, String, Value)>,
    /// The key TTL `/api/v1/capabilities` publishes; `None` answers 404.
    key_ttl_seconds: Option<u64>,
}

async fn capabilities(State(script): State<Shared>) -> Response {
    let Some(ttl) = script.lock().unwrap().key_ttl_seconds else {
        return StatusCode::NOT_FOUND.into_response();
    };
    axum::Json(Capabilities {
        api_version: "v1".into(),
        server_version: "stand-in".into(),
        backend: "none".into(),
        limits: Limits {
            max_body_bytes: 5 * 1024 * 1024,
            max_page_size: 1000,
            default_page_size: 100,
            max_claim_batch: 100,
            min_lease_seconds: 1,
            max_lease_seconds: 43_200,
            default_lease_seconds: 60,
            max_delay_seconds: 43_200,
            max_attempts_limit: 100,
            default_max_attempts: 5,
            idempotency_ttl_seconds: ttl,
            heartbeat_seconds: 30,
            webhooks: Default::default(),
        },
    })
    .into_response()
}

type Shared = Arc<Mutex<Script>>;

async fn messages(
    State(script): State<Shared>,
    Path((_kind, target)): Path<(String, String)>,
    headers: HeaderMap,
    body: axum::body::Bytes,
) -> Response {
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let plan = {
        let mut script = script.lock().unwrap();
        script.attempts.push((target.clone(), key.clone(), body));
        if let Some(receipt) = script.stored.get(&key) {
            return (
                StatusCode::OK,
                [("idempotent-replayed", "true")],
                axum::Json(receipt.clone()),
            )
                .into_response();
        }
        script.plans.pop_front().unwrap_or(Plan::Accept)
    };
    let store = |script: &Shared| {
        let mut script = script.lock().unwrap();
        let receipt = json!({
            "event_id": uuid::Uuid::now_v7(),
            "agent_id": uuid::Uuid::now_v7(),
            "seq": script.stored.len() + 1,
        });
        script.stored.insert(key.clone(), receipt.clone());
        receipt
    };
    match plan {
        Plan::Accept => (StatusCode::CREATED, axum::Json(store(&script))).into_response(),
        Plan::Refuse(p, retry_after) => {
            let mut response = problem(p);
            if let Some(value) = retry_after {
                response
                    .headers_mut()
                    .insert(header::RETRY_AFTER, value.parse().unwrap());
            }
            response
        }
        Plan::Hang(delay) => {
            tokio::time::sleep(delay).await;
            (StatusCode::CREATED, axum::Json(store(&script))).into_response()
        }
        Plan::StoreThenHang(delay) => {
            let receipt = store(&script);
            tokio::time::sleep(delay).await;
            (StatusCode::CREATED, axum::Json(receipt)).into_response()
        }
    }
}

struct Harness {
    server: TestServer,
    script: Shared,
    outbox: Outbox,
    db: LocalDb,
    _dir: tempfile::TempDir,
}

fn gate() -> Gate {
    Gate::new().schema(
        Schema::new("note")
            .field("text", FieldKind::Text)
            .field("n", FieldKind::Integer),
    )
}

fn config() -> OutboxConfig {
    let mut config = OutboxConfig::default();
    config.uniform = || 0.5;
    config
}

async fn harness(config: OutboxConfig) -> Harness {
    harness_with(config, Some(24 * 3600), None).await
}

/// A stand-in publishing `key_ttl_seconds`, and an outbox on `db` (a fresh file
/// when `None`).
async fn harness_with(
    config: OutboxConfig,
    key_ttl_seconds: Option<u64>,
    db: Option<(LocalDb, tempfile::TempDir)>,
) -> Harness {
    let script = Shared::default();
    script.lock().unwrap().key_ttl_seconds = key_ttl_seconds;
    let routes = Router::new()
        .route("/api/v1/{kind}/{target}/messages", post(messages))
        .route("/api/v1/capabilities", get(capabilities))
        .with_state(script.clone());
    let server = TestServer::start(routes).await;
    let client = Client::builder()
        .request_timeout(Duration::from_millis(300))
        .build(&server.url(), TOKEN)
        .unwrap();
    let (db, dir) = match db {
        Some(existing) => existing,
        None => {
            let dir = tempfile::tempdir().unwrap();
            (
                LocalDb::open(dir.path().join("agent.db")).await.unwrap(),
                dir,
            )
        }
    };
    let outbox = Outbox::open(db.clone(), &client, gate(), config)
        .await
        .unwrap();
    Harness {
        server,
        script,
        outbox,
        db,
        _dir: dir,
    }
}

impl Harness {
    fn plan(&self, plans: impl IntoIterator<Item = Plan>) {
        self.script.lock().unwrap().plans.extend(plans);
    }

    fn attempts(&self) -> Vec<(String, String, Value)> {
        self.script.lock().unwrap().attempts.clone()
    }

    fn stored(&self) -> usize {
        self.script.lock().unwrap().stored.len()
    }

    async fn note(&self, target: Target, n: i64) -> i64 {
        self.outbox
            .try_enqueue(target, "note", message(json!({"text": "hello", "n": n})))
            .await
            .unwrap()
            .id
    }

    async fn state(&self, id: i64) -> EntryState {
        self.outbox.entry(id).await.unwrap().unwrap().state
    }

    async fn pass(&self, now: i64) -> Pass {
        self.outbox.dispatch_due(now).await.unwrap()
    }
}

fn message(payload: Value) -> SendMessage {
    SendMessage {
        payload,
        ..SendMessage::default()
    }
}

fn bob() -> Target {
    Target::Agent("bob".into())
}

fn now() -> i64 {
    i64::try_from(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

fn refusal(status: u16, code: ErrorCode) -> Problem {
    let mut problem = Problem::new(code, "scripted refusal");
    problem.status = status;
    problem
}

#[tokio::test]
async fn a_timeout_before_accept_leaves_the_entry_retryable_then_the_same_key_lands_it() {
    let h = harness(config()).await;
    let id = h.note(bob(), 1).await;
    h.plan([Plan::Hang(Duration::from_secs(5))]);
    let t0 = now();
    let pass = h.pass(t0).await;
    assert_eq!((pass.sent, pass.retryable), (0, 1));
    let entry = h.outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(entry.state, EntryState::Retryable, "{entry:?}");
    assert!(entry.last_error.unwrap().contains("timed out"));
    assert_eq!(h.stored(), 0, "the stand-in never accepted it");

    let pass = h.pass(entry.next_attempt_at).await;
    assert_eq!(pass.sent, 1);
    assert_eq!(h.state(id).await, EntryState::Sent);
    let attempts = h.attempts();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].1, attempts[1].1, "the retry reuses the key");
    assert_eq!(attempts[0].2, attempts[1].2, "and the body");
    assert_eq!(h.stored(), 1);
}

#[tokio::test]
async fn a_lost_answer_then_a_replayed_200_is_accepted_once() {
    let h = harness(config()).await;
    let id = h.note(bob(), 1).await;
    h.plan([Plan::StoreThenHang(Duration::from_secs(5))]);
    let entry_due = {
        h.pass(now()).await;
        h.outbox.entry(id).await.unwrap().unwrap()
    };
    assert_eq!(entry_due.state, EntryState::Retryable);
    assert_eq!(
        h.stored(),
        1,
        "the stand-in stored it though the answer was lost"
    );

    let pass = h.pass(entry_due.next_attempt_at).await;
    assert_eq!(pass.sent, 1);
    let entry = h.outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(entry.state, EntryState::Sent);
    assert!(entry.receipt.is_some(), "the replayed receipt is kept");
    assert_eq!(h.stored(), 1, "stored once");
    assert_eq!(h.attempts().len(), 2);
    // Nothing more is sent, however late it gets.
    h.pass(now() + 86_400_000).await;
    assert_eq!(h.attempts().len(), 2);
}

#[tokio::test]
async fn a_422_goes_straight_to_poison_without_a_retry() {
    let h = harness(config()).await;
    let id = h.note(bob(), 1).await;
    h.plan([Plan::Refuse(
        refusal(422, ErrorCode::ValidationFailed),
        None,
    )]);
    let pass = h.pass(now()).await;
    assert_eq!(pass.poisoned, 1);
    let entry = h.outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(entry.state, EntryState::Poison);
    let reason = entry.last_error.unwrap();
    assert!(
        reason.contains("422") && reason.contains("validation_failed"),
        "{reason}"
    );
    h.pass(now() + 86_400_000).await;
    assert_eq!(h.attempts().len(), 1, "never retried");
    assert_eq!(h.outbox.counts().await.unwrap().poison, 1);
}

#[tokio::test]
async fn every_final_status_is_poison_and_every_transient_one_is_retryable() {
    let finals = [
        (400, ErrorCode::ValidationFailed),
        (403, ErrorCode::Forbidden),
        (404, ErrorCode::NotFound),
        (409, ErrorCode::IdempotencyKeyReused),
        (413, ErrorCode::PayloadTooLarge),
    ];
    let transients = [
        (408, ErrorCode::Internal),
        (409, ErrorCode::RequestInProgress),
        (429, ErrorCode::RateLimited),
        (500, ErrorCode::Internal),
        (503, ErrorCode::Unavailable),
        (401, ErrorCode::Unauthorized),
    ];
    for (status, code, want) in finals
        .iter()
        .map(|(s, c)| (*s, *c, EntryState::Poison))
        .chain(
            transients
                .iter()
                .map(|(s, c)| (*s, *c, EntryState::Retryable)),
        )
    {
        let h = harness(config()).await;
        let id = h.note(bob(), 1).await;
        h.plan([Plan::Refuse(refusal(status, code), None)]);
        h.pass(now()).await;
        assert_eq!(h.state(id).await, want, "HTTP {status} {code:?}");
    }
}

#[tokio::test]
async fn retry_after_30_makes_the_next_attempt_exactly_30_s_later() {
    let h = harness(config()).await;
    let id = h.note(bob(), 1).await;
    h.plan([Plan::Refuse(
        refusal(429, ErrorCode::RateLimited),
        Some("30"),
    )]);
    let t0 = now();
    h.pass(t0).await;
    let entry = h.outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(entry.state, EntryState::Retryable);
    assert_eq!(entry.next_attempt_at, t0 + 30_000);

    let pass = h.pass(t0 + 29_999).await;
    assert_eq!(pass.next_due, Some(t0 + 30_000));
    assert_eq!(h.attempts().len(), 1, "not a millisecond early");
    h.pass(t0 + 30_000).await;
    assert_eq!(h.attempts().len(), 2);
    assert_eq!(h.state(id).await, EntryState::Sent);
}

#[tokio::test]
async fn retry_after_as_an_http_date_is_honored_too() {
    let h = harness(config()).await;
    let id = h.note(bob(), 1).await;
    // A date in the past means "now": the next pass at the same time may send.
    h.plan([Plan::Refuse(
        refusal(503, ErrorCode::Unavailable),
        Some("Wed, 21 Oct 2015 07:28:00 GMT"),
    )]);
    let t0 = now();
    h.pass(t0).await;
    let entry = h.outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(entry.state, EntryState::Retryable);
    assert_eq!(entry.next_attempt_at, t0);
}

#[tokio::test]
async fn a_privacy_rejection_makes_no_http_call_and_stores_nothing() {
    let h = harness(config()).await;
    let ssn = h
        .outbox
        .try_enqueue(
            bob(),
            "note",
            message(json!({"text": "my ssn is 123-45-6789"})),
        )
        .await
        .unwrap_err();
    let key = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MaHQ\n-----END RSA PRIVATE KEY-----";
    let private_key = h
        .outbox
        .try_enqueue(bob(), "note", message(json!({"text": key})))
        .await
        .unwrap_err();
    for (error, rule) in [(ssn, "pii.ssn"), (private_key, "credential.private_key")] {
        let text = format!("{error} {error:?}");
        assert!(matches!(error, OutboxError::Blocked(_)), "{text}");
        assert!(
            text.contains(rule) && text.contains("text"),
            "names rule and path: {text}"
        );
        assert!(
            !text.contains("123-45-6789") && !text.contains("MIIEow"),
            "{text}"
        );
    }
    h.pass(now()).await;
    assert!(h.server.seen().is_empty(), "no HTTP call at all");
    assert_eq!(h.outbox.counts().await.unwrap().open(), 0, "nothing stored");
    let raw = std::fs::read(h.db.path()).unwrap();
    assert!(!raw.windows(11).any(|w| w == b"123-45-6789"));
}

#[tokio::test]
async fn unknown_fields_are_stripped_before_the_entry_is_written() {
    let h = harness(config()).await;
    let enqueued = h
        .outbox
        .try_enqueue(
            bob(),
            "note",
            message(json!({"text": "hi", "debug": {"env": "x"}})),
        )
        .await
        .unwrap();
    assert_eq!(enqueued.stripped, ["$.debug"]);
    h.pass(now()).await;
    assert_eq!(h.attempts()[0].2["payload"], json!({"text": "hi"}));
}

#[tokio::test]
async fn the_jitter_stays_inside_its_bounds_and_grows() {
    let mut cfg = OutboxConfig::default();
    cfg.base_delay = Duration::from_secs(1);
    cfg.max_delay = Duration::from_secs(60);
    let (base, cap) = (1_000, 60_000);
    let h = harness(cfg).await;
    let id = h.note(bob(), 1).await;
    h.plan((0..12).map(|_| Plan::Refuse(refusal(503, ErrorCode::Unavailable), None)));
    let mut at = now();
    let mut previous = base;
    let mut delays = Vec::new();
    for _ in 0..12 {
        h.pass(at).await;
        let entry = h.outbox.entry(id).await.unwrap().unwrap();
        assert_eq!(entry.state, EntryState::Retryable);
        let delay = entry.next_attempt_at - at;
        assert!(
            delay >= base && delay <= cap.min(previous * 3),
            "delay {delay} ms outside [{base}, min({cap}, 3 × {previous})]"
        );
        delays.push(delay);
        previous = delay;
        at = entry.next_attempt_at;
    }
    assert_eq!(h.attempts().len(), 12);
    assert!(delays.iter().any(|d| *d > 3 * base), "it grows: {delays:?}");
}

#[tokio::test]
async fn a_retryable_head_blocks_only_its_own_lane() {
    let h = harness(config()).await;
    let room_a = Target::Room("a".into());
    let room_b = Target::Room("b".into());
    // a1's first attempt fails (alone, so the script cannot hit another lane).
    let a1 = h.note(room_a.clone(), 1).await;
    h.plan([Plan::Refuse(refusal(503, ErrorCode::Unavailable), None)]);
    let t0 = now();
    h.pass(t0).await;
    let a2 = h.note(room_a.clone(), 2).await;
    let b1 = h.note(room_b.clone(), 1).await;
    let b2 = h.note(room_b.clone(), 2).await;
    let t1 = now();
    assert!(t1 < t0 + 1000, "a1 is not due again yet");
    h.pass(t1).await;
    h.pass(t1).await;
    assert_eq!(h.state(a1).await, EntryState::Retryable);
    assert_eq!(
        h.state(a2).await,
        EntryState::Queued,
        "waits behind its head"
    );
    assert_eq!(h.state(b1).await, EntryState::Sent);
    assert_eq!(h.state(b2).await, EntryState::Sent, "the other lane flowed");

    let due = h.outbox.entry(a1).await.unwrap().unwrap().next_attempt_at;
    h.pass(due).await;
    h.pass(due).await;
    assert_eq!(h.state(a2).await, EntryState::Sent);
    let order: Vec<i64> = h
        .attempts()
        .iter()
        .filter(|(target, ..)| target == "a")
        .map(|(_, _, body)| body["payload"]["n"].as_i64().unwrap())
        .collect();
    assert_eq!(order, [1, 1, 2], "in order within the lane");
}

#[tokio::test]
async fn a_full_outbox_refuses_then_enqueue_waits_for_room() {
    let mut cfg = config();
    cfg.capacity = 2;
    let h = harness(cfg).await;
    h.note(bob(), 1).await;
    h.note(bob(), 2).await;
    let full = h
        .outbox
        .try_enqueue(bob(), "note", message(json!({"n": 3})))
        .await
        .unwrap_err();
    assert!(matches!(full, OutboxError::Full { capacity: 2 }), "{full}");

    let outbox = h.outbox.clone();
    let waiting = tokio::spawn(async move {
        outbox
            .enqueue(bob(), "note", message(json!({"n": 3})))
            .await
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!waiting.is_finished(), "backpressure: it waits");
    h.pass(now()).await;
    let enqueued = tokio::time::timeout(Duration::from_secs(5), waiting)
        .await
        .expect("room was made")
        .unwrap()
        .unwrap();
    assert!(enqueued.id > 0);
}

#[tokio::test]
async fn too_large_is_refused_locally() {
    let mut cfg = config();
    cfg.max_body_bytes = 1024;
    let h = harness(cfg).await;
    let error = h
        .outbox
        .try_enqueue(bob(), "note", message(json!({"text": "a".repeat(2000)})))
        .await
        .unwrap_err();
    assert!(
        matches!(error, OutboxError::TooLarge { limit: 1024, .. }),
        "{error}"
    );
    assert_eq!(h.outbox.counts().await.unwrap().open(), 0);
}

#[tokio::test]
async fn entries_left_sending_by_a_dead_process_are_resent_with_the_same_key() {
    let h = harness(config()).await;
    let id = h.note(bob(), 1).await;
    h.plan([Plan::StoreThenHang(Duration::from_secs(5))]);
    h.pass(now()).await;
    // As if the process died mid-attempt.
    sqlx_set_sending(&h.db, id).await;
    let client = Client::new(&h.server.url(), TOKEN).unwrap();
    let reopened = Outbox::open(h.db.clone(), &client, gate(), config())
        .await
        .unwrap();
    assert_eq!(
        reopened.entry(id).await.unwrap().unwrap().state,
        EntryState::Queued
    );
    reopened.dispatch_due(now() + 600_000).await.unwrap();
    assert_eq!(
        reopened.entry(id).await.unwrap().unwrap().state,
        EntryState::Sent
    );
    let attempts = h.attempts();
    assert_eq!(attempts.len(), 2);
    assert_eq!(attempts[0].1, attempts[1].1);
    assert_eq!(h.stored(), 1);
}

async fn sqlx_set_sending(db: &LocalDb, id: i64) {
    // The outbox offers no way to do this; a second connection to the same file does.
    let url = format!("sqlite://{}", db.path().display());
    let mut conn = <sqlx::SqliteConnection as sqlx::Connection>::connect(&url)
        .await
        .unwrap();
    sqlx::query("UPDATE outbox SET state = 'sending' WHERE id = ?")
        .bind(id)
        .execute(&mut conn)
        .await
        .unwrap();
}

const HOUR: i64 = 3600 * 1000;
const DAY: i64 = 24 * HOUR;

#[tokio::test]
async fn an_entry_that_reached_the_server_is_not_resent_past_the_key_ttl_and_stays_expired() {
    let h = harness(config()).await;
    let id = h.note(bob(), 1).await;
    let queued_behind = h.note(bob(), 2).await;
    h.plan([
        Plan::Refuse(refusal(503, ErrorCode::Unavailable), None),
        Plan::Refuse(refusal(503, ErrorCode::Unavailable), None),
    ]);
    let t0 = now();
    h.pass(t0).await;
    let entry = h.outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(
        entry.first_attempt_at,
        Some(t0),
        "the 503 came from the server"
    );

    // The server keeps keys 24 h; with the 1 h margin the last resend is before 23 h.
    h.pass(t0 + 23 * HOUR - 1).await;
    assert_eq!(h.attempts().len(), 2, "still inside the window: resent");
    let pass = h.pass(t0 + 23 * HOUR).await;
    assert_eq!(pass.expired, 1);
    let entry = h.outbox.entry(id).await.unwrap().unwrap();
    assert_eq!(entry.state, EntryState::Expired);
    assert!(entry.state.is_terminal());
    assert_eq!(entry.attempts, 2, "past the window: not resent");
    let key = |i: usize| h.attempts()[i].1.clone();
    assert_eq!(h.attempts().len(), 3);
    assert_ne!(key(2), key(0), "the third POST is the next entry's");
    let reason = entry.last_error.unwrap();
    assert!(
        reason.contains("idempotency window (24 h keys, less a 1 h margin)")
            && reason.contains("twice")
            && reason.contains("(last error: HTTP 503"),
        "says why, and what the last attempt got: {reason}"
    );
    // Like poison, it no longer blocks its lane.
    assert_eq!(h.state(queued_behind).await, EntryState::Sent);

    // It stays visible past the old 7-day TTL, until its own retention (30 days).
    h.pass(t0 + 8 * DAY).await;
    let counts = h.outbox.counts().await.unwrap();
    assert_eq!(
        (counts.expired, counts.expired_removed),
        (1, 0),
        "{counts:?}"
    );
    let db = h.db.clone();
    let listed = switchboard_sdk::outbox::expired_entries(&db, 10)
        .await
        .unwrap();
    assert_eq!(listed.iter().map(|e| e.id).collect::<Vec<_>>(), [id]);
    h.pass(t0 + 23 * HOUR + 30 * DAY).await;
    let counts = h.outbox.counts().await.unwrap();
    assert_eq!(
        (counts.expired, counts.expired_removed),
        (0, 1),
        "removed after its retention, and counted: {counts:?}"
    );
}

/// The outbox's own 7-day TTL used to delete unsent entries. An entry that never
/// left the machine (every attempt failed to connect) has no key on the server, so
/// it is safe to send however late: it waits, and goes when the server is back.
#[tokio::test]
async fn an_entry_that_never_connected_is_kept_past_any_ttl_and_then_sent() {
    let dead = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let offline = Client::builder()
        .request_timeout(Duration::from_millis(300))
        .build(&dead, TOKEN)
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let db = LocalDb::open(dir.path().join("agent.db")).await.unwrap();
    let outbox = Outbox::open(db.clone(), &offline, gate(), config())
        .await
        .unwrap();
    let head = outbox
        .try_enqueue(bob(), "note", message(json!({"n": 1})))
        .await
        .unwrap()
        .id;
    let behind = outbox
        .try_enqueue(bob(), "note", message(json!({"n": 2})))
        .await
        .unwrap()
        .id;
    let t0 = now();
    outbox.dispatch_due(t0).await.unwrap();
    let entry = outbox.entry(head).await.unwrap().unwrap();
    assert_eq!(entry.state, EntryState::Retryable, "{entry:?}");
    assert_eq!(entry.first_attempt_at, None, "nothing left the machine");

    let pass = outbox.dispatch_due(t0 + 8 * DAY).await.unwrap();
    assert_eq!(pass.expired, 0);
    let counts = outbox.counts().await.unwrap();
    assert_eq!(
        (counts.open(), counts.expired, counts.expired_removed),
        (2, 0, 0),
        "past the old 7-day TTL nothing is dropped: {counts:?}"
    );
    assert_eq!(outbox.entry(head).await.unwrap().unwrap().attempts, 2);

    // The server is reachable again: both go, in order.
    let h = harness_with(config(), Some(24 * 3600), Some((db, dir))).await;
    h.pass(t0 + 8 * DAY + 600_000).await;
    h.pass(t0 + 8 * DAY + 600_000).await;
    assert_eq!(h.state(head).await, EntryState::Sent);
    assert_eq!(h.state(behind).await, EntryState::Sent);
    let order: Vec<i64> = h
        .attempts()
        .iter()
        .map(|(_, _, body)| body["payload"]["n"].as_i64().unwrap())
        .collect();
    assert_eq!(order, [1, 2]);
}

#[tokio::test]
async fn the_key_ttl_is_learned_from_the_server_and_cached_for_an_offline_start() {
    // A server keeping keys 48 h: an entry first tried 30 h ago is still resent.
    let h = harness_with(config(), Some(48 * 3600), None).await;
    assert_eq!(
        h.outbox.key_ttl().learned_at,
        None,
        "not asked before any work"
    );
    let id = h.note(bob(), 1).await;
    h.plan([Plan::Refuse(refusal(503, ErrorCode::Unavailable), None)]);
    let t0 = now();
    h.pass(t0).await;
    let learned = h.outbox.key_ttl();
    assert_eq!(
        (learned.ttl, learned.learned_at),
        (Duration::from_secs(48 * 3600), Some(t0))
    );
    h.pass(t0 + 30 * HOUR).await;
    assert_eq!(h.state(id).await, EntryState::Sent, "inside 48 h less 1 h");

    // Another process on the same file, started while the server is unreachable,
    // goes by the cached 48 h rather than the 24 h default.
    let cached = switchboard_sdk::outbox::key_ttl(&h.db).await.unwrap();
    assert_eq!(cached.ttl, Duration::from_secs(48 * 3600));
    assert!(cached.learned_at.is_some());
    let offline = Client::new("http://127.0.0.1:9", TOKEN).unwrap();
    let reopened = Outbox::open(h.db.clone(), &offline, gate(), config())
        .await
        .unwrap();
    assert_eq!(reopened.key_ttl().ttl, Duration::from_secs(48 * 3600));

    // A server that cannot be asked: the default, 24 h, which no server undercuts.
    let unknown = harness_with(config(), None, None).await;
    let id = unknown.note(bob(), 1).await;
    unknown.plan([Plan::Refuse(refusal(503, ErrorCode::Unavailable), None)]);
    let t1 = now();
    unknown.pass(t1).await;
    assert_eq!(unknown.outbox.key_ttl().ttl, Duration::from_secs(24 * 3600));
    unknown.pass(t1 + 30 * HOUR).await;
    assert_eq!(unknown.state(id).await, EntryState::Expired);
}

#[tokio::test]
async fn run_delivers_in_the_background_and_stops_on_cancel() {
    let h = harness(config()).await;
    let cancel = tokio_util::sync::CancellationToken::new();
    let runner = tokio::spawn({
        let (outbox, cancel) = (h.outbox.clone(), cancel.clone());
        async move { outbox.run(cancel).await }
    });
    let ids = [
        h.note(bob(), 1).await,
        h.note(Target::Room("r".into()), 2).await,
    ];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while h.outbox.counts().await.unwrap().sent < 2 {
        assert!(tokio::time::Instant::now() < deadline, "not delivered");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for id in ids {
        assert_eq!(h.state(id).await, EntryState::Sent);
    }
    cancel.cancel();
    runner.await.unwrap().unwrap();
    assert_eq!(h.attempts().len(), 2, "one POST per message");
}
