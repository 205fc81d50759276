//! Name-and-memory leases and the fenced memory records: `acquire_lease`,
//! `renew_lease`, `release_lease`, `read_memory`, `write_memory`. The fencing tokens
//! stay in the session's keeper; the model names a lease by its name.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};
use switchboard_sdk::Precondition;
use switchboard_sdk::proto::{AcquireLease, MemoryId, RegisterMemory, ReleaseLease, RenewLease};

use super::{Answer, in_range};
use crate::mcp::Session;
use crate::mcp::text::{self, INVALID_ARGUMENTS, NO_LEASE, ToolError};

/// Arguments of `acquire_lease`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct AcquireLeaseArgs {
    /// The agent name to hold (for example "planner"); one holder at a time,
    /// service-wide.
    name: String,
    /// The memory to hold with it (the memory_id an earlier acquire_lease returned).
    /// Omit it to start a new, empty memory.
    #[serde(default)]
    memory_id: Option<String>,
    /// How long the lease lasts unless renewed, in seconds, 0.1..=300 (default 60).
    #[serde(default)]
    #[schemars(range(min = 0.1, max = 300.0))]
    ttl_seconds: Option<f64>,
}

/// Arguments naming a held lease.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct LeaseArgs {
    /// The name given to acquire_lease.
    name: String,
}

/// Arguments of `renew_lease`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct RenewLeaseArgs {
    /// The name given to acquire_lease.
    name: String,
    /// The lease then lasts this long from now, in seconds, 0.1..=300 (default: the
    /// lease's own TTL).
    #[serde(default)]
    #[schemars(range(min = 0.1, max = 300.0))]
    ttl_seconds: Option<f64>,
}

/// Arguments of `read_memory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct ReadMemoryArgs {
    /// The name of a lease this session holds (acquire_lease).
    name: String,
    /// The record's key.
    key: String,
}

/// Arguments of `write_memory`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct WriteMemoryArgs {
    /// The name of a lease this session holds (acquire_lease).
    name: String,
    /// The record's key.
    key: String,
    /// The value: any JSON.
    value: Value,
    /// Write only if the record is still at this version (from read_memory);
    /// refused with precondition_failed otherwise.
    #[serde(default)]
    if_version: Option<u64>,
    /// Write only if the record does not exist yet.
    #[serde(default)]
    create_only: bool,
}

pub(super) fn lease_view(lease: &switchboard_sdk::proto::Lease) -> Value {
    json!({
        "name": lease.canonical_name,
        "memory_id": lease.memory_instance_id,
        "expires_at": lease.expires_at.to_string(),
        "ttl_seconds": lease.ttl_seconds,
    })
}

pub(super) async fn acquire_lease(
    session: &Session,
    args: Result<AcquireLeaseArgs, ToolError>,
) -> Answer {
    let args = args?;
    let ttl = in_range("ttl_seconds", args.ttl_seconds, 0.1, 300.0)?.unwrap_or(60.0);
    let memory: MemoryId = match &args.memory_id {
        Some(text) => text.trim().parse().map_err(|_| {
            ToolError::new(
                INVALID_ARGUMENTS,
                format!(
                    "{text:?} is not a memory id; use the memory_id an earlier acquire_lease \
                     returned, or omit it for a new memory"
                ),
            )
        })?,
        None => {
            session
                .client
                .register_memory(&RegisterMemory {
                    memory_instance_id: None,
                    label: Some(format!("{} (switchboard mcp)", args.name.trim())),
                })
                .await?
                .memory_instance_id
        }
    };
    let request = AcquireLease {
        name: args.name.trim().to_owned(),
        display_name: None,
        memory_instance_id: memory,
        ttl_seconds: ttl,
        owner_client: Some(format!(
            "switchboard mcp, agent {}, pid {}",
            session.agent,
            std::process::id()
        )),
        lock_delay_seconds: None,
    };
    let key = switchboard_sdk::new_idempotency_key();
    let (lease, _) = session.client.acquire_lease(&request, &key).await?;
    session.keeper.hold_lease(&args.name, lease.clone());
    Ok(text::answer(
        format!(
            "This session holds {:?} with memory {} until {} (renew_lease before then).",
            lease.canonical_name, lease.memory_instance_id, lease.expires_at
        ),
        lease_view(&lease),
    ))
}

