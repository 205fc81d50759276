//! pgmq (Tembo's Postgres message queue) on the same PostgreSQL server: the W2
//! workload as pgmq does it. Queue `i` stands for agent `i`'s inbox; a claim is
//! `pgmq.read(queue, vt => 60 s, qty => batch)` (one statement, `FOR UPDATE SKIP
//! LOCKED`), an ack is `pgmq.delete(queue, msg_id)` (one statement), each its own
//! autocommitted transaction.
//!
//! Installed through the `pgmq` crate (0.34, the first on sqlx 0.9, so it shares
//! our driver): `PGMQueueExt::install_sql_from_embedded` runs the SQL-only install
//! bundled in the crate (pgmq 1.13; no extension or superuser-only library needed)
//! into the bench's own database. Queues are logged tables, so durability matches
//! the server's (synchronous_commit on).

use crate::drain::Queues;
use crate::server::payload;
use anyhow::{Context, Result, ensure};
use pgmq::PGMQueueExt;
use std::sync::Arc;
use std::time::Duration;

/// The pgmq version the crate's embedded SQL installs (its `pgmq.control`).
pub(crate) const VERSION: &str = "1.13.0";

/// Visibility timeout of a read: the server's default lease.
const VT: Duration = Duration::from_secs(60);

fn queue_name(i: usize) -> String {
    format!("w2_{i:03}")
}

/// Installs pgmq into the (fresh) database `url` and fills `queues` queues with
/// `per_queue` messages each (the W2 payload).
pub(crate) async fn seed(url: &str, queues: usize, per_queue: usize) -> Result<()> {
    let pool = crate::pgraw::pool(url).await?;
    let pgmq = PGMQueueExt::new_with_pool(pool.clone()).await;
    let result = async {
        pgmq.install_sql_from_embedded()
            .await
            .context("installing pgmq")?;
        let messages: Vec<serde_json::Value> = (0..per_queue).map(payload).collect();
        for q in 0..queues {
            let name = queue_name(q);
            pgmq.create(&name).await?;
            for chunk in messages.chunks(1_000) {
                pgmq.send_batch(&name, chunk).await?;
            }
        }
        anyhow::Ok(())
    }
    .await;
    pool.close().await;
    result
}

/// The queues of one database.
pub(crate) struct Pgmq {
    pgmq: PGMQueueExt,
    names: Vec<String>,
}

impl Pgmq {
    pub(crate) async fn open(url: &str, queues: usize) -> Result<Arc<Self>> {
        let pool = crate::pgraw::pool(url).await?;
        Ok(Arc::new(Self {
            pgmq: PGMQueueExt::new_with_pool(pool).await,
            names: (0..queues).map(queue_name).collect(),
        }))
    }

    pub(crate) async fn close(&self) {
        self.pgmq.close().await;
    }
}

impl Queues for Pgmq {
    /// The message id.
    type Claimed = i64;

    fn count(&self) -> usize {
        self.names.len()
    }

    async fn claim(&self, queue: usize, batch: u32) -> Result<Vec<i64>> {
        let read = self
            .pgmq
            .read_batch::<serde_json::Value, serde_json::Value>(
                &self.names[queue],
                VT,
                i32::try_from(batch)?,
            )
            .await?;
        Ok(read.into_iter().map(|m| m.msg_id).collect())
    }

    async fn ack(&self, queue: usize, msg_ids: Vec<i64>) -> Result<()> {
        let deleted = self.pgmq.delete_batch(&self.names[queue], &msg_ids).await?;
        ensure!(
            deleted.len() == msg_ids.len(),
            "pgmq.delete found {} of {} messages",
            deleted.len(),
            msg_ids.len()
        );
        Ok(())
    }
}
