//! The SQLite backend: the embedded default.
//!
//! Writes are serialized through a pool of exactly one connection and start with
//! `BEGIN IMMEDIATE`, so per-agent sequence numbers are allocated in commit order
//! (I2) and no writer ever sees `SQLITE_BUSY` from another writer of this process.
//! Reads use a separate pool; in WAL mode they run concurrently with the writer and
//! each read transaction sees one consistent snapshot.

mod background;
mod inbox;
mod jobs;
mod lease_rows;
mod leases;
mod ops;
mod rows;
mod send;

use super::*;
use crate::clock::Millis;
use crate::hooks::Hooks;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};
use sqlx::{AssertSqlSafe, Row, SqlitePool};
use std::str::FromStr;
use std::time::Duration;

pub(crate) use rows::*;

#[derive(Clone)]
pub struct SqliteStore {
    /// The single writer connection. One connection, so writes never contend.
    write: SqlitePool,
    /// Readers (WAL snapshots). The same pool as `write` for an in-memory database.
    read: SqlitePool,
    hooks: Hooks,
    /// An exclusive lock on `<file>.lock`, held while the store lives: one process
    /// owns a database file, which is what makes the single writer safe.
    _owner: Option<std::sync::Arc<std::fs::File>>,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `url` and applies migrations.
    pub async fn open(url: &str, synchronous: &str, hooks: Hooks) -> StoreResult<Self> {
        let sync = match synchronous.to_ascii_lowercase().as_str() {
            "full" => SqliteSynchronous::Full,
            "normal" => SqliteSynchronous::Normal,
            "extra" => SqliteSynchronous::Extra,
            "off" => SqliteSynchronous::Off,
            other => {
                return Err(StoreError::Invalid(format!(
                    "sqlite synchronous must be full, normal, extra or off, not {other:?}"
                )));
            }
        };
        let memory = url.contains(":memory:") || url.contains("mode=memory");
        let owner = if memory {
            None
        } else {
            Some(std::sync::Arc::new(lock_owner(url)?))
        };
        let opts = SqliteConnectOptions::from_str(url)
            .map_err(|e| StoreError::Invalid(format!("bad database URL {url:?}: {e}")))?
            .create_if_missing(true)
            .foreign_keys(true)
            .busy_timeout(Duration::from_secs(10))
            .synchronous(sync);
        let opts = if memory {
            opts
        } else {
            opts.journal_mode(SqliteJournalMode::Wal)
        };
        let write = SqlitePoolOptions::new()
            .max_connections(1)
            .min_connections(1)
            // A local file cannot drop a connection; the ping per acquire only costs
            // a round trip to the SQLite worker thread.
            .test_before_acquire(false)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.clone())
            .await?;
        sqlx::migrate!("../../migrations/sqlite")
            .run(&write)
            .await?;
        let read = if memory {
            write.clone()
        } else {
            SqlitePoolOptions::new()
                .max_connections(4)
                .test_before_acquire(false)
                .acquire_timeout(Duration::from_secs(30))
                .connect_with(opts.read_only(true))
                .await?
        };
        Ok(Self {
            write,
            read,
            hooks,
            _owner: owner,
        })
    }

    pub(crate) async fn begin_write(
        &self,
    ) -> StoreResult<sqlx::Transaction<'static, sqlx::Sqlite>> {
        Ok(self.write.begin_with("BEGIN IMMEDIATE").await?)
    }

    pub(crate) fn read(&self) -> &SqlitePool {
        &self.read
    }

    /// Where the shared statements read outside a write transaction.
    pub(crate) fn read_pool(&self) -> &SqlitePool {
        &self.read
    }

    /// The `synchronous` pragma in force (for `switchboard doctor` and diagnostics).
    pub async fn synchronous(&self) -> StoreResult<i64> {
        let row = sqlx::query("PRAGMA synchronous")
            .fetch_one(&self.write)
            .await?;
        Ok(row.try_get(0)?)
    }
}

