//! Archive before retention (`--archive-dir`): what a retention pass removes is first
//! copied out and written here, outside any write transaction, and only then deleted
//! (what is still unchanged). An archive that cannot be written holds retention
//! back; it never drops data.
//!
//! Layout: `<dir>/<tenant id>/<YYYY-MM-DD>/<agent id>-<first seq>-<last seq>.jsonl.gz`,
//! one gzip file of JSON lines ([`ArchivedEvent`]) per agent, batch and day (the day an
//! event was created, UTC). A file is written under a temporary name, synced, renamed
//! into place and its directory synced, so a reader sees a whole file or none. A
//! server killed between the write and the delete leaves the events in the database
//! and in the archive; the next pass writes them again (the same name if the batch is
//! the same, a file that overlaps otherwise), and [`read_range`] keeps one copy of
//! each event.
//!
//! `switchboard archive list|restore` read it with the server stopped or running.
//! Restoring into the live inbox is not offered: a cursor below the low-water mark is
//! answered `410 Gone` exactly (I6), and events reappearing there would break that.
//! `restore` brings a range back as JSON lines, for inspection.

pub use crate::store::ArchivedEvent;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde::Serialize;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};
use switchboard_proto::{AgentId, TenantId};
use time::Date;

/// What to do while archive writes fail (the log and the console's overview say it).
pub const HELD_BACK_FIX: &str = "retention removes nothing until the archive takes it: free \
     space or fix the archive directory's permissions";

/// One archive file, as its path names it.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Segment {
    pub tenant_id: TenantId,
    #[serde(serialize_with = "day_string")]
    pub day: Date,
    pub agent_id: AgentId,
    pub first_seq: u64,
    pub last_seq: u64,
    #[serde(skip)]
    pub path: PathBuf,
    pub bytes: u64,
}

fn day_string<S: serde::Serializer>(day: &Date, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(&format_day(*day))
}

