//! `switchboard archive list|restore`: read what retention archived (`serve
//! --archive-dir`). Files only: the server may be running or stopped.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use switchboard_sdk::proto::TenantId;
use switchboard_server::archive::{ArchiveDir, Segment, format_day, parse_day};

#[derive(Args, Debug)]
pub(crate) struct ArchiveCli {
    #[command(subcommand)]
    command: ArchiveCommand,
}

#[derive(Subcommand, Debug)]
enum ArchiveCommand {
    /// The archive's files: tenant, day, agent, sequence range and size.
    List(ListArgs),
    /// Bring a range back for inspection: each archived event once, with its history,
    /// as JSON lines in tenant, agent and sequence order.
    Restore(RestoreArgs),
}

#[derive(Args, Debug)]
struct Range {
    /// The directory `serve --archive-dir` writes.
    #[arg(long, env = "SWITCHBOARD_ARCHIVE_DIR")]
    archive_dir: PathBuf,
    /// Only this tenant (its id, as the archive's directories name it).
    #[arg(long)]
    tenant: Option<String>,
    /// The first day, YYYY-MM-DD (UTC; the day the events were created).
    #[arg(long)]
    from: Option<String>,
    /// The last day, YYYY-MM-DD.
    #[arg(long)]
    to: Option<String>,
}

#[derive(Args, Debug)]
struct ListArgs {
    #[command(flatten)]
    range: Range,
    /// One JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct RestoreArgs {
    #[command(flatten)]
    range: Range,
    /// Only this agent: its name or id.
    #[arg(long)]
    agent: Option<String>,
    /// Write the JSON lines here instead of to standard output.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub(crate) fn run(cli: ArchiveCli) -> anyhow::Result<u8> {
    match cli.command {
        ArchiveCommand::List(args) => list(args),
        ArchiveCommand::Restore(args) => restore(args),
    }
}

/// The archive and the files of the range.
fn segments(range: &Range) -> anyhow::Result<(ArchiveDir, Vec<Segment>)> {
    let archive = ArchiveDir::existing(&range.archive_dir).with_context(|| {
        format!(
            "reading the archive {}: give the directory `serve --archive-dir` writes",
            range.archive_dir.display()
        )
    })?;
    let tenant = match &range.tenant {
        Some(t) => Some(t.parse::<TenantId>().map_err(|_| {
            anyhow::anyhow!("--tenant {t:?} is not a tenant id (the archive's directory names)")
        })?),
        None => None,
    };
    let day = |d: &Option<String>| d.as_deref().map(parse_day).transpose();
    let (from, to) = (
        day(&range.from).map_err(anyhow::Error::msg)?,
        day(&range.to).map_err(anyhow::Error::msg)?,
    );
    if let (Some(f), Some(t)) = (from, to)
        && f > t
    {
        bail!("--from {} is after --to {}", format_day(f), format_day(t));
    }
    let segments = archive
        .segments(tenant, from, to)
        .with_context(|| format!("listing {}", range.archive_dir.display()))?;
    Ok((archive, segments))
}

fn list(args: ListArgs) -> anyhow::Result<u8> {
    let (_, segments) = segments(&args.range)?;
    let mut out = std::io::stdout().lock();
    if args.json {
        serde_json::to_writer_pretty(&mut out, &segments)?;
        writeln!(out)?;
        return Ok(0);
    }
    if segments.is_empty() {
        eprintln!("no archive files in that range");
        return Ok(0);
    }
    writeln!(
        out,
        "{:<36}  {:<10}  {:<36}  {:>21}  {:>10}",
        "TENANT", "DAY", "AGENT", "SEQ", "BYTES"
    )?;
    for s in &segments {
        writeln!(
            out,
            "{:<36}  {:<10}  {:<36}  {:>21}  {:>10}",
            s.tenant_id.to_string(),
            format_day(s.day),
            s.agent_id.to_string(),
            format!("{}..={}", s.first_seq, s.last_seq),
            s.bytes
        )?;
    }
    Ok(0)
}

fn restore(args: RestoreArgs) -> anyhow::Result<u8> {
    let (archive, segments) = segments(&args.range)?;
    let mut events = archive.read_range(&segments)?;
    if let Some(agent) = &args.agent {
        events.retain(|e| &e.agent == agent || e.event.agent_id.to_string() == *agent);
    }
    let mut text = Vec::new();
    for e in &events {
        serde_json::to_writer(&mut text, e)?;
        text.push(b'\n');
    }
    match &args.out {
        Some(path) => {
            std::fs::write(path, &text).with_context(|| format!("writing {}", path.display()))?
        }
        None => std::io::stdout().lock().write_all(&text)?,
    }
    let agents: std::collections::HashSet<_> = events.iter().map(|e| e.event.agent_id).collect();
    eprintln!(
        "restored {} events of {} agents from {} archive files",
        events.len(),
        agents.len(),
        segments.len()
    );
    Ok(0)
}