/// Stores a token's hash with its tenant, agent and scopes.
async fn insert_token_row(
    conn: &mut sqlx::SqliteConnection,
    hash: &[u8],
    tenant: TenantId,
    agent: Option<AgentId>,
    scopes: &[String],
    label: &str,
    now: Millis,
) -> StoreResult<()> {
    sqlx::query(
        "INSERT INTO tokens (hash, tenant_id, agent_id, scopes, label, created_at) \
         VALUES (?, ?, ?, ?, ?, ?)",
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

/// Takes the exclusive lock that makes this process the file's only server.
fn lock_owner(url: &str) -> StoreResult<std::fs::File> {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:")
        .split('?')
        .next()
        .unwrap_or_default();
    let lock_path = format!("{path}.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| StoreError::Invalid(format!("cannot open {lock_path}: {e}")))?;
    match file.try_lock() {
        Ok(()) => Ok(file),
        Err(std::fs::TryLockError::WouldBlock) => Err(StoreError::Invalid(format!(
            "another switchboard process is serving {path}; stop it, or pass another --database-url"
        ))),
        Err(std::fs::TryLockError::Error(e)) => {
            Err(StoreError::Invalid(format!("cannot lock {lock_path}: {e}")))
        }
    }
}

#[async_trait]
impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    async fn ping(&self) -> StoreResult<()> {
        sqlx::query("SELECT 1").execute(&self.read).await?;
        Ok(())
    }

    async fn close(&self) {
        self.read.close().await;
        self.write.close().await;
    }

    async fn ensure_tenant(&self, name: &str, now: Millis) -> StoreResult<TenantId> {
        let mut tx = self.begin_write().await?;
        let found = sqlx::query("SELECT id FROM tenants WHERE name = ?")
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        let id = match found {
            Some(row) => parse_id(&row.try_get::<String, _>(0)?)?,
            None => {
                let id = TenantId::new();
                sqlx::query("INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)")
                    .bind(id.to_string())
                    .bind(name)
                    .bind(now)
                    .execute(&mut *tx)
                    .await?;
                id
            }
        };
        tx.commit().await?;
        Ok(id)
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
        let mut conn = self.write.acquire().await?;
        insert_token_row(&mut conn, hash, tenant, agent, scopes, label, now).await?;
        Ok(())
    }

    async fn token(&self, hash: &[u8]) -> StoreResult<Option<TokenRecord>> {
        let row = sqlx::query(AssertSqlSafe(format!(
            "{TOKEN_SELECT} WHERE t.hash = ? AND t.revoked_at IS NULL"
        )))
        .bind(hash)
        .fetch_optional(&self.read)
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
        let mut tx = self.begin_write().await?;
        let taken = sqlx::query("SELECT 1 FROM agents WHERE tenant_id = ? AND name = ?")
            .bind(tenant.to_string())
            .bind(name)
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Err(StoreError::Conflict(format!(
                "an agent named {name:?} already exists in this tenant; pick another name"
            )));
        }
        let id = AgentId::new();
        sqlx::query("INSERT INTO agents (id, tenant_id, name, created_at) VALUES (?, ?, ?, ?)")
            .bind(id.to_string())
            .bind(tenant.to_string())
            .bind(name)
            .bind(now)
            .execute(&mut *tx)
            .await?;
        let agent = AgentRecord::created(id, tenant, name, now);
        let (scopes, label) = agent.token_grant(scopes);
        insert_token_row(&mut tx, token_hash, tenant, Some(id), &scopes, &label, now).await?;
        tx.commit().await?;
        Ok(agent)
    }

    async fn agent(&self, tenant: TenantId, key: &str) -> StoreResult<AgentRecord> {
        let (column, key) = by_id_or_name::<AgentId>(key);
        let row = sqlx::query(AssertSqlSafe(format!(
            "SELECT * FROM agents WHERE tenant_id = ? AND {column} = ?"
        )))
        .bind(tenant.to_string())
        .bind(key)
        .fetch_one(&self.read)
        .await?;
        agent_from_row(&row)
    }

    async fn touch_agent(&self, agent: AgentId, now: Millis) -> StoreResult<()> {
        sqlx::query("UPDATE agents SET last_seen_at = ? WHERE id = ?")
            .bind(now)
            .bind(agent.to_string())
            .execute(&self.write)
            .await?;
        Ok(())
    }

    async fn depth(&self, tenant: Option<TenantId>) -> StoreResult<Vec<DepthRow>> {
        ops::depth(self, tenant).await
    }

    async fn agents(&self, tenant: TenantId) -> StoreResult<Vec<AgentRecord>> {
        let rows = sqlx::query("SELECT * FROM agents WHERE tenant_id = ? ORDER BY name")
            .bind(tenant.to_string())
            .fetch_all(&self.read)
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
        send::idem_begin(self, key, now, lock_ms, ttl_ms).await
    }

    async fn idem_abort(&self, key: &IdemKey) -> StoreResult<()> {
        send::idem_abort(self, key).await
    }

    async fn idem_recover(&self) -> StoreResult<u64> {
        // The write pool holds the only writer of this file, so any in-flight record
        // now belongs to a process that is gone: its transaction never committed.
        Ok(
            sqlx::query("DELETE FROM idempotency_keys WHERE state = 'in_flight'")
                .execute(&self.write)
                .await?
                .rows_affected(),
        )
    }

    async fn idem_complete(&self, key: &IdemKey, response: &StoredResponse) -> StoreResult<()> {
        let mut tx = self.begin_write().await?;
        send::idem_store(&mut tx, key, response).await?;
        tx.commit().await?;
        Ok(())
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
        send::send_direct(self, tenant, to, from, msg, idem, now).await
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
        send::send_room(self, tenant, room, from, msg, idem, now).await
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
        send::set_member(self, tenant, room, agent, member, now).await
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
        inbox::claim(self, agent, limit, lease_ms, now).await
    }

    async fn ack(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        now: Millis,
    ) -> StoreResult<Acked> {
        inbox::ack(self, agent, event, token, now).await
    }

    async fn ack_batch(
        &self,
        agent: &AgentRecord,
        entries: &[(EventId, ClaimToken)],
        now: Millis,
    ) -> StoreResult<Vec<StoreResult<Acked>>> {
        inbox::ack_batch(self, agent, entries, now).await
    }

    async fn release(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        args: &ReleaseArgs,
        now: Millis,
    ) -> StoreResult<Committed<EventState>> {
        inbox::release(self, agent, event, token, args, now).await
    }

    async fn extend(
        &self,
        agent: &AgentRecord,
        event: EventId,
        token: ClaimToken,
        lease_ms: Millis,
        now: Millis,
    ) -> StoreResult<EventState> {
        inbox::extend(self, agent, event, token, lease_ms, now).await
    }

    async fn snapshot(&self, agent: &AgentRecord, now: Millis) -> StoreResult<Snapshot> {
        inbox::snapshot(self, agent, now).await
    }

    async fn reap(&self, now: Millis) -> StoreResult<ReapStats> {
        background::reap(self, now).await
    }

    async fn retain(&self, cutoff: Millis, now: Millis) -> StoreResult<RetentionStats> {
        background::retain(self, cutoff, now).await
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
        jobs::bulk(self, tenant, scope, max, actor, now).await
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
            "INSERT INTO client_reports (agent_id, report, received_at) VALUES (?, ?, ?) \
             ON CONFLICT (agent_id) DO UPDATE SET report = excluded.report, \
             received_at = excluded.received_at",
        )
        .bind(agent.to_string())
        .bind(report)
        .bind(now)
        .execute(&self.write)
        .await?;
        Ok(())
    }

    async fn client_reports(&self, tenant: TenantId) -> StoreResult<Vec<ClientReportRow>> {
        let rows = sqlx::query(AssertSqlSafe(format!(
            "{CLIENT_REPORT_SELECT} WHERE a.tenant_id = ? ORDER BY a.name"
        )))
        .bind(tenant.to_string())
        .fetch_all(&self.read)
        .await?;
        rows.iter().map(client_report).collect()
    }
}

#[async_trait::async_trait]
impl crate::store::engine::Driver for SqliteStore {
    type Tx = sqlx::Transaction<'static, sqlx::Sqlite>;
    const DIALECT: crate::store::dialect::Dialect = crate::store::dialect::Dialect::Sqlite;

    fn hooks(&self) -> &Hooks {
        &self.hooks
    }

    async fn begin_write(&self) -> StoreResult<Self::Tx> {
        SqliteStore::begin_write(self).await
    }

    /// One process owns the file: nobody else needs to hear of `wakes`.
    async fn commit(&self, tx: Self::Tx, _wakes: &[Wake]) -> StoreResult<()> {
        Ok(tx.commit().await?)
    }
}

crate::store::statements::shared_statements!(SqliteStore);

/// SQLite runs every statement in its portable shape, but takes a sequence number
/// in one (`UPDATE … RETURNING`).
#[async_trait]
impl crate::store::engine::events::EventDriver for SqliteStore {
    async fn next_seq(
        &self,
        tx: &mut Self::Tx,
        tenant: TenantId,
        agent: AgentId,
    ) -> StoreResult<u64> {
        use crate::store::engine::events::EventStatements;
        self.take_seq_returning(tx, tenant, agent).await
    }
}
