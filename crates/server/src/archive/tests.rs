use super::*;
use switchboard_proto::{EventId, EventStatus, HistoryEntry, InboxEvent, Sender};
use time::macros::datetime;

fn event(
    tenant: TenantId,
    agent: AgentId,
    seq: u64,
    created: time::OffsetDateTime,
) -> ArchivedEvent {
    ArchivedEvent {
        tenant_id: tenant,
        agent: "archivist".into(),
        event: InboxEvent {
            event_id: EventId::new(),
            agent_id: agent,
            seq,
            sender: Sender::Operator,
            room_id: None,
            room_seq: None,
            correlation_id: Some(format!("c-{seq}")),
            priority: 0,
            status: EventStatus::Completed,
            payload: None,
            attempts: 1,
            max_attempts: 5,
            created_at: created,
            available_at: created,
            expires_at: None,
            last_error: None,
        },
        history: vec![HistoryEntry {
            action: "acked".into(),
            actor: "agent:archivist".into(),
            detail: None,
            at: created,
        }],
    }
}

#[test]
fn a_batch_is_written_a_file_per_day_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let archive = ArchiveDir::open(&dir.path().join("archive")).unwrap();
    let (tenant, agent) = (TenantId::new(), AgentId::new());
    let batch = vec![
        event(tenant, agent, 1, datetime!(2026-11-30 23:59 UTC)),
        event(tenant, agent, 2, datetime!(2026-12-01 00:00 UTC)),
        event(tenant, agent, 3, datetime!(2026-12-01 12:00 UTC)),
    ];
    let written = archive.write(&batch).unwrap();
    assert_eq!(written.len(), 2, "{written:?}");

    let all = archive.segments(None, None, None).unwrap();
    assert_eq!(
        all.iter()
            .map(|s| (format_day(s.day), s.first_seq, s.last_seq))
            .collect::<Vec<_>>(),
        [
            ("2026-11-30".to_owned(), 1, 1),
            ("2026-12-01".to_owned(), 2, 3)
        ]
    );
    assert!(
        all.iter()
            .all(|s| s.tenant_id == tenant && s.agent_id == agent && s.bytes > 0)
    );
    assert_eq!(archive.read_range(&all).unwrap(), batch);

    let day = parse_day("2026-12-01").unwrap();
    let one_day = archive
        .segments(Some(tenant), Some(day), Some(day))
        .unwrap();
    assert_eq!(archive.read_range(&one_day).unwrap(), batch[1..]);
    assert!(
        archive
            .segments(Some(TenantId::new()), None, None)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_batch_written_again_after_a_crash_is_read_once() {
    let dir = tempfile::tempdir().unwrap();
    let archive = ArchiveDir::open(dir.path()).unwrap();
    let (tenant, agent) = (TenantId::new(), AgentId::new());
    let at = datetime!(2026-12-01 08:00 UTC);
    let batch: Vec<_> = (1..=4).map(|s| event(tenant, agent, s, at)).collect();
    // The first pass archived 1..=2 and was killed before its delete; the next pass
    // found 1..=4 eligible and archived them all.
    archive.write(&batch[..2]).unwrap();
    archive.write(&batch).unwrap();
    // And a write interrupted before its rename left a temporary file.
    let day_dir = dir.path().join(tenant.to_string()).join("2026-12-01");
    std::fs::write(day_dir.join(".partial.jsonl.gz.x.tmp"), b"\x1f\x8b").unwrap();

    let segments = archive.segments(None, None, None).unwrap();
    assert_eq!(segments.len(), 2);
    assert_eq!(archive.read_range(&segments).unwrap(), batch);
}

#[test]
fn a_damaged_file_is_an_error_that_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let archive = ArchiveDir::open(dir.path()).unwrap();
    let (tenant, agent) = (TenantId::new(), AgentId::new());
    let written = archive
        .write(&[event(tenant, agent, 1, datetime!(2026-12-01 08:00 UTC))])
        .unwrap();
    let bytes = std::fs::read(&written[0]).unwrap();
    std::fs::write(&written[0], &bytes[..bytes.len() / 2]).unwrap();
    let segments = archive.segments(None, None, None).unwrap();
    let err = archive.read_range(&segments).unwrap_err().to_string();
    assert!(err.contains(&written[0].display().to_string()), "{err}");
}

#[test]
fn an_unwritable_directory_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    assert!(ArchiveDir::open(&file.join("archive")).is_err());
    assert!(ArchiveDir::existing(&dir.path().join("missing")).is_err());
}

#[test]
fn names_parse_back() {
    let agent = AgentId::new();
    assert_eq!(
        parse_name(&format!("{agent}-{:020}-{:020}.jsonl.gz", 7, 12)),
        Some((agent, 7, 12))
    );
    assert_eq!(parse_name("notes.txt"), None);
    assert_eq!(parse_name(&format!("{agent}-7.jsonl.gz")), None);
    assert!(parse_day("2026-13-01").is_err());
}
