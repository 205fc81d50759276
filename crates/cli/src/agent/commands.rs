//! The short subcommands: login, logout, send, tail, status, check.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use serde_json::{Value, json};
use switchboard_sdk::consumer::{FollowerConfig, Mode, local_poison};
use switchboard_sdk::credentials::TokenStore;
use switchboard_sdk::login::{DeviceLogin, is_refresh_token};
use switchboard_sdk::outbox::{self, EntryState, OutboxConfig};
use switchboard_sdk::proto::{InboxEvent, SendMessage, Snapshot};
use switchboard_sdk::{Consumer, Follower, Outbox, OutboxError, Target, Token};
use tokio_util::sync::CancellationToken;

use super::Common;

#[derive(Args, Debug)]
pub(crate) struct LoginArgs {
    /// The server's base URL, e.g. http://127.0.0.1:7700.
    #[arg(long)]
    server: String,
    /// A static agent token; `-` reads it from stdin (keeps it out of the shell
    /// history). Without it: device login, which an operator approves in the
    /// console (Devices), and which keeps a refresh token, not the agent's token.
    #[arg(long)]
    token: Option<String>,
    /// Device login: the agent to log in as [default: the profile's name].
    #[arg(long, conflicts_with = "token")]
    agent: Option<String>,
    /// Device login: the tenant whose operators approve it [default: the server's
    /// default tenant].
    #[arg(long, conflicts_with = "token")]
    tenant: Option<String>,
}

pub(crate) async fn login(common: &Common, args: LoginArgs) -> anyhow::Result<u8> {
    let Some(token) = args.token else {
        return device_login(common, &args.server, args.agent, args.tenant.as_deref()).await;
    };
    let token = if token == "-" {
        let mut token = String::new();
        std::io::stdin().read_to_string(&mut token)?;
        token.trim().to_owned()
    } else {
        token
    };
    if token.is_empty() {
        bail!("the token is empty");
    }
    let token = Token::from(token);
    let client = common.client_for(&args.server, token.clone())?;
    if let Err(error) = client.check_server().await {
        if let switchboard_sdk::Error::Incompatible { .. } = error {
            bail!("{error}");
        }
        eprintln!(
            "warning: {} did not answer ({error}); saving the login anyway",
            args.server
        );
    }
    let store = TokenStore::os()?;
    store.save(&common.profile, &args.server, &token)?;
    eprintln!(
        "logged in to {} as profile {:?}; the token is in the {:?} keyring",
        args.server,
        common.profile,
        store.backend()
    );
    Ok(0)
}

/// Device login (RFC 8628): prints the code and the link, waits for an operator,
/// keeps the login's refresh token in the keyring.
async fn device_login(
    common: &Common,
    server: &str,
    agent: Option<String>,
    tenant: Option<&str>,
) -> anyhow::Result<u8> {
    let agent = agent.unwrap_or_else(|| common.profile.clone());
    let client = common.anonymous_client(server)?;
    if let Err(error @ switchboard_sdk::Error::Incompatible { .. }) = client.check_server().await {
        bail!("{error}");
    }
    // The login's key: its access tokens are bound to it, so they are useless to
    // anyone without the private key, which never leaves this machine's keyring.
    let key = switchboard_sdk::signing::SigningKey::generate();
    let login = DeviceLogin::start(client.http(), server, "switchboard-cli", &agent, tenant)
        .await?
        .with_signing_key(&key.public_key());
    eprintln!(
        "To log in as agent {agent:?}, an operator approves this device in the console:\n  \
         {}\n  (Devices, code {}). Waiting; the code expires in {} minutes…",
        login.verification_uri_complete,
        login.user_code,
        login.expires_in / 60
    );
    let token = login.wait(client.http()).await?;
    let store = TokenStore::os()?;
    store.save(&common.profile, server, &token)?;
    store.save_signing_key(&common.profile, &key)?;
    eprintln!(
        "logged in to {server} as agent {agent:?} (profile {:?}); the login is in the {:?} \
         keyring and renews itself",
        common.profile,
        store.backend()
    );
    Ok(0)
}

/// Signs out: a device login is revoked on the server first (its refresh token
/// and every access token of it); then the keyring entry and the profile go. A
/// static token stays valid (an operator revokes it).
pub(crate) async fn logout(common: &Common) -> anyhow::Result<u8> {
    let store = TokenStore::os()?;
    if let Some(login) = store.load(&common.profile)?
        && is_refresh_token(&login.token)
    {
        let client = common.anonymous_client(&login.server)?;
        match switchboard_sdk::login::revoke(client.http(), &login.server, &login.token).await {
            Ok(()) => eprintln!("the login was revoked on {}", login.server),
            Err(e) => eprintln!(
                "warning: could not revoke the login on {} ({e}); an operator can revoke it \
                 (Agents → Credentials)",
                login.server
            ),
        }
    }
    let removed = store.sign_out(&common.profile)?;
    if removed {
        eprintln!(
            "signed out of profile {:?}: keyring entry and profile removed",
            common.profile
        );
    } else {
        eprintln!("profile {:?} was not logged in", common.profile);
    }
    Ok(0)
}

