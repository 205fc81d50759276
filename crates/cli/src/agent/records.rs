//! `switchboard agent records MEMORY`: every record of a memory, one JSON object per
//! line in key order, read page by page (`GET /api/v1/memories/{id}/records`). No
//! lease needed: this is the baseline state to resync from (after a 410, or before
//! taking a memory over). Each record present for the whole listing is printed
//! once, whatever its holder writes meanwhile.

use std::io::Write;

use anyhow::Context;
use clap::Args;
use switchboard_sdk::proto::MemoryId;

use super::Common;

#[derive(Args, Debug)]
pub(crate) struct RecordsArgs {
    /// The memory instance (its UUID).
    memory: MemoryId,
    /// Records per request, 1 to 1000 [default: the server's, 100].
    #[arg(long)]
    page_size: Option<u32>,
}

pub(crate) async fn run(common: &Common, args: RecordsArgs) -> anyhow::Result<u8> {
    let client = common.connected_client().await?;
    let mut out = std::io::stdout().lock();
    let mut cursor: Option<String> = None;
    loop {
        let page = client
            .list_records(args.memory, cursor.as_deref(), args.page_size)
            .await
            .with_context(|| format!("listing the records of memory {}", args.memory))?;
        // Each page as it comes: a large memory streams instead of waiting whole.
        for record in &page.records {
            writeln!(out, "{}", serde_json::to_string(record)?)?;
        }
        out.flush()?;
        match page.next_cursor {
            Some(next) => cursor = Some(next),
            None => return Ok(0),
        }
    }
}
