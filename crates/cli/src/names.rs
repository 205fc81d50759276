//! `switchboard names import FILE.csv`: legacy agent names into the server's
//! registry of canonical names. The CSV has a header with the columns `name` and
//! `created_at` (RFC 3339). Each name goes through the canonical-name pipeline; on a
//! collision the oldest keeps the name and the others get a deterministic `-N`
//! suffix. `--dry-run` prints the same report and changes nothing.

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use std::path::PathBuf;
use switchboard_sdk::proto::{ImportNames, ImportReport, LegacyName};

#[derive(Args, Debug)]
pub(crate) struct NamesCli {
    #[command(subcommand)]
    command: NamesCommand,
}

#[derive(Subcommand, Debug)]
enum NamesCommand {
    /// Import legacy names from a CSV file (columns: name, created_at).
    Import(ImportArgs),
}

#[derive(Args, Debug)]
struct ImportArgs {
    /// The CSV file.
    file: PathBuf,
    /// Report what would happen; change nothing.
    #[arg(long)]
    dry_run: bool,
    #[command(flatten)]
    operator: crate::operator::OperatorArgs,
    /// Print the report as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) fn run(cli: NamesCli) -> anyhow::Result<u8> {
    let NamesCommand::Import(args) = cli.command;
    let names = read_csv(&args.file)?;
    let client = args.operator.client()?;
    let request = ImportNames {
        names,
        dry_run: args.dry_run,
    };
    let rt = tokio::runtime::Runtime::new().context("starting the async runtime")?;
    let report = rt.block_on(client.import_names(&request))?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", render(&report));
    }
    Ok(0)
}

/// `name,created_at` rows (header required; other columns ignored).
fn read_csv(path: &std::path::Path) -> anyhow::Result<Vec<LegacyName>> {
    let mut reader =
        csv::Reader::from_path(path).with_context(|| format!("opening {}", path.display()))?;
    let headers = reader.headers()?.clone();
    let col = |name: &str| headers.iter().position(|h| h.trim() == name);
    let (Some(n), Some(c)) = (col("name"), col("created_at")) else {
        bail!(
            "{} needs a header row with the columns name and created_at (RFC 3339), found: {}",
            path.display(),
            headers.iter().collect::<Vec<_>>().join(",")
        );
    };
    let mut out = Vec::new();
    for (i, row) in reader.records().enumerate() {
        let line = i + 2;
        let row = row.with_context(|| format!("{}:{line}", path.display()))?;
        let name = row.get(n).unwrap_or_default().to_owned();
        let at = row.get(c).unwrap_or_default().trim();
        let created_at = time::OffsetDateTime::parse(
            at,
            &time::format_description::well_known::Rfc3339,
        )
        .with_context(|| {
            format!(
                "{}:{line}: created_at {at:?} is not an RFC 3339 time like 2024-05-01T12:00:00Z",
                path.display()
            )
        })?;
        out.push(LegacyName { name, created_at });
    }
    Ok(out)
}

/// The report for a person: one line per name, then the totals.
fn render(r: &ImportReport) -> String {
    let mut out = String::new();
    for n in &r.registered {
        if n.already_registered {
            out.push_str(&format!("already   {} (from {:?})\n", n.name, n.original));
            continue;
        }
        match &n.collided_with {
            None if n.name == n.original => out.push_str(&format!("kept      {}\n", n.name)),
            None => out.push_str(&format!("kept      {} (from {:?})\n", n.name, n.original)),
            Some(older) => out.push_str(&format!(
                "renamed   {:?} -> {} ({} is older)\n",
                n.original, n.name, older
            )),
        }
    }
    for n in &r.rejected {
        out.push_str(&format!(
            "rejected  {:?}: {} ({})\n",
            n.original, n.reason, n.code
        ));
    }
    let renamed = r
        .registered
        .iter()
        .filter(|n| n.collided_with.is_some())
        .count();
    let already = r.registered.iter().filter(|n| n.already_registered).count();
    let prefix = if r.dry_run {
        "dry run, nothing changed: "
    } else {
        ""
    };
    out.push_str(&format!(
        "{prefix}{} registered ({renamed} renamed), {already} already registered, {} rejected\n",
        r.registered.len() - already,
        r.rejected.len()
    ));
    out
}
