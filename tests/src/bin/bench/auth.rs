//! AUTH (issue 15): what JWT verification and the rate limiter cost on W1. W1's
//! sender (16 client tasks, a fresh Idempotency-Key per message) is measured three
//! ways in one run, each on a fresh server, the three alternated over rounds (each
//! side reports its best round, as noise only slows):
//!
//! - *static, limiter off*: W1 as its row runs it;
//! - *static, limiter on*: a token bucket per credential and per tenant, set far
//!   above the rate, so every request takes from both and none is refused: the
//!   check's own cost;
//! - *JWT, limiter on*: the sender's access token from the token exchange (RFC
//!   8693), so every request verifies an EdDSA signature and the claims and looks
//!   the `jti` up through the 2 s token cache.
//!
//! - *signed, limiter on* (issue 39): the static token bound to an Ed25519 key, so
//!   every request is signed by the SDK (RFC 9421) and verified, and its nonce goes
//!   into the replay cache.
//!
//! Rows: `limiter` (on ÷ off), `jwt` (JWT ÷ static, both with the limiter) and
//! `signed_w1` (signed ÷ unsigned, both with the limiter), with the process's CPU
//! per message of each side (W1 waits on fsync, so CPU shows a cost the rate may
//! hide); and `signed_w2`: W2's drain (claim, then ack, one event per request, so
//! every event costs two signed requests) signed ÷ unsigned, on copies of one
//! pre-loaded database. The issues' goal: each costs under 10%, a ratio ≥ 0.9.

use crate::Settings;
use crate::drain::{self, Drain, Http};
use crate::report::{Row, progress};
use crate::server::{BenchServer, temp_dir};
use crate::w1::{Rate, measure, recipients};
use crate::w2::{self, Template};
use anyhow::{Context, Result, bail};
use switchboard_sdk::Client;
use switchboard_sdk::reqwest;
use switchboard_sdk::signing::SigningKey;
use switchboard_server::config::RateLimit;

/// The goal for each ratio.
const GOAL: f64 = 0.9;

/// Far above what one machine sends: the bucket is checked, never empty.
const UNREACHED: RateLimit = RateLimit {
    per_second: 1e9,
    burst: 1_000_000,
};

#[derive(Clone, Copy, PartialEq)]
enum Side {
    Off,
    Limited,
    Jwt,
    Signed,
}

/// W1's sender on a fresh server: a static token (limiter off or on), or the
/// access token exchanged for it.
async fn one(s: &Settings, side: Side) -> Result<Rate> {
    let dir = temp_dir(&s.dir)?;
    let server = match side {
        Side::Off => BenchServer::start(dir).await?,
        Side::Limited | Side::Jwt | Side::Signed => {
            BenchServer::start_limited(dir, UNREACHED).await?
        }
    };
    let (created, sender) = server.agent("w1-sender").await?;
    recipients(&server).await?;
    let client = match side {
        Side::Jwt => Client::new(&server.url, exchange(&server.url, &created.token).await?)?,
        Side::Signed => signing(&server.url, &sender, &created.token).await?,
        _ => sender,
    };
    let rate = measure(s, &client).await?;
    server.stop().await?;
    Ok(rate)
}

/// A client of `token` that signs every request, after binding a new key to the
/// token with `unsigned` (the first key needs no signature).
async fn signing(url: &str, unsigned: &Client, token: &str) -> Result<Client> {
    let key = SigningKey::generate();
    unsigned.register_key(&key.public_key()).await?;
    Ok(Client::builder().signing_key(Some(key)).build(url, token)?)
}

/// W2's drain, one event per claim (the most requests per event), on a copy of
/// `template`, signed or not.
async fn w2(s: &Settings, template: &Template, signed: bool) -> Result<Drain> {
    let server = BenchServer::start_limited(template.copy(&s.dir)?, UNREACHED).await?;
    let unsigned = Client::new(&server.url, template.token.as_str())?;
    let client = if signed {
        signing(&server.url, &unsigned, &template.token).await?
    } else {
        unsigned
    };
    let drain = drain::run(
        Http::with_clients(vec![(w2::AGENT.to_owned(), client)]),
        s.w2_consumers,
        1,
        s.w2_events,
    )
    .await;
    server.stop().await?;
    drain
}

