//! The PostgreSQL backend: several server instances on one database.
//!
//! Transactions run at READ COMMITTED. What SQLite gets from its single writer, this
//! backend gets from row locks:
//! - **I2**, per-agent order: a send locks the agent's row to take the next
//!   sequence number (`UPDATE agents SET head_seq = head_seq + 1 … RETURNING`), so a
//!   second sender to the same agent waits for the first commit and numbers after it.
//! - **Claims** lock the rows they hand out with `FOR UPDATE SKIP LOCKED`, so
//!   concurrent claimers on any instance never wait for, nor take, each other's rows.
//! - Serialization failures and deadlocks (40001, 40P01) are retried with jittered
//!   backoff, a few times ([`retrying`]); every session has a statement timeout.
//! - Wake-ups are `pg_notify` calls inside the committing transaction, so they are
//!   delivered to every instance after (and only after) the commit (I1).

mod background;
mod health;
mod inbox;
mod jobs;
mod lease_rows;
mod leases;
mod ops;
mod send;
mod wakes;

use super::*;
use crate::clock::Millis;
use crate::hooks::Hooks;
use crate::store::rows::*;
use sqlx::postgres::{PgConnectOptions, PgPoolOptions};
use sqlx::{AssertSqlSafe, PgPool, Postgres, Row};
use std::future::Future;
use std::str::FromStr;
use std::time::Duration;

pub use wakes::WAKE_CHANNEL;

/// Every statement ends within this, or fails (and the request gets a 503).
const STATEMENT_TIMEOUT: &str = "15s";
/// A transaction left idle (a crashed request) is ended by the server.
const IDLE_IN_TRANSACTION_TIMEOUT: &str = "60s";
/// How long a request waits for a pooled connection before it answers 503.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    hooks: Hooks,
    /// This process; wake-ups it published itself are not delivered twice.
    instance: String,
    /// LISTENing since `open`, so no wake-up committed after the server started is
    /// missed; `listen` takes it.
    listener: std::sync::Arc<std::sync::Mutex<Option<sqlx::postgres::PgListener>>>,
}

impl PgStore {
    /// Connects to `url` and applies migrations. Several instances may open the same
    /// database: the migrator takes an advisory lock.
    pub async fn open(url: &str, max_connections: u32, hooks: Hooks) -> StoreResult<Self> {
        let opts = PgConnectOptions::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("bad database URL: {e}")))?
            .application_name("switchboard")
            .options([
                ("statement_timeout", STATEMENT_TIMEOUT),
                (
                    "idle_in_transaction_session_timeout",
                    IDLE_IN_TRANSACTION_TIMEOUT,
                ),
            ]);
        let pool = PgPoolOptions::new()
            .max_connections(max_connections.max(2))
            .acquire_timeout(ACQUIRE_TIMEOUT)
            // A connection that died with a database restart is found and replaced
            // before a request gets it.
            .test_before_acquire(true)
            .connect_with(opts)
            .await?;
        sqlx::migrate!("../../migrations/postgres")
            .run(&pool)
            .await?;
        let listener = wakes::connect(&pool).await?;
        Ok(Self {
            pool,
            hooks,
            instance: uuid::Uuid::now_v7().to_string(),
            listener: std::sync::Arc::new(std::sync::Mutex::new(Some(listener))),
        })
    }

    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Where the shared statements read outside a write transaction.
    pub(crate) fn read_pool(&self) -> &PgPool {
        &self.pool
    }

    pub(crate) async fn begin(&self) -> StoreResult<sqlx::Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }

    /// Publishes `wakes` to the other instances, then commits: the notifications are
    /// delivered at commit, and only if it succeeds.
    pub(crate) async fn commit(
        &self,
        mut tx: sqlx::Transaction<'static, Postgres>,
        wakes: &[Wake],
    ) -> StoreResult<()> {
        wakes::publish(&mut tx, &self.instance, wakes).await?;
        tx.commit().await?;
        Ok(())
    }

    fn take_listener(&self) -> Option<sqlx::postgres::PgListener> {
        self.listener
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    pub(crate) fn instance(&self) -> &str {
        &self.instance
    }
}

/// True for errors a retry of the whole transaction may cure: a serialization
/// failure (40001) or a deadlock (40P01).
fn retryable(e: &StoreError) -> bool {
    crate::store::engine::database_error(e)
        .is_some_and(|db| matches!(db.code().as_deref(), Some("40001" | "40P01")))
}

/// Runs `attempt` (one whole transaction) again on 40001 / 40P01 (the engine's
/// loop: at most 5 times, with jittered backoff).
pub(crate) async fn retrying<T, F, Fut>(attempt: F) -> StoreResult<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = StoreResult<T>>,
{
    crate::store::engine::retry_transaction(attempt, retryable).await
}