#[derive(Args, Debug)]
pub(crate) struct SendArgs {
    /// The recipient agent (name or id).
    #[arg(long, required_unless_present = "room", conflicts_with = "room")]
    to: Option<String>,
    /// The room (name or id): one event per member.
    #[arg(long)]
    room: Option<String>,
    /// The message type the privacy gate checks the payload as.
    #[arg(long = "type", default_value = "message")]
    message_type: String,
    /// The payload as JSON text; omit it to read JSON from --file or stdin.
    payload: Option<String>,
    /// Read the payload from this file (`-` is stdin).
    #[arg(long, conflicts_with = "payload")]
    file: Option<PathBuf>,
    #[arg(long)]
    correlation_id: Option<String>,
    /// -1000..=1000; higher is claimed first.
    #[arg(long)]
    priority: Option<i32>,
    /// How long to try before leaving the message queued, in seconds.
    #[arg(long, default_value_t = 10)]
    wait_seconds: u64,
}

pub(crate) async fn send(common: &Common, args: SendArgs) -> anyhow::Result<u8> {
    let payload = match (&args.payload, &args.file) {
        (Some(text), _) => parse_json(text, "the payload")?,
        (None, Some(path)) => parse_json(&read_input(path)?, &path.display().to_string())?,
        (None, None) => parse_json(&read_input(&PathBuf::from("-"))?, "stdin")?,
    };
    let target = match (args.to, args.room) {
        (Some(agent), _) => Target::Agent(agent),
        (None, Some(room)) => Target::Room(room),
        (None, None) => bail!("say where: --to AGENT or --room ROOM"),
    };
    let gate = common.gate()?;
    let client = common.connected_client().await?;
    let db = common.db().await?;
    let outbox = Outbox::open(db, &client, gate, OutboxConfig::default()).await?;
    let message = SendMessage {
        payload,
        correlation_id: args.correlation_id,
        priority: args.priority,
        ..SendMessage::default()
    };
    let enqueued = match outbox
        .try_enqueue(target, &args.message_type, message)
        .await
    {
        Ok(enqueued) => enqueued,
        Err(OutboxError::Blocked(blocked)) => {
            for refusal in &blocked.refusals {
                eprintln!("refused: {refusal}");
            }
            eprintln!("nothing was stored or sent; check a payload with `switchboard agent check`");
            return Ok(1);
        }
        Err(error) => return Err(error.into()),
    };
    for path in &enqueued.stripped {
        eprintln!(
            "stripped {path} (not in the {:?} schema)",
            args.message_type
        );
    }
    let entry = outbox
        .deliver(enqueued.id, Duration::from_secs(args.wait_seconds))
        .await?
        .context("the entry is no longer in the local outbox")?;
    println!(
        "{}",
        json!({"outbox_id": entry.id, "state": entry.state, "receipt": entry.receipt, "last_error": entry.last_error})
    );
    match entry.state {
        EntryState::Sent => Ok(0),
        EntryState::Poison => {
            eprintln!(
                "the server refused it: {}",
                entry.last_error.unwrap_or_default()
            );
            Ok(1)
        }
        EntryState::Expired => {
            eprintln!("not sent: {}", entry.last_error.unwrap_or_default());
            Ok(1)
        }
        _ => {
            eprintln!(
                "queued (#{}): {}; `switchboard agent run` or the next `send` delivers it",
                entry.id,
                entry.last_error.as_deref().unwrap_or("not sent yet")
            );
            Ok(0)
        }
    }
}

#[derive(Args, Debug)]
pub(crate) struct TailArgs {
    /// The agent whose inbox to follow (name or id).
    #[arg(long, env = "SWITCHBOARD_AGENT")]
    name: String,
    /// Start from the oldest retained event instead of the saved cursor.
    #[arg(long)]
    from_start: bool,
    /// Print what is there now and exit instead of following.
    #[arg(long)]
    once: bool,
}

pub(crate) async fn tail(common: &Common, args: TailArgs) -> anyhow::Result<u8> {
    let client = common.connected_client().await?;
    let db = common.db().await?;
    let follower = Follower::new(
        client,
        args.name.clone(),
        db,
        format!("tail:{}", args.name),
        FollowerConfig::default(),
    );
    if args.from_start {
        follower.set_cursor(0).await?;
    }
    let print = |event: &InboxEvent| {
        println!("{}", serde_json::to_string(event).unwrap_or_default());
    };
    let resync = |snapshot: &Snapshot| {
        eprintln!(
            "the saved cursor is below retention; resuming at {} (oldest retained {})",
            snapshot.resume_cursor, snapshot.oldest_cursor
        );
    };
    if args.once {
        let (mut print, mut resync) = (print, resync);
        follower.catch_up(&mut print, &mut resync).await?;
        return Ok(0);
    }
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    tokio::spawn(async move {
        let _ = tokio::signal::ctrl_c().await;
        stop.cancel();
    });
    follower.run(print, resync, cancel).await?;
    Ok(0)
}