const DAY: &[time::format_description::BorrowedFormatItem<'static>] =
    time::macros::format_description!("[year]-[month]-[day]");
const SUFFIX: &str = ".jsonl.gz";

pub fn format_day(day: Date) -> String {
    day.format(DAY).expect("a date formats")
}

/// A `YYYY-MM-DD` day.
pub fn parse_day(text: &str) -> Result<Date, String> {
    Date::parse(text, DAY).map_err(|_| format!("`{text}` is not a day; write it as YYYY-MM-DD"))
}

/// The archive directory a server writes to and the CLI reads.
#[derive(Debug, Clone)]
pub struct ArchiveDir {
    root: PathBuf,
}

impl ArchiveDir {
    /// The directory, created if missing; refused if it cannot be written.
    pub fn open(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let probe = root.join(format!(".write-probe-{}", std::process::id()));
        std::fs::write(&probe, b"")?;
        std::fs::remove_file(&probe)?;
        Ok(Self {
            root: root.to_owned(),
        })
    }

    /// An existing archive, for reading.
    pub fn existing(root: &Path) -> std::io::Result<Self> {
        if !root.is_dir() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::NotFound,
                format!("{} is not a directory", root.display()),
            ));
        }
        Ok(Self {
            root: root.to_owned(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes one agent's batch, a file per day, each atomically; the files written.
    /// `events` are in sequence order, all of one tenant and agent.
    pub fn write(&self, events: &[ArchivedEvent]) -> std::io::Result<Vec<PathBuf>> {
        let mut by_day: BTreeMap<Date, Vec<&ArchivedEvent>> = BTreeMap::new();
        for e in events {
            by_day.entry(e.event.created_at.date()).or_default().push(e);
        }
        let mut written = Vec::with_capacity(by_day.len());
        for (day, events) in by_day {
            let (first, last) = (events[0], events[events.len() - 1]);
            let dir = self
                .root
                .join(first.tenant_id.to_string())
                .join(format_day(day));
            let name = format!(
                "{}-{:020}-{:020}{SUFFIX}",
                first.event.agent_id, first.event.seq, last.event.seq
            );
            let path = dir.join(&name);
            let tmp = dir.join(format!(".{name}.{}.tmp", uuid::Uuid::new_v4().simple()));
            let result = create_synced_dir(&self.root, &dir)
                .and_then(|()| write_file(&tmp, &events))
                .and_then(|()| {
                    std::fs::rename(&tmp, &path)?;
                    std::fs::File::open(&dir)?.sync_all()
                });
            if let Err(e) = result {
                let _ = std::fs::remove_file(&tmp);
                return Err(std::io::Error::new(
                    e.kind(),
                    format!("writing {}: {e}", path.display()),
                ));
            }
            written.push(path);
        }
        Ok(written)
    }

    /// Every archive file whose day is in `from..=to` (and of `tenant`, when given),
    /// in tenant, day, agent and sequence order. Temporary files of an interrupted
    /// write are not listed.
    pub fn segments(
        &self,
        tenant: Option<TenantId>,
        from: Option<Date>,
        to: Option<Date>,
    ) -> std::io::Result<Vec<Segment>> {
        let mut out = Vec::new();
        for tenant_dir in read_dirs(&self.root)? {
            let Ok(tenant_id) = file_name(&tenant_dir).parse::<TenantId>() else {
                continue;
            };
            if tenant.is_some_and(|t| t != tenant_id) {
                continue;
            }
            for day_dir in read_dirs(&tenant_dir)? {
                let Ok(day) = parse_day(&file_name(&day_dir)) else {
                    continue;
                };
                if from.is_some_and(|f| day < f) || to.is_some_and(|t| day > t) {
                    continue;
                }
                for entry in std::fs::read_dir(&day_dir)? {
                    let entry = entry?;
                    let name = entry.file_name().to_string_lossy().into_owned();
                    if let Some((agent_id, first_seq, last_seq)) = parse_name(&name) {
                        out.push(Segment {
                            tenant_id,
                            day,
                            agent_id,
                            first_seq,
                            last_seq,
                            path: entry.path(),
                            bytes: entry.metadata()?.len(),
                        });
                    }
                }
            }
        }
        out.sort();
        Ok(out)
    }

    /// The events of `segments`, one copy of each (a batch written again after a
    /// crash overlaps an earlier file), in tenant, agent and sequence order.
    pub fn read_range(&self, segments: &[Segment]) -> std::io::Result<Vec<ArchivedEvent>> {
        let mut events: BTreeMap<(TenantId, AgentId, u64), ArchivedEvent> = BTreeMap::new();
        for segment in segments {
            for event in read_file(&segment.path)? {
                events.insert(
                    (event.tenant_id, event.event.agent_id, event.event.seq),
                    event,
                );
            }
        }
        Ok(events.into_values().collect())
    }
}

/// Retention writes through this: on a blocking thread, as the files are synced.
#[async_trait::async_trait]
impl crate::store::ArchiveSink for ArchiveDir {
    async fn archive(&self, batch: Vec<ArchivedEvent>) -> Result<(), String> {
        let dir = self.clone();
        match tokio::task::spawn_blocking(move || dir.write(&batch)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(e) => Err(format!("the archive writer stopped: {e}")),
        }
    }
}

fn write_file(tmp: &Path, events: &[&ArchivedEvent]) -> std::io::Result<()> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(tmp)?;
    let mut gz = GzEncoder::new(BufWriter::new(file), Compression::default());
    for e in events {
        serde_json::to_writer(&mut gz, e)?;
        gz.write_all(b"\n")?;
    }
    let file = gz.finish()?.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()
}

/// An archive file's events; an error names the file and the line.
pub fn read_file(path: &Path) -> std::io::Result<Vec<ArchivedEvent>> {
    let reader = BufReader::new(GzDecoder::new(std::fs::File::open(path)?));
    let mut events = Vec::new();
    for (n, line) in reader.lines().enumerate() {
        let bad = |e: &dyn std::fmt::Display| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!("{} line {}: {e}", path.display(), n + 1),
            )
        };
        let line = line.map_err(|e| bad(&e))?;
        events.push(serde_json::from_str(&line).map_err(|e| bad(&e))?);
    }
    Ok(events)
}

/// `<agent id>-<first seq>-<last seq>.jsonl.gz`.
fn parse_name(name: &str) -> Option<(AgentId, u64, u64)> {
    let stem = name.strip_suffix(SUFFIX)?;
    let (rest, last) = stem.rsplit_once('-')?;
    let (agent, first) = rest.rsplit_once('-')?;
    Some((agent.parse().ok()?, first.parse().ok()?, last.parse().ok()?))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
}

fn read_dirs(dir: &Path) -> std::io::Result<Vec<PathBuf>> {
    let mut dirs = Vec::new();
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        if entry.file_type()?.is_dir() {
            dirs.push(entry.path());
        }
    }
    Ok(dirs)
}

/// Creates `dir` under `root` and syncs each parent it added an entry to, so the new
/// directories survive a power loss along with the file renamed into them.
fn create_synced_dir(root: &Path, dir: &Path) -> std::io::Result<()> {
    if dir.is_dir() {
        return Ok(());
    }
    std::fs::create_dir_all(dir)?;
    let mut at = dir.parent();
    while let Some(parent) = at {
        std::fs::File::open(parent)?.sync_all()?;
        if parent == root {
            break;
        }
        at = parent.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests;