/// Stores a token's hash with its tenant, agent and scopes.
async fn insert_token_row(
    conn: &mut sqlx::PgConnection,
    hash: &[u8],
    tenant: TenantId,
    agent: Option<AgentId>,
    scopes: &[String],
    label: &str,
    now: Millis,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO tokens (hash, tenant_id, agent_id, scopes, label, created_at) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(hash)
    .bind(tenant.to_string())
    .bind(agent.map(|a| a.to_string()))
    .bind(scopes.join(" "))
    .bind(label)
    .bind(now)
    .execute(conn)
    .await?;
    Ok(())
}

/// True for a unique violation (23505).
pub(crate) fn unique_violation(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db) if db.code().as_deref() == Some("23505"))
}

#[async_trait]
impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.pool).await?;
        Ok(())
    }

    async fn close(&self) {
        // The first listener holds a pooled connection; close would wait for it.
        drop(self.take_listener());
        self.pool.close().await;
    }

    async fn ensure_tenant(&self, name: &str, now: Millis) -> StoreResult<TenantId> {
        // Several instances may start at once: the insert is idempotent.
        sqlx::query(
            "INSERT INTO tenants (id, name, created_at) VALUES ($1, $2, $3) \
             ON CONFLICT (name) DO NOTHING",
        )
        .bind(TenantId::new().to_string())
        .bind(name)
        .bind(now)
        .execute(&self.pool)
        .await?;
        let row = sqlx::query("SELECT id FROM tenants WHERE name = $1")
            .bind(name)
            .fetch_one(&self.pool)
            .await?;
        parse_id(&row.try_get::<String, _>(0)?)
    }

    async fn insert_token(
        &self,
        hash: &[u8],
        tenant: TenantId,
        agent: Option<AgentId>,
        scopes: &[String],
        label: &str,
        now: Millis,
    ) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        insert_token_row(&mut conn, hash, tenant, agent, scopes, label, now).await
    }

    async fn token(&self, hash: &[u8]) -> StoreResult<Option<TokenRecord>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "{TOKEN_SELECT} WHERE t.hash = $1 AND t.revoked_at IS NULL"
        )))
        .bind(hash)
        .fetch_optional(&self.pool)
        .await?;
        row.as_ref().map(token_record).transpose()
    }

    async fn insert_grant(&self, grant: &NewGrant<'_>, now: Millis) -> StoreResult<()> {
        ops::insert_grant(self, grant, now).await
    }

    async fn grant(&self, hash: &[u8], kind: GrantKind, now: Millis) -> StoreResult<Option<Grant>> {
        ops::grant(self, hash, kind, now, false).await
    }

    async fn take_grant(
        &self,
        hash: &[u8],
        kind: GrantKind,
        now: Millis,
    ) -> StoreResult<Option<Grant>> {
        ops::grant(self, hash, kind, now, true).await
    }

    async fn delete_grant(&self, hash: &[u8]) -> StoreResult<()> {
        ops::delete_grant(self, hash).await
    }

    async fn create_agent(
        &self,
        tenant: TenantId,
        name: &str,
        token_hash: &[u8],
        scopes: &[String],
        now: Millis,
    ) -> StoreResult<AgentRecord> {
        let mut tx = self.begin().await?;
        let id = AgentId::new();
        let inserted = sqlx::query(
            "INSERT INTO agents (id, tenant_id, name, created_at) VALUES ($1, $2, $3, $4) \
             ON CONFLICT (tenant_id, name) DO NOTHING",
        )
        .bind(id.to_string())
        .bind(tenant.to_string())
        .bind(name)
        .bind(now)
        .execute(&mut *tx)
        .await?;
        if inserted.rows_affected() == 0 {
            return Err(StoreError::Conflict(format!(
                "an agent named {name:?} already exists in this tenant; pick another name"
            )));
        }
        let agent = AgentRecord::created(id, tenant, name, now);
        let (scopes, label) = agent.token_grant(scopes);
        insert_token_row(&mut tx, token_hash, tenant, Some(id), &scopes, &label, now).await?;
        tx.commit().await?;
        Ok(agent)
    }

    async fn agent(&self, tenant: TenantId, key: &str) -> StoreResult<AgentRecord> {
        let (column, key) = by_id_or_name::<AgentId>(key);
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT * FROM agents WHERE tenant_id = $1 AND {column} = $2"
        )))
        .bind(tenant.to_string())
        .bind(key)
        .fetch_one(&self.pool)
        .await?;
        agent_from_row(&row)
    }

    async fn touch_agent(&self, agent: AgentId, now: Millis) -> StoreResult<()> {
        // Skipped when recent: a busy agent would otherwise rewrite its row (and
        // make a dead tuple) on every request.
        sqlx::query(
            "UPDATE agents SET last_seen_at = $1 WHERE id = $2 \
             AND (last_seen_at IS NULL OR last_seen_at < $1 - 1000)",
        )
        .bind(now)
        .bind(agent.to_string())
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn depth(&self, tenant: Option<TenantId>) -> StoreResult<Vec<DepthRow>> {
        ops::depth(self, tenant).await
    }

    async fn agents(&self, tenant: TenantId) -> StoreResult<Vec<AgentRecord>> {
        let rows = sqlx::query("SELECT * FROM agents WHERE tenant_id = $1 ORDER BY name")
            .bind(tenant.to_string())
            .fetch_all(&self.pool)
            .await?;
        rows.iter().map(agent_from_row).collect()
    }

    async fn idem_begin(
        &self,
        key: &IdemKey,
        now: Millis,
        lock_ms: Millis,
        ttl_ms: Millis,
    ) -> StoreResult<IdemBegin> {
        // A key forgotten between the insert and the read is free again: start over
        // (twice at most: each time another request had to release it meanwhile).
        for _ in 0..3 {
            if let Some(begun) =
                retrying(|| send::idem_begin(self, key, now, lock_ms, ttl_ms)).await?
            {
                return Ok(begun);
            }
        }
        Ok(IdemBegin::InFlight)
    }

    async fn idem_abort(&self, key: &IdemKey) -> StoreResult<()> {
        send::idem_abort(self, key).await
    }

    async fn idem_recover(&self) -> StoreResult<u64> {
        // Other instances share the database: their in-flight keys are live. An
        // abandoned key is taken over once its lock runs out (`idem_begin`).
        Ok(0)
    }

    async fn idem_complete(&self, key: &IdemKey, response: &StoredResponse) -> StoreResult<()> {
        let mut conn = self.pool.acquire().await?;
        send::idem_store(&mut conn, key, response).await
    }

    async fn send_direct(
        &self,
        tenant: TenantId,
        to: AgentId,
        from: &Actor,
        msg: &NewMessage,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Committed<SendReceipt>> {
        retrying(|| send::send_direct(self, tenant, to, from, msg, idem, now)).await
    }

    async fn send_room(
        &self,
        tenant: TenantId,
        room: RoomId,
        from: &Actor,
        msg: &NewMessage,
        idem: Option<&IdemKey>,
        now: Millis,
    ) -> StoreResult<Committed<RoomReceipt>> {
        retrying(|| send::send_room(self, tenant, room, from, msg, idem, now)).await
    }

    async fn create_room(&self, tenant: TenantId, name: &str, now: Millis) -> StoreResult<Room> {
        send::create_room(self, tenant, name, now).await
    }

    async fn room(&self, tenant: TenantId, key: &str) -> StoreResult<Room> {
        send::room(self, tenant, key).await
    }

    async fn set_member(
        &self,
        tenant: TenantId,
        room: RoomId,
        agent: AgentId,
        member: bool,
        now: Millis,
    ) -> StoreResult<Room> {
        retrying(|| send::set_member(self, tenant, room, agent, member, now)).await
    }

    async fn poll(&self, agent: AgentId, after: u64, limit: u32) -> StoreResult<InboxPage> {
        inbox::poll(self, agent, after, limit).await
    }

    async fn claim(
        &self,
        agent: &AgentRecord,
        limit: u32,
        lease_ms: Millis,
        now: Millis,
    ) -> StoreResult<Claimed> {
        retrying(|| inbox::claim(self, agent, limit, lease_ms, now)).await
    }

    async fn ack(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        now: Millis,
    ) -> StoreResult<Acked> {
        retrying(|| inbox::ack(self, agent, event, token, now)).await
    }

    async fn ack_batch(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<StoreResult<Acked>>> {
        retrying(|| inbox::ack_batch(self, agent, entries, now)).await
    }

    async fn release(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        args: &ReleaseArgs,
        now: Millis,
    ) -> StoreResult<Committed<EventState>> {
        retrying(|| inbox::release(self, agent, event, token, args, now)).await
    }

    async fn extend(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        lease_ms: Millis,
        now: Millis,
    ) -> StoreResult<EventState> {
        retrying(|| inbox::extend(self, agent, event, token, lease_ms, now)).await
    }

    async fn snapshot(&self, agent: &AgentRecord, now: Millis) -> StoreResult<Snapshot> {
        inbox::snapshot(self, agent, now).await
    }

    async fn reap(&self, now: Millis) -> StoreResult<ReapStats> {
        retrying(|| background::reap(self, now)).await
    }

    async fn retain(&self, cutoff: Millis, now: Millis) -> StoreResult<RetentionStats> {
        retrying(|| background::retain(self, cutoff, now)).await
    }

    async fn list_events(
        &self,
        tenant: TenantId,
        query: &EventListQuery,
        limit: u32,
    ) -> StoreResult<OpsEventPage> {
        ops::list_events(self, tenant, query, limit).await
    }

    async fn event_detail(&self, tenant: TenantId, event: EventId) -> StoreResult<EventDetail> {
        ops::event_detail(self, tenant, event).await
    }

    async fn bulk(
        &self,
        tenant: TenantId,
        scope: &Scope<'_>,
        max: u64,
        actor: &Actor,
        now: Millis,
    ) -> StoreResult<Committed<(u64, i64)>> {
        retrying(|| jobs::bulk(self, tenant, scope, max, actor, now)).await
    }

    async fn audit(&self, tenant: TenantId, limit: u32) -> StoreResult<Vec<AuditEntry>> {
        jobs::audit(self, tenant, limit).await
    }

    async fn put_client_report(
        &self,
        agent: AgentId,
        report: &str,
        now: Millis,
    ) -> StoreResult<()> {
        sqlx::query(
            "INSERT INTO client_reports (agent_id, report, received_at) VALUES ($1, $2, $3) \
             ON CONFLICT (agent_id) DO UPDATE SET report = excluded.report, \
             received_at = excluded.received_at",
        )
        .bind(agent.to_string())
        .bind(report)
        .bind(now)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn client_reports(&self, tenant: TenantId) -> StoreResult<Vec<ClientReportRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "{CLIENT_REPORT_SELECT} WHERE a.tenant_id = $1 ORDER BY a.name"
        )))
        .bind(tenant.to_string())
        .fetch_all(&self.pool)
        .await?;
        rows.iter().map(client_report).collect()
    }

    async fn listen(&self, hub: crate::hub::Hub, stop: tokio_util::sync::CancellationToken) {
        wakes::listen(self, hub, stop).await;
    }

    async fn health(&self) -> StoreResult<Option<switchboard_proto::QueueTableHealth>> {
        health::table_health(self).await.map(Some)
    }
}