#[derive(Args, Debug)]
pub(crate) struct StatusArgs {
    /// The agent to show the consumer of [default: SWITCHBOARD_AGENT].
    #[arg(long, env = "SWITCHBOARD_AGENT")]
    name: Option<String>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn status(common: &Common, args: StatusArgs) -> anyhow::Result<u8> {
    let path = common.state_path();
    if !path.exists() {
        bail!(
            "no local state at {} yet; it is created by `switchboard agent send`, `run` or `tail`",
            path.display()
        );
    }
    let db = common.db().await?;
    let counts = outbox::counts(&db).await?;
    let poison = outbox::poison_entries(&db, 10).await?;
    let expired = outbox::expired_entries(&db, 10).await?;
    let key_ttl = outbox::key_ttl(&db).await?;
    let margin = OutboxConfig::default().horizon_margin;
    let mut inbox = Value::Null;
    if let Some(name) = &args.name {
        let mode = db
            .published(&Consumer::mode_key(name))
            .await?
            .and_then(|(value, at)| {
                let mode: Mode = serde_json::from_str(&value).ok()?;
                Some((mode, at))
            });
        inbox = json!({
            "agent": name,
            "mode": mode.map(|(m, _)| m.to_string()),
            "mode_as_of_ms": mode.map(|(_, at)| at),
            "claimed_cursor": db.cursor(&format!("claimed:{name}")).await?,
            "tail_cursor": db.cursor(&format!("tail:{name}")).await?,
            "local_quarantine": local_poison(&db, 10).await?,
        });
    }
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&json!({
                "state": path, "outbox": counts, "outbox_poison": poison,
                "outbox_expired": expired,
                "server_key_ttl": key_ttl,
                "horizon_margin_seconds": margin.as_secs(),
                "inbox": inbox,
            }))?
        );
        return Ok(0);
    }
    println!("state: {}", path.display());
    println!(
        "outbox: queued {}, sending {}, retryable {}, sent {}, poison {}, expired {}{}",
        counts.queued,
        counts.sending,
        counts.retryable,
        counts.sent,
        counts.poison,
        counts.expired,
        match counts.expired_removed {
            0 => String::new(),
            n => format!(" (and {n} removed after their retention)"),
        }
    );
    let learned = match key_ttl.learned_at {
        Some(at) => format!("learned {} s ago", (now_ms() - at).max(0) / 1000),
        None => "assumed: not learned from the server yet".to_owned(),
    };
    println!(
        "  resent only within the server's idempotency window: keys kept {} s ({learned}), \
         less a {} s margin",
        key_ttl.ttl.as_secs(),
        margin.as_secs()
    );
    for entry in &poison {
        println!(
            "  poison #{} to {}: {}",
            entry.id,
            entry.target,
            entry.last_error.as_deref().unwrap_or("")
        );
    }
    for entry in &expired {
        println!(
            "  expired #{} to {}: {}",
            entry.id,
            entry.target,
            entry.last_error.as_deref().unwrap_or("")
        );
    }
    if let Some(name) = &args.name {
        let mode = match (&inbox["mode"], inbox["mode_as_of_ms"].as_i64()) {
            (Value::String(mode), Some(at)) => {
                let age = (now_ms() - at).max(0) / 1000;
                format!("{mode} (as of {age} s ago)")
            }
            _ => "never ran here".to_owned(),
        };
        println!("inbox of {name}: {mode}");
        println!(
            "  cursors: claimed {}, tail {}",
            inbox["claimed_cursor"], inbox["tail_cursor"]
        );
        for p in local_poison(&db, 10).await? {
            println!(
                "  quarantined locally: event {} (seq {}) after {} failures: {}",
                p.event_id,
                p.seq,
                p.failures,
                p.reason.unwrap_or_default()
            );
        }
    }
    Ok(0)
}

#[derive(Args, Debug)]
pub(crate) struct CheckArgs {
    /// The JSON payload file; `-` (the default) reads stdin.
    #[arg(default_value = "-")]
    file: PathBuf,
    /// The message type to check it as.
    #[arg(long = "type", default_value = "message")]
    message_type: String,
}

pub(crate) fn check(common: &Common, args: CheckArgs) -> anyhow::Result<u8> {
    let payload = parse_json(&read_input(&args.file)?, &args.file.display().to_string())?;
    let gate = common.gate()?;
    match gate.check(&args.message_type, payload) {
        Ok(cleared) => {
            println!("allowed as {:?}", args.message_type);
            for path in &cleared.stripped {
                println!("stripped: {path}");
            }
            for finding in &cleared.allowed_pii {
                println!("allowed PII: {finding}");
            }
            println!("{}", serde_json::to_string_pretty(&cleared.payload)?);
            Ok(0)
        }
        Err(blocked) => {
            println!("refused as {:?}", args.message_type);
            for refusal in &blocked.refusals {
                println!("refused: {refusal}");
            }
            Ok(1)
        }
    }
}

fn read_input(path: &PathBuf) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read stdin")?;
        Ok(text)
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

fn parse_json(text: &str, what: &str) -> anyhow::Result<Value> {
    serde_json::from_str(text).with_context(|| format!("{what} is not JSON"))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
