//! The driver suite: every driver method, on every backend (River's
//! `riverdrivertest`). It runs beside the HTTP conformance suite, which tests the
//! same logic from outside; this one pins down what each statement does, so a new
//! driver (MariaDB) is checked method by method. SQLite always; PostgreSQL with
//! `SWITCHBOARD_TEST_POSTGRES` and MariaDB with `SWITCHBOARD_TEST_MYSQL` (`cargo xtask
//! test` runs it on both).
//!
//! Each area's checks are a file here with a `check(d)` that seeds what it needs in
//! the fresh database it is given; [`every_statement`] runs them all.

mod callbacks;
mod credentials;
mod deletion;
mod directory;
mod horizons;
mod idempotency;
mod identity;
mod inbox;
mod instances;
mod jobs;
mod lease_transactions;
mod leases;
mod lineage;
mod maintenance;
mod ops;
mod record_pages;
mod records;
mod request_keys;
mod retention;
mod send;

mod signin;
mod timeline;

use crate::hooks::StoreHooks;
#[cfg(feature = "mysql")]
use crate::mysql::MySqlStore;
#[cfg(feature = "postgres")]
use crate::postgres::PgStore;
use crate::sqlite::SqliteStore;
use crate::testing::ServerDb;
use crate::*;

pub(crate) fn message(n: u64) -> NewMessage {
    NewMessage {
        payload: format!("{{\"n\":{n}}}"),
        correlation_id: None,
        priority: 0,
        available_at: 0,
        expires_at: None,
        max_attempts: 5,
    }
}

/// Every area's checks, on one backend.
/// A message with its own priority, attempt limit and times.
/// An operator's message `msg` to an inbox of `tenant`, at `now`.
pub(crate) fn operator<'a>(
    tenant: switchboard_proto::TenantId,
    msg: &'a NewMessage,
    now: clock::Millis,
) -> crate::engine::events::Envelope<'a> {
    crate::engine::events::Envelope {
        tenant,
        from: &Actor::Operator,
        room: None,
        msg,
        now,
    }
}

pub(crate) fn message_with(
    priority: i32,
    max_attempts: u32,
    available_at: i64,
    expires_at: Option<i64>,
) -> NewMessage {
    NewMessage {
        priority,
        max_attempts,
        available_at,
        expires_at,
        ..message(0)
    }
}

/// Sends `msg` to `to` from an operator at `now`; its event id.
pub(crate) async fn send<D>(
    d: &Engine<D>,
    tenant: TenantId,
    to: AgentId,
    msg: &NewMessage,
    now: i64,
) -> EventId
where
    Engine<D>: Store,
{
    d.send_direct(tenant, to, &Actor::Operator, msg, None, now)
        .await
        .expect("send")
        .value
        .event_id
}

/// The event's status, `last_error` and newest history step (action, actor, detail).
pub(crate) async fn last_step<D>(
    d: &Engine<D>,
    tenant: TenantId,
    event: EventId,
) -> (
    switchboard_proto::EventStatus,
    Option<String>,
    (String, String, Option<String>),
)
where
    Engine<D>: Store,
{
    let detail = d.event_detail(tenant, event).await.expect("event detail");
    let step = detail.history.last().expect("a history step").clone();
    (
        detail.event.event.status,
        detail.event.event.last_error,
        (step.action, step.actor, step.detail),
    )
}

async fn every_statement<D>(d: &Engine<D>)
where
    Engine<D>: Store,
    D: super::records::RecordStatements
        + super::leases::LeaseDriver
        + super::idempotency::IdemStatements
        + super::send::SendStatements
        + super::directory::DirectoryStatements
        + super::jobs::JobStatements
        + super::inbox_transactions::InboxDriver
        + super::lineage::LineageStatements,
{
    callbacks::check(d).await;
    lineage::check(d).await;
    records::check(d).await;
    record_pages::check(d).await;
    leases::check(d).await;
    idempotency::check(d).await;
    identity::check(d).await;
    deletion::check(d).await;
    signin::check(d).await;
    request_keys::check(d).await;
    instances::check(d).await;
    send::check(d).await;
    directory::check(d).await;
    ops::check(d).await;
    jobs::check(d).await;
    inbox::check(d).await;
    maintenance::check(d).await;
    timeline::check(d).await;
    timeline::races(d).await;
    horizons::check(d).await;
}

#[tokio::test]
async fn every_statement_on_sqlite() {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}", dir.path().join("suite.db").display());
    let store = SqliteStore::open(&url, "normal", StoreHooks::default())
        .await
        .expect("open");
    every_statement(&store).await;
    store.close().await;
}

#[cfg(feature = "postgres")]
#[tokio::test]
#[ignore = "needs PostgreSQL: cargo xtask test runs it there with --include-ignored"]
async fn every_statement_on_postgres() {
    let db = ServerDb::<sqlx::Postgres>::create("SWITCHBOARD_TEST_POSTGRES", "driver").await;
    let store = PgStore::open(&db.url, 4, StoreHooks::default())
        .await
        .expect("open");
    every_statement(&store).await;
    store.close().await;
    db.drop(" WITH (FORCE)").await;
}

#[cfg(feature = "mysql")]
#[tokio::test]
#[ignore = "needs MariaDB or MySQL: cargo xtask test runs it there with --include-ignored"]
async fn every_statement_on_mysql() {
    let db = ServerDb::<sqlx::MySql>::create("SWITCHBOARD_TEST_MYSQL", "driver").await;
    let store = MySqlStore::open(&db.url, 4, StoreHooks::default())
        .await
        .expect("open");
    every_statement(&store).await;
    store.close().await;
    db.drop("").await;
}

/// The audit note of an operator's action in the suite.
pub(super) fn note() -> AuditNote {
    AuditNote::new(&Actor::Operator, "suite")
}

/// The audit note of an action by `actor` (an `Actor`'s text) in the suite.
pub(super) fn note_by(actor: &str) -> AuditNote {
    AuditNote {
        actor: actor.to_owned(),
        target: "suite".to_owned(),
        detail: None,
    }
}

/// A SQLite database of the schema of migration `version` and the rows of
/// `statements` (an upgrade test then opens it, migrating to the newest): its
/// directory (kept while the test runs) and URL.
pub(super) async fn old_sqlite_database(
    version: i64,
    statements: &[String],
) -> (tempfile::TempDir, String) {
    let dir = tempfile::tempdir().expect("temp dir");
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("old.db").display());
    let pool = sqlx::SqlitePool::connect(&url).await.expect("connect");
    let mut before = sqlx::migrate!("../../migrations/sqlite");
    before.migrations = before
        .migrations
        .iter()
        .filter(|m| m.version <= version)
        .cloned()
        .collect::<Vec<_>>()
        .into();
    before.run(&pool).await.expect("the old schema");
    for statement in statements {
        sqlx::raw_sql(sqlx::AssertSqlSafe(statement.clone()))
            .execute(&pool)
            .await
            .expect("old rows");
    }
    pool.close().await;
    (dir, url)
}
