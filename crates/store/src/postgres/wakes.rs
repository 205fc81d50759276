//! Wake-ups across instances: LISTEN/NOTIFY.
//!
//! A write that makes wake-ups calls `pg_notify` inside its transaction
//! ([`publish`]). PostgreSQL delivers a notification only when that transaction
//! commits, and never if it rolls back, so "wake after commit" (I1) holds across
//! instances with no extra round trip or commit. Every instance LISTENs
//! ([`listen`]) and hands what other instances published to its own hub; its own
//! wake-ups it delivered itself after the commit returned.
//!
//! A notification sent while an instance was not listening (its connection broke,
//! the database restarted) is lost, so after every (re)LISTEN the instance wakes
//! all its subscribers once: they poll and find whatever they missed.

use super::PgDriver;
use crate::{StoreResult, Wake};
use sqlx::PgConnection;
use sqlx::postgres::PgListener;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// The channel all instances of one database share.
pub const WAKE_CHANNEL: &str = "switchboard_wake";
/// A notification's payload must stay under 8,000 bytes; a wake is about 100.
const WAKES_PER_NOTIFY: usize = 64;

/// `instance;tenant agent cursor;tenant agent cursor;…`
fn encode(instance: &str, wakes: &[Wake]) -> String {
    let mut s = String::with_capacity(40 + wakes.len() * 100);
    s.push_str(instance);
    for w in wakes {
        s.push_str(&format!(
            ";{} {} {}",
            w.tenant_id, w.agent_id, w.cursor_hint
        ));
    }
    s
}

fn decode(payload: &str) -> Option<(&str, Vec<Wake>)> {
    let mut parts = payload.split(';');
    let instance = parts.next()?;
    let wakes = parts
        .map(|p| {
            let mut f = p.split(' ');
            Some(Wake {
                tenant_id: f.next()?.parse().ok()?,
                agent_id: f.next()?.parse().ok()?,
                cursor_hint: f.next()?.parse().ok()?,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some((instance, wakes))
}

/// Queues `wakes` for delivery to the other instances when `conn`'s transaction
/// commits.
pub(super) async fn publish(
    conn: &mut PgConnection,
    instance: &str,
    wakes: &[Wake],
) -> StoreResult<()> {
    for chunk in wakes.chunks(WAKES_PER_NOTIFY) {
        sqlx::query("SELECT pg_notify($1, $2)")
            .bind(WAKE_CHANNEL)
            .bind(encode(instance, chunk))
            .execute(&mut *conn)
            .await?;
    }
    Ok(())
}

/// Delivers other instances' wake-ups to the store's sink until `stop`, reconnecting (with
/// a catch-up wake of every subscriber) after any break. The first listener was
/// connected when the store opened, before the server took any subscriber.
pub(super) async fn listen(store: &PgDriver, stop: CancellationToken) {
    let mut first = store.take_listener();
    let mut failures = 0u32;
    while !stop.is_cancelled() {
        let mut listener = match first.take() {
            Some(l) => l,
            None => match connect(store.pool()).await {
                Ok(l) => {
                    failures = 0;
                    // Whatever was published while nobody here listened: look again.
                    store.wakes_out().wake_all();
                    l
                }
                Err(e) => {
                    failures += 1;
                    if failures == 1 {
                        tracing::warn!(error = %e, "cannot listen for other instances' wake-ups; retrying");
                    }
                    let wait = Duration::from_millis(200 * u64::from(failures.min(10)));
                    tokio::select! {
                        _ = stop.cancelled() => return,
                        _ = tokio::time::sleep(wait) => continue,
                    }
                }
            },
        };
        loop {
            tokio::select! {
                _ = stop.cancelled() => return,
                got = listener.try_recv() => match got {
                    Ok(Some(n)) => match decode(n.payload()) {
                        Some((from, wakes)) if from != store.instance() => {
                            store.wakes_out().wake(&wakes);
                        }
                        Some(_) => {}
                        None => tracing::warn!(payload = n.payload(), "unreadable wake-up notification"),
                    },
                    Ok(None) | Err(_) => {
                        tracing::info!("wake-up listener lost its connection; reconnecting");
                        break;
                    }
                },
            }
        }
    }
}

pub(super) async fn connect(pool: &sqlx::PgPool) -> sqlx::Result<PgListener> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(WAKE_CHANNEL).await?;
    Ok(listener)
}

#[cfg(test)]
mod tests {
    use super::*;
    use switchboard_proto::{AgentId, TenantId};

    #[test]
    fn wakes_survive_the_payload_round_trip() {
        let wakes: Vec<Wake> = (0..3)
            .map(|i| Wake {
                tenant_id: TenantId::new(),
                agent_id: AgentId::new(),
                cursor_hint: 41 + i,
            })
            .collect();
        let payload = encode("inst-1", &wakes);
        let (instance, back) = decode(&payload).expect("decodes");
        assert_eq!(instance, "inst-1");
        assert_eq!(back, wakes);
        assert!(encode("x", &[wakes[0]; WAKES_PER_NOTIFY]).len() < 8_000);
        assert!(decode("inst;not a wake").is_none());
    }
}