/// The access token the token endpoint gives for `token` (RFC 8693).
async fn exchange(url: &str, token: &str) -> Result<String> {
    let access = "urn:ietf:params:oauth:token-type:access_token";
    let body = reqwest::Url::parse_with_params(
        "http://form.invalid/",
        [
            (
                "grant_type",
                "urn:ietf:params:oauth:grant-type:token-exchange",
            ),
            ("subject_token", token),
            ("subject_token_type", access),
        ],
    )?
    .query()
    .unwrap_or_default()
    .to_owned();
    let answer = reqwest::Client::new()
        .post(format!("{url}/oauth/token"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(body)
        .send()
        .await?;
    if !answer.status().is_success() {
        bail!("the token exchange answered {}", answer.status());
    }
    let tokens: serde_json::Value = answer.json().await?;
    tokens["access_token"]
        .as_str()
        .map(str::to_owned)
        .context("no access_token in the token endpoint's answer")
}

fn best(rates: &[Rate]) -> Rate {
    rates
        .iter()
        .copied()
        .max_by(|a, b| a.per_sec().total_cmp(&b.per_sec()))
        .unwrap_or(Rate {
            messages: 0,
            seconds: 1.0,
            cpu_seconds: 0.0,
            latency: Default::default(),
        })
}

pub(crate) async fn run(s: &Settings) -> Result<Vec<Row>> {
    let rounds = if s.quick { 1 } else { 3 };
    let (mut off, mut limited, mut jwt, mut signed) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for round in 1..=rounds {
        // Rotate the order, so no side always runs first on a cold page cache.
        let mut order = [Side::Off, Side::Limited, Side::Jwt, Side::Signed];
        order.rotate_left((round - 1) % 4);
        for side in order {
            let name = match side {
                Side::Off => "static token, limiter off",
                Side::Limited => "static token, limiter on",
                Side::Jwt => "JWT access token, limiter on",
                Side::Signed => "static token with a key, every request signed, limiter on",
            };
            progress(format_args!(
                "AUTH round {round}/{rounds}: {name}, {} tasks, {:.1} s",
                s.w1_tasks,
                s.w1_measure.as_secs_f64()
            ));
            let rate = one(s, side).await?;
            progress(format_args!(
                "  {:.0} msgs/s, {:.0} µs CPU/msg",
                rate.per_sec(),
                rate.cpu_us_per_msg()
            ));
            match side {
                Side::Off => off.push(rate),
                Side::Limited => limited.push(rate),
                Side::Jwt => jwt.push(rate),
                Side::Signed => signed.push(rate),
            }
        }
    }
    progress(format_args!(
        "AUTH W2: pre-loading {} events into a template database",
        s.w2_events
    ));
    let template = Template::build(&s.dir, s.w2_events).await?;
    let (mut w2_plain, mut w2_signed) = (Vec::new(), Vec::new());
    for round in 1..=rounds {
        for signed in [round % 2 == 0, round % 2 == 1] {
            let drain = w2(s, &template, signed).await?;
            progress(format_args!(
                "AUTH W2 round {round}/{rounds}, {}: {:.0} events/s",
                if signed { "signed" } else { "unsigned" },
                drain.per_sec()
            ));
            if signed {
                w2_signed.push(drain);
            } else {
                w2_plain.push(drain);
            }
        }
    }
    let row = |variant: &str, description: String, baseline: &str, side: &[Rate], base: &[Rate]| {
        let (rate, base_rate) = (best(side), best(base));
        let ratio = rate.per_sec() / base_rate.per_sec();
        Row {
            workload: "AUTH",
            variant: variant.to_owned(),
            description,
            baseline: baseline.to_owned(),
            messages: rate.messages,
            seconds: rate.seconds,
            msgs_per_sec: rate.per_sec(),
            baseline_messages: base_rate.messages,
            baseline_seconds: base_rate.seconds,
            baseline_msgs_per_sec: base_rate.per_sec(),
            ratio,
            goal: Some(GOAL),
            goal_met: Some(ratio >= GOAL),
            cpu_us_per_msg: Some(rate.cpu_us_per_msg()),
            baseline_cpu_us_per_msg: Some(base_rate.cpu_us_per_msg()),
            samples: side.iter().map(Rate::per_sec).collect(),
            baseline_samples: base.iter().map(Rate::per_sec).collect(),
            quick: s.quick,
            latency: None,
        }
    };
    Ok(vec![
        row(
            "limiter",
            format!(
                "W1 ({} tasks, static token) with per-credential and per-tenant buckets",
                s.w1_tasks
            ),
            "W1, limiter off",
            &limited,
            &off,
        ),
        row(
            "jwt",
            format!(
                "W1 ({} tasks, limiter on) with an EdDSA access token (token exchange)",
                s.w1_tasks
            ),
            "W1, static token",
            &jwt,
            &limited,
        ),
        row(
            "signed_w1",
            format!(
                "W1 ({} tasks, limiter on), every send signed (RFC 9421, Ed25519) and verified, \
                 its nonce recorded",
                s.w1_tasks
            ),
            "W1, unsigned",
            &signed,
            &limited,
        ),
        w2_row(s, &w2_signed, &w2_plain),
    ])
}

/// The `signed_w2` row: W2's drain signed ÷ unsigned.
fn w2_row(s: &Settings, signed: &[Drain], plain: &[Drain]) -> Row {
    let (side, base) = (
        drain::best(signed, Drain::per_sec),
        drain::best(plain, Drain::per_sec),
    );
    let ratio = side.per_sec() / base.per_sec();
    Row {
        workload: "AUTH",
        variant: "signed_w2".to_owned(),
        description: format!(
            "W2: {} pre-loaded events drained by {} consumers, claim(limit=1) then ack, every \
             request signed and verified",
            s.w2_events, s.w2_consumers
        ),
        baseline: "W2, the same drain unsigned".to_owned(),
        messages: side.messages,
        seconds: side.seconds,
        msgs_per_sec: side.per_sec(),
        baseline_messages: base.messages,
        baseline_seconds: base.seconds,
        baseline_msgs_per_sec: base.per_sec(),
        ratio,
        goal: Some(GOAL),
        goal_met: Some(ratio >= GOAL),
        cpu_us_per_msg: None,
        baseline_cpu_us_per_msg: None,
        samples: signed.iter().map(Drain::per_sec).collect(),
        baseline_samples: plain.iter().map(Drain::per_sec).collect(),
        quick: s.quick,
        latency: None,
    }
}