pub(super) fn held_lease(
    session: &Session,
    name: &str,
) -> Result<switchboard_sdk::proto::Lease, ToolError> {
    session.keeper.lease(name).ok_or_else(|| {
        let names = session.keeper.lease_names();
        ToolError::new(
            NO_LEASE,
            format!(
                "this session holds no lease on {name:?}; call acquire_lease first{}",
                if names.is_empty() {
                    String::new()
                } else {
                    format!(" (it holds {})", names.join(", "))
                }
            ),
        )
    })
}

/// A fenced call's failure: a lease that is stale or gone is dropped from the keeper.
pub(super) fn fenced_error(
    session: &Session,
    lease: &switchboard_sdk::proto::Lease,
    e: switchboard_sdk::Error,
) -> ToolError {
    use switchboard_sdk::proto::ErrorCode;
    if matches!(
        e.code(),
        Some(ErrorCode::StaleFence | ErrorCode::LeaseExpired)
    ) {
        session.keeper.drop_lease(lease);
    }
    ToolError::from_sdk(&e)
}

pub(super) async fn renew_lease(
    session: &Session,
    args: Result<RenewLeaseArgs, ToolError>,
) -> Answer {
    let args = args?;
    let lease = held_lease(session, &args.name)?;
    let mut request = RenewLease::of(&lease);
    request.ttl_seconds = in_range("ttl_seconds", args.ttl_seconds, 0.1, 300.0)?;
    let renewed = session
        .client
        .renew_lease(&request)
        .await
        .map_err(|e| fenced_error(session, &lease, e))?;
    session.keeper.hold_lease(&args.name, renewed.clone());
    Ok(text::answer(
        format!(
            "The lease on {:?} now lasts until {}.",
            renewed.canonical_name, renewed.expires_at
        ),
        lease_view(&renewed),
    ))
}

pub(super) async fn release_lease(session: &Session, args: Result<LeaseArgs, ToolError>) -> Answer {
    let args = args?;
    let lease = held_lease(session, &args.name)?;
    session
        .client
        .release_lease(&ReleaseLease::of(&lease))
        .await
        .map_err(|e| fenced_error(session, &lease, e))?;
    session.keeper.drop_lease(&lease);
    Ok(text::answer(
        format!("Released {:?}.", lease.canonical_name),
        json!({"name": lease.canonical_name, "released": true}),
    ))
}

pub(super) async fn read_memory(
    session: &Session,
    args: Result<ReadMemoryArgs, ToolError>,
) -> Answer {
    let args = args?;
    let lease = held_lease(session, &args.name)?;
    let record = session
        .client
        .get_record(lease.memory_instance_id, &args.key, lease.fencing_token)
        .await
        .map_err(|e| fenced_error(session, &lease, e))?;
    let nonce = text::nonce();
    let block = text::fenced(
        &nonce,
        "the memory's writers (this or earlier holders)",
        &format!("record {:?}, version {}", record.key, record.version),
        &record.value,
    );
    Ok(text::answer(
        format!(
            "Record {:?} at version {}:\n\n{block}",
            record.key, record.version
        ),
        json!({
            "key": record.key,
            "version": record.version,
            "updated_at": record.updated_at.to_string(),
            "content_from_another_agent": record.value,
        }),
    ))
}

pub(super) async fn write_memory(
    session: &Session,
    args: Result<WriteMemoryArgs, ToolError>,
) -> Answer {
    let args = args?;
    let lease = held_lease(session, &args.name)?;
    let precondition = match (args.if_version, args.create_only) {
        (Some(_), true) => {
            return Err(ToolError::new(
                INVALID_ARGUMENTS,
                "give if_version or create_only, not both",
            ));
        }
        (Some(v), false) => Precondition::IfMatch(v),
        (None, true) => Precondition::Absent,
        (None, false) => Precondition::None,
    };
    let record = session
        .client
        .put_record(
            lease.memory_instance_id,
            &args.key,
            &args.value,
            lease.fencing_token,
            precondition,
        )
        .await
        .map_err(|e| fenced_error(session, &lease, e))?;
    Ok(text::answer(
        format!(
            "Wrote {:?}; it is now at version {}.",
            record.key, record.version
        ),
        json!({"key": record.key, "version": record.version}),
    ))
}
