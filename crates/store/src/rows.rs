//! Row mapping shared by the three backends. The schemas have the same tables and
//! column types (text ids, 64-bit integer times), so one mapping reads a row of any;
//! [`Cols`] is the few typed getters it needs, for `SqliteRow`, `PgRow` and `MySqlRow`.
//! An id column is read as its newtype ([`Cols::id`]): the ids of
//! `switchboard-proto` decode themselves (its `sqlx` feature), as statements bind
//! them as they are.

use crate::clock::to_timestamp;
use crate::{AgentRecord, Grant, StoreError, StoreResult, TokenRecord};
use std::str::FromStr;
use switchboard_proto::{
    AuditEntry, BulkAction, ClientSettings, EventState, EventStatus, InboxEvent, Job, JobState,
    OpsEvent, Sender, StatusCounts,
};

/// The columns `event_from_row` reads, in a SELECT or a RETURNING clause.
pub(crate) const EVENT_COLS: &str = "id, agent_id, seq, sender_agent_id, sender_name, room_id, \
     room_seq, correlation_id, priority, status, payload, attempts, max_attempts, created_at, \
     available_at, expires_at, last_error, lease_expires_at, claim_token";

/// The columns `state_from_row` reads.
pub(crate) const STATE_COLS: &str = "id, status, attempts, lease_expires_at, available_at";

/// Statuses whose events still need work.
pub(crate) const OPEN_STATUSES: &str = "('pending','claimed','quarantined')";

/// Typed column getters by name.
pub(crate) trait Cols {
    fn text(&self, col: &str) -> StoreResult<String>;
    fn opt_text(&self, col: &str) -> StoreResult<Option<String>>;
    fn int(&self, col: &str) -> StoreResult<i64>;
    fn opt_int(&self, col: &str) -> StoreResult<Option<i64>>;
    fn bytes(&self, col: &str) -> StoreResult<Vec<u8>>;
    fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>>;
    /// An id column, decoded by the id's own sqlx `Decode`.
    fn id<T: StoredId>(&self, col: &str) -> StoreResult<T> {
        self.opt_id(col)?.ok_or_else(|| {
            StoreError::Database(sqlx::Error::Decode(
                format!("column {col:?} holds no id").into(),
            ))
        })
    }
    fn opt_id<T: StoredId>(&self, col: &str) -> StoreResult<Option<T>>;
}

/// An id newtype of `switchboard-proto`, which decodes itself from its text column
/// (the proto's `sqlx` feature) on each backend.
pub(crate) trait StoredId: Sized {
    #[cfg(feature = "sqlite")]
    fn from_sqlite(row: &sqlx::sqlite::SqliteRow, col: &str) -> sqlx::Result<Option<Self>>;
    #[cfg(feature = "postgres")]
    fn from_postgres(row: &sqlx::postgres::PgRow, col: &str) -> sqlx::Result<Option<Self>>;
    #[cfg(feature = "mysql")]
    fn from_mysql(row: &sqlx::mysql::MySqlRow, col: &str) -> sqlx::Result<Option<Self>>;
}

macro_rules! stored_ids {
    ($($id:ty),*) => {$(
        impl StoredId for $id {
            #[cfg(feature = "sqlite")]
            fn from_sqlite(row: &sqlx::sqlite::SqliteRow, col: &str) -> sqlx::Result<Option<Self>> {
                sqlx::Row::try_get(row, col)
            }
            #[cfg(feature = "postgres")]
            fn from_postgres(row: &sqlx::postgres::PgRow, col: &str) -> sqlx::Result<Option<Self>> {
                sqlx::Row::try_get(row, col)
            }
            #[cfg(feature = "mysql")]
            fn from_mysql(row: &sqlx::mysql::MySqlRow, col: &str) -> sqlx::Result<Option<Self>> {
                sqlx::Row::try_get(row, col)
            }
        }
    )*};
}
stored_ids!(
    switchboard_proto::TenantId,
    switchboard_proto::AgentId,
    switchboard_proto::EventId,
    switchboard_proto::RoomId,
    switchboard_proto::ClaimToken,
    switchboard_proto::MemoryId,
    switchboard_proto::LeaseId,
    switchboard_proto::CallbackId
);

