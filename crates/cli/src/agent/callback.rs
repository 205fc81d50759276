//! `switchboard agent callback add|list|remove|secret`: the agent's webhook
//! callback. The server challenges the URL at registration, so the receiver must
//! hold the secret first: `callback secret > FILE`, configure the receiver with
//! FILE, then `callback add --url URL --secret-file FILE`.
//!
//! A secret is printed only where the user asked for it (stdout, once) and never
//! reaches a log or an error message.

use std::io::Read;
use std::path::PathBuf;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use switchboard_sdk::proto::{Callback, CallbackId, CallbackState, ErrorCode, RegisterCallback};
use switchboard_sdk::webhook::Secret;
use switchboard_sdk::{Error, new_idempotency_key};

use super::Common;

#[derive(Args, Debug)]
pub(crate) struct CallbackArgs {
    #[command(subcommand)]
    command: CallbackCommand,
}

#[derive(Subcommand, Debug)]
enum CallbackCommand {
    /// Register the agent's HTTPS callback (replacing its earlier one). The server
    /// first POSTs a challenge to the URL; the receiver must already hold the
    /// secret to answer it.
    Add(AddArgs),
    /// The agent's callback and how its deliveries go.
    List(ListArgs),
    /// Remove a callback: deliveries stop, the events stay in the inbox.
    Remove(RemoveArgs),
    /// Print a new random `whsec_` secret (nothing is sent).
    Secret,
}

/// The agent whose callback it is.
#[derive(Args, Debug)]
struct Agent {
    /// The agent (name or id).
    #[arg(long, env = "SWITCHBOARD_AGENT")]
    name: String,
}

#[derive(Args, Debug)]
struct AddArgs {
    #[command(flatten)]
    agent: Agent,
    /// The endpoint: https, a public host, no userinfo.
    #[arg(long)]
    url: String,
    /// The secret, `whsec_…` (visible in the process list and shell history:
    /// prefer --secret-file). Without either, one is generated and printed once.
    #[arg(long, value_parser = hidden, conflicts_with = "secret_file")]
    secret: Option<Hidden>,
    /// Read the secret from this file (`-` is stdin).
    #[arg(long)]
    secret_file: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ListArgs {
    #[command(flatten)]
    agent: Agent,
    /// Print JSON.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct RemoveArgs {
    #[command(flatten)]
    agent: Agent,
    /// The callback id (see `switchboard agent callback list`).
    id: CallbackId,
}

/// A command-line value that is a secret: its `Debug` hides it, and it is parsed
/// after clap so that a refusal cannot echo it.
#[derive(Clone)]
struct Hidden(String);

impl std::fmt::Debug for Hidden {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("<redacted>")
    }
}

fn hidden(text: &str) -> Result<Hidden, std::convert::Infallible> {
    Ok(Hidden(text.to_owned()))
}

pub(crate) async fn run(common: &Common, args: CallbackArgs) -> anyhow::Result<u8> {
    match args.command {
        CallbackCommand::Add(args) => add(common, args).await,
        CallbackCommand::List(args) => list(common, args).await,
        CallbackCommand::Remove(args) => remove(common, args).await,
        CallbackCommand::Secret => {
            println!("{}", Secret::generate().to_whsec());
            eprintln!(
                "a new webhook secret (not stored anywhere): configure it in the receiver, \
                 then register with `switchboard agent callback add --url URL --secret-file FILE`"
            );
            Ok(0)
        }
    }
}

async fn add(common: &Common, args: AddArgs) -> anyhow::Result<u8> {
    let given = match (&args.secret, &args.secret_file) {
        (Some(Hidden(text)), _) => Some(parse_secret(text.trim(), "--secret")?),
        (None, Some(path)) => {
            let what = path.display().to_string();
            Some(parse_secret(read_secret(path)?.trim(), &what)?)
        }
        (None, None) => None,
    };
    let generated = given.is_none();
    let secret = given.unwrap_or_else(Secret::generate);
    let client = common.connected_client().await?;
    let request = RegisterCallback {
        url: args.url.clone(),
        secret: secret.to_whsec(),
    };
    let result = client
        .register_callback(&args.agent.name, &request, &new_idempotency_key())
        .await;
    let generated = generated.then_some(&secret);
    let callback = match result {
        Ok(callback) => callback,
        Err(error) => {
            if let Some(secret) = generated {
                show_generated(secret, args.json, None)?;
            }
            return Ok(register_failed(&error, generated.is_some()));
        }
    };
    if let Some(secret) = generated {
        show_generated(secret, args.json, Some(&callback))?;
    } else if args.json {
        println!("{}", serde_json::to_string_pretty(&callback)?);
    }
    if !args.json {
        println!(
            "registered callback {} for {}: {} ({})",
            callback.callback_id,
            callback.agent,
            callback.url,
            callback.state.as_str()
        );
    }
    Ok(0)
}

