//! WH: webhook delivery throughput to a local HTTPS receiver (the test receiver:
//! its own CA, TLS, axum). 16 agents each with a verified callback; their callbacks
//! are disabled while 16 × `per_agent` events are sent, then enabled at once; the
//! clock runs from the enable until the receiver has every delivery (and the server
//! has acked each).
//!
//! Baseline: the same number of signed POSTs of the same bodies to the same
//! receiver through the server's own guarded client and signer, 16 at a time (one
//! per agent, as the server delivers), with no queue: what TLS, HTTP, signing and
//! the receiver cost. The ratio is what the queue adds (claim, ack, the callback's
//! lease, the attempt log: four short transactions per delivery).

use crate::Settings;
use crate::report::{Row, progress};
use crate::server::{BenchServer, payload, temp_dir};
use anyhow::{Context, Result, bail};
use std::sync::Arc;
use std::time::{Duration, Instant};
use switchboard_sdk::new_idempotency_key;
use switchboard_sdk::proto::SendMessage;
use switchboard_sdk::reqwest::Method;
use switchboard_server::config::WebhookConfig;
use switchboard_server::webhooks::{Post, Webhooks, target::SystemLookup};
use switchboard_tests::receiver::Receiver;

const AGENTS: usize = 16;

pub(crate) async fn run(s: &Settings) -> Result<Row> {
    let per_agent = if s.quick { 20 } else { 200 };
    let total = AGENTS * per_agent;
    let receiver = Receiver::start().await;
    let webhooks = WebhookConfig {
        allow_loopback: true,
        ca_file: Some(receiver.ca_file.clone()),
        ..WebhookConfig::default()
    };

    progress(format_args!(
        "WH baseline: {total} signed POSTs to the receiver, {AGENTS} at a time"
    ));
    let base = baseline(&receiver, &webhooks, per_agent).await?;
    progress(format_args!("  {:.0} posts/s", total as f64 / base));

    progress(format_args!(
        "WH switchboard: {total} events of {AGENTS} agents delivered by callbacks"
    ));
    let server = BenchServer::open_with(temp_dir(&s.dir)?, webhooks).await?;
    let before = receiver.of_kind("inbox.event").len();
    let mut ids = Vec::new();
    for a in 0..AGENTS {
        let name = format!("wh-{a}");
        let (agent, client) = server.agent(&name).await?;
        let _ = agent;
        let reply = client
            .request(Method::POST, &format!("agents/{name}/callbacks"))
            .header("idempotency-key", new_idempotency_key())
            .json(&serde_json::json!({ "url": receiver.url, "secret": receiver.whsec() }))
            .send()
            .await?;
        if reply.status() != 201 {
            bail!("registering a callback: HTTP {}", reply.status());
        }
        let id = reply.json::<serde_json::Value>().await?["callback_id"]
            .as_str()
            .context("callback_id")?
            .to_owned();
        ops(&server, &format!("ops/callbacks/{id}/disable")).await?;
        ids.push(id);
    }
    for i in 0..per_agent {
        for a in 0..AGENTS {
            let message = SendMessage {
                payload: payload(i),
                ..SendMessage::default()
            };
            server
                .operator
                .send_message(&format!("wh-{a}"), &message, &new_idempotency_key())
                .await?;
        }
    }
    let started = Instant::now();
    for id in &ids {
        ops(&server, &format!("ops/callbacks/{id}/enable")).await?;
    }
    let deadline = started + Duration::from_secs(600);
    loop {
        let totals = server.operator.overview().await?.totals;
        if totals.completed as usize >= total {
            break;
        }
        if Instant::now() > deadline {
            bail!("{} of {total} delivered in 10 minutes", totals.completed);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let seconds = started.elapsed().as_secs_f64();
    let delivered = receiver.of_kind("inbox.event").len() - before;
    server.stop().await?;
    if delivered < total {
        bail!("the receiver got {delivered} of {total} deliveries");
    }
    progress(format_args!("  {:.0} deliveries/s", total as f64 / seconds));
    let (rate, base_rate) = (total as f64 / seconds, total as f64 / base);
    Ok(Row {
        workload: "WH",
        variant: "webhook_deliveries".to_owned(),
        description: format!(
            "{total} events, {AGENTS} agents with a callback each, to a local HTTPS \
             receiver; from enable to the last ack"
        ),
        baseline: "the same signed POSTs through the same client, 16 at a time, no queue"
            .to_owned(),
        messages: total as u64,
        seconds,
        msgs_per_sec: rate,
        baseline_messages: total as u64,
        baseline_seconds: base,
        baseline_msgs_per_sec: base_rate,
        ratio: rate / base_rate,
        goal: None,
        goal_met: None,
        cpu_us_per_msg: None,
        baseline_cpu_us_per_msg: None,
        samples: vec![rate],
        baseline_samples: vec![base_rate],
        quick: s.quick,
        latency: None,
    })
}

/// An operator POST that must answer 200.
async fn ops(server: &BenchServer, path: &str) -> Result<()> {
    let reply = server.operator.request(Method::POST, path).send().await?;
    if !reply.status().is_success() {
        bail!("POST {path}: HTTP {}", reply.status());
    }
    Ok(())
}

/// Seconds for `AGENTS` tasks to each POST `per_agent` signed bodies in turn.
async fn baseline(receiver: &Receiver, config: &WebhookConfig, per_agent: usize) -> Result<f64> {
    let webhooks =
        Arc::new(Webhooks::open(config, Arc::new(SystemLookup)).map_err(anyhow::Error::msg)?);
    let url = url::Url::parse(&receiver.url)?;
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for a in 0..AGENTS {
        let (webhooks, url, secret) = (webhooks.clone(), url.clone(), receiver.secret.clone());
        tasks.spawn(async move {
            for i in 0..per_agent {
                let body = serde_json::to_vec(&serde_json::json!({
                    "type": "bench", "event": { "agent": a, "payload": payload(i) }
                }))?;
                let id = uuid::Uuid::now_v7().to_string();
                let post = Post {
                    url: &url,
                    secret: &secret,
                    keyid: "bench",
                    webhook_id: &id,
                    now_secs: crate::server::now_ms() / 1000,
                    timeout: Duration::from_secs(15),
                };
                let answer = webhooks
                    .post(&post, body)
                    .await
                    .map_err(|f| anyhow::anyhow!("{f}"))?;
                if !answer.status().is_success() {
                    bail!("the receiver answered {}", answer.status());
                }
            }
            Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(started.elapsed().as_secs_f64())
}