macro_rules! cols_for {
    ($row:ty, $from:ident) => {
        impl Cols for $row {
            fn text(&self, col: &str) -> StoreResult<String> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn opt_text(&self, col: &str) -> StoreResult<Option<String>> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn int(&self, col: &str) -> StoreResult<i64> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn opt_int(&self, col: &str) -> StoreResult<Option<i64>> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn bytes(&self, col: &str) -> StoreResult<Vec<u8>> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn opt_bytes(&self, col: &str) -> StoreResult<Option<Vec<u8>>> {
                Ok(sqlx::Row::try_get(self, col)?)
            }
            fn opt_id<T: StoredId>(&self, col: &str) -> StoreResult<Option<T>> {
                Ok(T::$from(self, col)?)
            }
        }
    };
}
#[cfg(feature = "sqlite")]
cols_for!(sqlx::sqlite::SqliteRow, from_sqlite);
#[cfg(feature = "postgres")]
cols_for!(sqlx::postgres::PgRow, from_postgres);
#[cfg(feature = "mysql")]
cols_for!(sqlx::mysql::MySqlRow, from_mysql);

pub(crate) fn parse_id<T: FromStr>(s: &str) -> StoreResult<T> {
    T::from_str(s).map_err(|_| {
        StoreError::Database(sqlx::Error::Decode(
            format!("stored id {s:?} is not a UUID").into(),
        ))
    })
}

/// The columns `agent_from_row` reads.
pub(crate) const AGENT_COLS: &str =
    "id, tenant_id, name, head_seq, low_water, created_at, last_seen_at";

pub(crate) fn agent_from_row(row: &impl Cols) -> StoreResult<AgentRecord> {
    Ok(AgentRecord {
        id: row.id("id")?,
        tenant_id: row.id("tenant_id")?,
        name: row.text("name")?,
        head_seq: row.int("head_seq")? as u64,
        low_water: row.int("low_water")? as u64,
        created_at: row.int("created_at")?,
        last_seen_at: row.opt_int("last_seen_at")?,
    })
}

pub(crate) fn status_from(s: &str) -> StoreResult<EventStatus> {
    EventStatus::parse(s).ok_or_else(|| {
        StoreError::Database(sqlx::Error::Decode(format!("unknown status {s:?}").into()))
    })
}

/// An event row's sender (`sender_agent_id`, `sender_name`; none: the operator).
pub(crate) fn sender_from_row(row: &impl Cols) -> StoreResult<Sender> {
    Ok(match row.opt_id("sender_agent_id")? {
        Some(agent_id) => Sender::Agent {
            agent_id,
            name: row.opt_text("sender_name")?.unwrap_or_default(),
        },
        None => Sender::Operator,
    })
}

pub(crate) fn event_from_row(row: &impl Cols) -> StoreResult<InboxEvent> {
    let sender = sender_from_row(row)?;
    let payload = row
        .opt_text("payload")?
        .map(|p| serde_json::from_str(&p))
        .transpose()
        .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
    Ok(InboxEvent {
        event_id: row.id("id")?,
        agent_id: row.id("agent_id")?,
        seq: row.int("seq")? as u64,
        sender,
        room_id: row.opt_id("room_id")?,
        room_seq: row.opt_int("room_seq")?.map(|s| s as u64),
        correlation_id: row.opt_text("correlation_id")?,
        priority: row.int("priority")? as i32,
        status: status_from(&row.text("status")?)?,
        payload,
        attempts: row.int("attempts")? as u32,
        max_attempts: row.int("max_attempts")? as u32,
        created_at: to_timestamp(row.int("created_at")?),
        available_at: to_timestamp(row.int("available_at")?),
        expires_at: row.opt_int("expires_at")?.map(to_timestamp),
        last_error: row.opt_text("last_error")?,
    })
}

/// A row of `room_messages` joined with its sender's name.
pub(crate) fn room_message_from_row(
    row: &impl Cols,
) -> StoreResult<switchboard_proto::RoomMessage> {
    let sender = match (row.opt_id("sender_agent_id")?, row.opt_text("sender_name")?) {
        (Some(agent_id), Some(name)) => Some(switchboard_proto::RoomMember { agent_id, name }),
        _ => None,
    };
    let payload = serde_json::from_str(&row.text("payload")?)
        .map_err(|e| StoreError::Database(sqlx::Error::Decode(Box::new(e))))?;
    Ok(switchboard_proto::RoomMessage {
        room_seq: row.int("seq")? as u64,
        sender,
        payload,
        correlation_id: row.opt_text("correlation_id")?,
        created_at: to_timestamp(row.int("created_at")?),
    })
}