/// Prints a generated secret, the one time it is shown: on stdout (in JSON as
/// `generated_secret`, next to the callback's fields unless the registration
/// failed), with the note on stderr.
fn show_generated(secret: &Secret, json: bool, callback: Option<&Callback>) -> anyhow::Result<()> {
    if json {
        let mut shown = match callback {
            Some(callback) => serde_json::to_value(callback)?,
            None => serde_json::json!({}),
        };
        shown["generated_secret"] = secret.to_whsec().into();
        println!("{}", serde_json::to_string_pretty(&shown)?);
    } else {
        println!("secret: {}", secret.to_whsec());
    }
    eprintln!(
        "note: this secret was generated now and is shown only this once; the server never \
         shows it again. The receiver needs it to answer the challenge and to verify every \
         delivery: configure it there."
    );
    Ok(())
}

/// Reports a failed registration (the problem's detail, then a hint for the usual
/// causes) on stderr; the exit status.
fn register_failed(error: &Error, generated: bool) -> u8 {
    eprintln!(
        "switchboard: cannot register the callback: {}",
        describe(error)
    );
    let hint = match error.code() {
        Some(ErrorCode::WebhookVerificationFailed) if generated => Some(
            "the receiver cannot know a secret generated just now: configure the secret \
             printed above in it, then run `switchboard agent callback add --url URL \
             --secret-file FILE` with that secret",
        ),
        Some(ErrorCode::WebhookVerificationFailed) => Some(
            "the endpoint must answer the signed challenge with {\"challenge_response\": \
             base64(HMAC-SHA256(secret, challenge))} (the SDK's webhook::answer_challenge)",
        ),
        Some(ErrorCode::WebhookTargetForbidden) => {
            Some("the URL must be https:// and resolve to a public address")
        }
        _ => None,
    };
    if let Some(hint) = hint {
        eprintln!("hint: {hint}");
    }
    1
}

async fn list(common: &Common, args: ListArgs) -> anyhow::Result<u8> {
    let client = common.connected_client().await?;
    let list = client
        .agent_callbacks(&args.agent.name)
        .await
        .map_err(|e| anyhow::anyhow!("cannot list the callbacks: {}", describe(&e)))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(0);
    }
    if list.callbacks.is_empty() {
        println!("{} has no callback", args.agent.name);
    }
    for callback in &list.callbacks {
        print_callback(callback);
    }
    Ok(0)
}

fn print_callback(c: &Callback) {
    println!("{}  {}  {}", c.callback_id, c.state.as_str(), c.url);
    println!(
        "  agent {} ({}), registered {}",
        c.agent,
        c.agent_id,
        rfc3339(c.created_at)
    );
    let last = match (c.last_delivery_at, c.last_status) {
        (Some(at), Some(status)) => format!("{} (HTTP {status})", rfc3339(at)),
        (Some(at), None) => format!("{} (no answer)", rfc3339(at)),
        (None, _) => "none yet".to_owned(),
    };
    println!("  last delivery: {last}");
    if c.failure_streak > 0 {
        let since = c.failing_since.map(rfc3339).unwrap_or_default();
        println!(
            "  failing since {since}: {} attempts, last error: {}",
            c.failure_streak,
            c.last_error.as_deref().unwrap_or("-")
        );
    }
    if c.state == CallbackState::Disabled {
        println!(
            "  disabled: {}",
            c.disabled_reason.as_deref().unwrap_or("no reason given")
        );
    }
}

async fn remove(common: &Common, args: RemoveArgs) -> anyhow::Result<u8> {
    let client = common.connected_client().await?;
    client
        .remove_callback(&args.agent.name, args.id)
        .await
        .map_err(|e| anyhow::anyhow!("cannot remove callback {}: {}", args.id, describe(&e)))?;
    println!("removed callback {}", args.id);
    Ok(0)
}

/// A call's error as the user reads it: the problem's detail first, then its code
/// and status.
fn describe(error: &Error) -> String {
    let Some(problem) = error.problem() else {
        return error.to_string();
    };
    let what = problem.code.as_deref().unwrap_or(&problem.title);
    let status = error.status().unwrap_or_default();
    match &problem.detail {
        Some(detail) => format!("{detail} ({what}, HTTP {status})"),
        None => format!("{what} (HTTP {status})"),
    }
}

fn parse_secret(text: &str, from: &str) -> anyhow::Result<Secret> {
    // `SecretError` never echoes the secret's characters.
    Secret::parse(text).with_context(|| format!("{from} is not a webhook secret (whsec_…)"))
}

fn read_secret(path: &PathBuf) -> anyhow::Result<String> {
    if path.as_os_str() == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .context("cannot read the secret from stdin")?;
        return Ok(text);
    }
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read the secret file {}", path.display()))?;
    if text.trim().is_empty() {
        bail!("the secret file {} is empty", path.display());
    }
    Ok(text)
}

fn rfc3339(at: time::OffsetDateTime) -> String {
    at.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_else(|_| at.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_argument_is_hidden_from_debug() {
        let text = Secret::generate().to_whsec();
        let shown = format!("{:?}", Hidden(text.clone()));
        assert!(!shown.contains(&text[6..]), "{shown}");
    }

    #[test]
    fn a_bad_secret_is_refused_without_echoing_it() {
        let err = parse_secret("whsec_c2VjcmV0LXRvby1zaG9ydA==", "--secret").unwrap_err();
        let text = format!("{err:#}");
        assert!(text.contains("24 to 64 bytes"), "{text}");
        assert!(!text.contains("c2VjcmV0"), "{text}");
    }
}