#[async_trait]
impl crate::store::engine::Driver for PgStore {
    type Tx = sqlx::Transaction<'static, Postgres>;
    const DIALECT: crate::store::dialect::Dialect = crate::store::dialect::Dialect::Postgres;

    fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    async fn begin_write(&self) -> StoreResult<Self::Tx> {
        self.begin().await
    }

    async fn commit(&self, tx: Self::Tx, wakes: &[Wake]) -> StoreResult<()> {
        PgStore::commit(self, tx, wakes).await
    }

    async fn retrying<T, F, Fut>(&self, attempt: F) -> StoreResult<T>
    where
        T: Send,
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = StoreResult<T>> + Send,
    {
        retrying(attempt).await
    }
}

crate::store::statements::shared_statements!(PgStore);

#[async_trait]
impl crate::store::engine::events::EventDriver for PgStore {
    /// One statement (`UPDATE … RETURNING`).
    async fn next_seq(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
    ) -> StoreResult<u64> {
        use crate::store::engine::events::EventStatements;
        self.take_seq_returning(tx, tenant, agent).await
    }

    /// The event and its first history step in one statement (one round trip).
    async fn insert_event(
        &self,
        tx: &mut Self::Tx,
        e: &crate::store::engine::events::NewEvent<'_>,
    ) -> StoreResult<()> {
        sqlx::query(
            "WITH e AS (INSERT INTO events (id, tenant_id, agent_id, seq, sender_agent_id, \
             sender_name, room_id, room_seq, correlation_id, priority, status, payload, attempts, \
             max_attempts, created_at, available_at, expires_at, updated_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, 'pending', $11, 0, $12, $13, $14, $15, $13) \
             RETURNING id) \
             INSERT INTO event_history (event_id, at, action, actor) \
             SELECT id, $13, 'created', $16 FROM e",
        )
        .bind(&e.id)
        .bind(&e.tenant)
        .bind(&e.agent)
        .bind(e.seq)
        .bind(&e.sender_agent_id)
        .bind(&e.sender_name)
        .bind(&e.room_id)
        .bind(e.room_seq)
        .bind(&e.msg.correlation_id)
        .bind(i64::from(e.msg.priority))
        .bind(&e.msg.payload)
        .bind(i64::from(e.msg.max_attempts))
        .bind(e.now)
        .bind(e.msg.available_at)
        .bind(e.msg.expires_at)
        .bind(e.from.to_string())
        .execute(&mut **tx)
        .await?;
        Ok(())
    }
}