pub(crate) fn state_from_row(row: &impl Cols) -> StoreResult<EventState> {
    Ok(EventState {
        event_id: row.id("id")?,
        status: status_from(&row.text("status")?)?,
        attempts: row.int("attempts")? as u32,
        lease_expires_at: row.opt_int("lease_expires_at")?.map(to_timestamp),
        available_at: to_timestamp(row.int("available_at")?),
    })
}

/// The history line of a release: the error, and whether it was terminal.
pub(crate) fn release_detail(error: &Option<String>, terminal: bool) -> Option<String> {
    match (error, terminal) {
        (Some(e), true) => Some(format!("terminal failure: {e}")),
        (Some(e), false) => Some(e.clone()),
        (None, true) => Some("terminal failure".to_owned()),
        (None, false) => None,
    }
}

/// Adds `n` events of `status` to `counts`.
pub(crate) fn add_count(counts: &mut StatusCounts, status: &str, n: u64) {
    match EventStatus::parse(status) {
        Some(EventStatus::Pending) => counts.pending += n,
        Some(EventStatus::Claimed) => counts.claimed += n,
        Some(EventStatus::Completed) => counts.completed += n,
        Some(EventStatus::Quarantined) => counts.quarantined += n,
        Some(EventStatus::Expired) => counts.expired += n,
        Some(EventStatus::Purged) => counts.purged += n,
        None => {}
    }
}

/// [`EVENT_COLS`] of `events e`.
pub(crate) fn prefixed_event_cols() -> String {
    EVENT_COLS
        .split(", ")
        .map(|c| format!("e.{c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// An event with its agent's name (`agent_name`) and lease.
pub(crate) fn ops_event(row: &impl Cols) -> StoreResult<OpsEvent> {
    Ok(OpsEvent {
        event: event_from_row(row)?,
        agent_name: row.text("agent_name")?,
        lease_expires_at: row.opt_int("lease_expires_at")?.map(to_timestamp),
    })
}

/// The columns `grant_from_row` reads, with `token_hash`, of `console_grants g`
/// joined by [`GRANT_JOINS`].
pub(crate) const GRANT_COLS: &str =
    "g.tenant_id, t.agent_id, g.scopes, a.name, g.token_hash, g.expires_at";
/// A grant's token (`t`) and the token's agent (`a`, if any).
pub(crate) const GRANT_JOINS: &str =
    "JOIN tokens t ON t.hash = g.token_hash LEFT JOIN agents a ON a.id = t.agent_id";
/// A live grant: this hash (`$1`) and kind (`$2`), unexpired at `$3`, its token not
/// revoked.
pub(crate) const GRANT_LIVE: &str = "WHERE g.hash = $1 AND g.kind = $2 AND g.expires_at > $3 \
     AND t.revoked_at IS NULL";

/// A console grant from `tenant_id, agent_id, scopes, name` (the agent's) and
/// `expires_at`; `token_hash` is read by the caller (a blob).
pub(crate) fn grant_from_row(row: &impl Cols, token_hash: Vec<u8>) -> StoreResult<Grant> {
    Ok(Grant {
        record: TokenRecord {
            tenant_id: row.id("tenant_id")?,
            agent_id: row.opt_id("agent_id")?,
            agent_name: row.opt_text("name")?,
            scopes: scopes(row)?,
            // A console session is an operator's: no SDK obeys these.
            client_settings: ClientSettings::default(),
        },
        token_hash,
        expires_at: row.int("expires_at")?,
    })
}

/// The statuses a bulk action applies to, as an SQL list.
pub(crate) fn applies_to(action: BulkAction) -> &'static str {
    match action {
        BulkAction::Replay => "('quarantined')",
        BulkAction::Release => "('claimed')",
        BulkAction::Purge => "('pending','claimed','completed','quarantined','expired')",
    }
}

/// The `audit_log` columns `audit_entry` and `job_from_row` read.
pub(crate) const AUDIT_COLS: &str = "id, actor, action, ids, filter, count, at, job_state, \
     job_total, job_rate, finished_at, job_error, target, detail";

pub(crate) fn audit_entry(r: &impl Cols) -> StoreResult<AuditEntry> {
    Ok(AuditEntry {
        id: r.int("id")?,
        actor: r.text("actor")?,
        action: r.text("action")?,
        ids: r
            .opt_text("ids")?
            .and_then(|s| serde_json::from_str(&s).ok()),
        filter: r
            .opt_text("filter")?
            .and_then(|s| serde_json::from_str(&s).ok()),
        count: r.int("count")? as u64,
        at: to_timestamp(r.int("at")?),
        job_state: r
            .opt_text("job_state")?
            .as_deref()
            .and_then(JobState::parse),
        job_total: r.opt_int("job_total")?.map(|t| t as u64),
        target: r.opt_text("target")?,
        detail: r.opt_text("detail")?,
    })
}

pub(crate) fn job_from_row(r: &impl Cols) -> StoreResult<Job> {
    let entry = audit_entry(r)?;
    let action = BulkAction::parse(&entry.action)
        .ok_or_else(|| StoreError::Invalid(format!("audit row {} is not a job", entry.id)))?;
    Ok(Job {
        job_id: entry.id,
        action,
        actor: entry.actor,
        filter: entry.filter,
        id_count: entry.ids.map(|ids| ids.len() as u64),
        total: entry.job_total.unwrap_or(entry.count),
        done: entry.count,
        state: entry.job_state.ok_or(StoreError::NotFound)?,
        rate_per_second: r
            .opt_int("job_rate")?
            .map(|r| r.clamp(0, i64::from(u32::MAX)) as u32),
        started_at: entry.at,
        finished_at: r.opt_int("finished_at")?.map(to_timestamp),
        error: r.opt_text("job_error")?,
    })
}

/// One step of an event's timeline (`action, actor, detail, at`).
pub(crate) fn history_entry(r: &impl Cols) -> StoreResult<switchboard_proto::HistoryEntry> {
    Ok(switchboard_proto::HistoryEntry {
        action: r.text("action")?,
        actor: r.text("actor")?,
        detail: r.opt_text("detail")?,
        at: to_timestamp(r.int("at")?),
    })
}

/// The columns `token_record` reads: `tokens t LEFT JOIN agents a`, and the client
/// settings of the token's agent (`s`) and of its tenant (`d`), so a request learns
/// them with its token, in the same statement.
pub(crate) const TOKEN_SELECT: &str = "SELECT t.tenant_id, t.agent_id, t.scopes, a.name, \
     s.poll_ceiling_ms AS own_poll_ceiling, s.reports_paused AS own_reports_paused, \
     d.poll_ceiling_ms AS tenant_poll_ceiling, d.reports_paused AS tenant_reports_paused \
     FROM tokens t LEFT JOIN agents a ON a.id = t.agent_id \
     LEFT JOIN client_settings s ON s.tenant_id = t.tenant_id AND s.agent_id = t.agent_id \
     LEFT JOIN client_settings d ON d.tenant_id = t.tenant_id AND d.agent_id = ''";

/// A token row's `scopes` column (space separated) as a list.
pub(crate) fn scopes(r: &impl Cols) -> StoreResult<Vec<String>> {
    Ok(r.text("scopes")?
        .split_whitespace()
        .map(str::to_owned)
        .collect())
}

pub(crate) fn token_record(r: &impl Cols) -> StoreResult<crate::TokenRecord> {
    Ok(crate::TokenRecord {
        tenant_id: r.id("tenant_id")?,
        agent_id: r.opt_id("agent_id")?,
        agent_name: r.opt_text("name")?,
        scopes: scopes(r)?,
        client_settings: settings_cols(r, "own_poll_ceiling", "own_reports_paused")?.over(
            settings_cols(r, "tenant_poll_ceiling", "tenant_reports_paused")?,
        ),
    })
}

/// Client settings from their two nullable columns.
fn settings_cols(
    r: &impl Cols,
    poll_ceiling: &str,
    reports_paused: &str,
) -> StoreResult<ClientSettings> {
    Ok(ClientSettings {
        poll_ceiling_ms: r.opt_int(poll_ceiling)?.map(|ms| ms.max(0) as u64),
        reports_paused: r.opt_int(reports_paused)?.map(|p| p != 0),
    })
}

/// The columns `client_settings_row` reads: `client_settings c LEFT JOIN agents a`.
pub(crate) const CLIENT_SETTINGS_SELECT: &str = "SELECT c.agent_id, a.name, c.poll_ceiling_ms, c.reports_paused, c.updated_at, \
     c.updated_by FROM client_settings c LEFT JOIN agents a ON a.id = c.agent_id";

pub(crate) fn client_settings_row(r: &impl Cols) -> StoreResult<crate::ClientSettingsRow> {
    let agent = r.text("agent_id")?;
    Ok(crate::ClientSettingsRow {
        agent_id: (!agent.is_empty()).then(|| parse_id(&agent)).transpose()?,
        name: r.opt_text("name")?,
        settings: settings_cols(r, "poll_ceiling_ms", "reports_paused")?,
        updated_at: r.int("updated_at")?,
        updated_by: r.text("updated_by")?,
    })
}

/// The columns `client_report` reads.
pub(crate) const CLIENT_REPORT_SELECT: &str = "SELECT a.id, a.name, r.report, r.received_at \
     FROM client_reports r JOIN agents a ON a.id = r.agent_id";

pub(crate) fn client_report(r: &impl Cols) -> StoreResult<crate::ClientReportRow> {
    Ok(crate::ClientReportRow {
        agent_id: r.id("id")?,
        name: r.text("name")?,
        report: r.text("report")?,
        received_at: r.int("received_at")?,
    })
}

/// A room row with its members (`id, name` rows of the members' agents).
pub(crate) fn room_from_rows<R: Cols>(
    room: &impl Cols,
    members: &[R],
) -> StoreResult<switchboard_proto::Room> {
    Ok(switchboard_proto::Room {
        room_id: room.id("id")?,
        name: room.text("name")?,
        head_seq: room.int("head_seq")? as u64,
        members: members
            .iter()
            .map(|m| {
                Ok(switchboard_proto::RoomMember {
                    agent_id: m.id("id")?,
                    name: m.text("name")?,
                })
            })
            .collect::<StoreResult<_>>()?,
        created_at: to_timestamp(room.int("created_at")?),
    })
}

/// Whether `key` names an agent or room by id (canonical form) or by name: the
/// column to match and the value to bind.
pub(crate) fn by_id_or_name<T: FromStr + std::fmt::Display>(key: &str) -> (&'static str, String) {
    match T::from_str(key) {
        Ok(id) => ("id", id.to_string()),
        Err(_) => ("name", key.to_owned()),
    }
}

/// The sending agent of a room message (`None`: an operator); an agent must be a
/// member of the room.
pub(crate) fn room_sender(
    from: &crate::Actor,
    members: &[switchboard_proto::AgentId],
) -> StoreResult<Option<switchboard_proto::AgentId>> {
    match from {
        crate::Actor::Agent { id, name } => {
            if !members.contains(id) {
                // As for a read: to a non-member the room does not exist.
                let _ = name;
                return Err(StoreError::NotFound);
            }
            Ok(Some(*id))
        }
        _ => Ok(None),
    }
}

impl AgentRecord {
    /// A new agent, as `create_agent` wrote it.
    pub(crate) fn created(
        id: switchboard_proto::AgentId,
        tenant: switchboard_proto::TenantId,
        name: &str,
        now: crate::clock::Millis,
    ) -> Self {
        Self {
            id,
            tenant_id: tenant,
            name: name.to_owned(),
            head_seq: 0,
            low_water: 0,
            created_at: now,
            last_seen_at: None,
        }
    }

    /// The scopes of its token (`{agent_id}` filled in) and the token's label.
    pub(crate) fn token_grant(&self, scopes: &[String]) -> (Vec<String>, String) {
        let scopes = scopes
            .iter()
            .map(|s| s.replace("{agent_id}", &self.id.to_string()))
            .collect();
        (scopes, format!("agent:{}", self.name))
    }
}

/// The columns of a device request as operators see it.
pub(crate) const DEVICE_COLS: &str = "user_code, client_id, agent_name, source, user_agent, \
     created_at, expires_at, status, decided_by, decided_at, agent_id";

pub(crate) fn device_request(r: &impl Cols) -> StoreResult<crate::DeviceRequestRow> {
    Ok(crate::DeviceRequestRow {
        user_code: r.text("user_code")?,
        client_id: r.text("client_id")?,
        agent_name: r.text("agent_name")?,
        source: r.text("source")?,
        user_agent: r.text("user_agent")?,
        created_at: r.int("created_at")?,
        expires_at: r.int("expires_at")?,
        status: r.text("status")?,
        decided_by: r.opt_text("decided_by")?,
        decided_at: r.opt_int("decided_at")?,
        agent_id: r.opt_id("agent_id")?,
    })
}
