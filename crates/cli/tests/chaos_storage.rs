//! Chaos, storage faults on SQLite (issue 17, item 4): the database's file system
//! fills up, or its file becomes unwritable, under a running `serve`. Writes get a clear problem
//! document (507 `storage_full`, 503 `unavailable`), never a 500; reads go on; what
//! was answered stays committed; the file passes `PRAGMA integrity_check`; and the
//! same process writes again once space (or write access) returns.
//!
//! The full disk is a small tmpfs mounted for the test, the unwritable file one made
//! immutable (`chattr +i`), so both need root (as `cargo xtask test` runs in CI);
//! elsewhere the tests say so and skip.

mod common;

use common::Serve;
use sqlx::Connection;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;
use switchboard_sdk::Client;
use switchboard_sdk::proto::CreateAgent;
use switchboard_sdk::reqwest::Method;
use switchboard_tests::chaos::ChaosRow;

/// A tmpfs of `size`, unmounted when dropped.
struct SmallDisk {
    dir: PathBuf,
    _parent: tempfile::TempDir,
}

impl SmallDisk {
    /// `None` where mounting is not allowed (not root).
    fn mount(size: &str) -> Option<Self> {
        let parent = tempfile::tempdir().expect("temp dir");
        let dir = parent.path().join("disk");
        std::fs::create_dir(&dir).expect("mount point");
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&dir)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Self {
            dir,
            _parent: parent,
        })
    }

    fn grow(&self, size: &str) {
        let options = format!("size={size}");
        let status = Command::new("mount")
            .args(["-o", &format!("remount,{options}")])
            .arg(&self.dir)
            .status()
            .expect("mount");
        assert!(status.success(), "remount {options}");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
    }
}

fn skip(why: &str) {
    println!("skipped: {why} (cargo xtask test runs this as root)");
}

/// `serve` on a SQLite file in `disk`, its token file in `state`.
fn serve(disk: &Path, state: &Path) -> Serve {
    Serve::start(
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
            .arg(format!(
                "sqlite://{}",
                disk.join("switchboard.db").display()
            ))
            .arg("--operator-token-file")
            .arg(state.join("operator-token"))
            .env("SWITCHBOARD_LOG", "warn")
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit()),
    )
}

/// One send with a key and a payload of `bytes`; the status and the body.
async fn send(op: &Client, key: &str, bytes: usize) -> (u16, serde_json::Value, String) {
    let reply = op
        .request(Method::POST, "agents/sink/messages")
        .header("idempotency-key", key)
        .json(&serde_json::json!({ "payload": { "fill": "x".repeat(bytes) } }))
        .send()
        .await
        .expect("the server answers");
    let status = reply.status().as_u16();
    let content_type = reply
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let body = reply.json().await.unwrap_or_default();
    (status, body, content_type)
}

/// Asserts an error answer is a problem document with `status` and `code`.
#[track_caller]
fn assert_problem(answer: &(u16, serde_json::Value, String), status: u16, code: &str) {
    let (got, body, content_type) = answer;
    assert_eq!(
        (*got, body["code"].as_str()),
        (status, Some(code)),
        "{body}"
    );
    assert_eq!(content_type, "application/problem+json");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
}

async fn integrity_and_count(disk: &Path) -> (String, i64) {
    let url = format!("sqlite://{}", disk.join("switchboard.db").display());
    let mut conn = sqlx::SqliteConnection::connect(&url)
        .await
        .expect("open the file");
    let check: String = sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
        .expect("integrity_check");
    let events: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM events")
        .fetch_one(&mut conn)
        .await
        .expect("count");
    (check, events)
}

async fn operator(server: &Serve, state: &Path) -> Client {
    let token = std::fs::read_to_string(state.join("operator-token")).expect("token");
    let op = Client::new(&server.url, token.trim()).expect("client");
    op.create_agent(&CreateAgent {
        name: "sink".into(),
    })
    .await
    .expect("create agent");
    op
}

#[tokio::test]
async fn a_full_disk_answers_507_loses_nothing_and_recovers() {
    let Some(disk) = SmallDisk::mount("4m") else {
        return skip("mounting a small tmpfs needs root");
    };
    let state = tempfile::tempdir().expect("state dir");
    let mut server = serve(&disk.dir, state.path());
    let op = operator(&server, state.path()).await;

    // Fill it: 32 KiB messages until the disk is full.
    let mut answered = 0i64;
    let mut refused = Vec::new();
    let mut row = ChaosRow::new("storage-full-disk", "sqlite");
    for n in 0..400 {
        let key = format!("fill-{n}");
        let answer = send(&op, &key, 32 * 1024).await;
        row.sent += 1;
        match answer.0 {
            201 => answered += 1,
            _ => {
                if answer.0 >= 500 && answer.0 != 507 {
                    row.server_5xx += 1;
                }
                assert_problem(&answer, 507, "storage_full");
                refused.push(key);
                if refused.len() >= 5 {
                    break;
                }
            }
        }
    }
    assert!(
        answered > 10,
        "some fit before the disk filled ({answered})"
    );
    assert_eq!(refused.len(), 5, "the 4 MiB disk filled up");
    // Reads still work.
    let page = op.poll("sink", 0, Some(1)).await.expect("poll while full");
    assert_eq!(page.events.len(), 1);

    // Space returns: the same process writes again, the refused keys too.
    let healed = Instant::now();
    disk.grow("64m");
    for key in &refused {
        let answer = send(&op, key, 32 * 1024).await;
        assert_eq!(answer.0, 201, "{}", answer.1);
        answered += 1;
    }
    row.recovery_ms = Some(healed.elapsed().as_millis() as u64);
    row.acknowledged = answered as u64;
    let _ = server.child.kill();
    let _ = server.child.wait();
    let (check, events) = integrity_and_count(&disk.dir).await;
    row.lost = (answered - events).max(0) as u64;
    row.note = format!("4 MiB tmpfs; integrity_check: {check}");
    row.record();
    assert_eq!(check, "ok");
    assert_eq!(events, answered, "every answered send is in the file, once");
    assert_eq!(row.server_5xx, 0, "no 500 for a full disk");
}

/// Sets or clears the immutable attribute of the database's files (an ext4 file
/// system; root); whether it worked.
fn immutable(dir: &Path, on: bool) -> bool {
    let files: Vec<PathBuf> = ["switchboard.db", "switchboard.db-wal"]
        .iter()
        .map(|f| dir.join(f))
        .filter(|f| f.exists())
        .collect();
    Command::new("chattr")
        .arg(if on { "+i" } else { "-i" })
        .args(&files)
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn an_unwritable_file_answers_503_and_recovers() {
    let dir = tempfile::tempdir().expect("temp dir");
    let state = tempfile::tempdir().expect("state dir");
    let mut server = serve(dir.path(), state.path());
    let op = operator(&server, state.path()).await;
    let mut row = ChaosRow::new("storage-unwritable", "sqlite");
    for n in 0..10 {
        assert_eq!(send(&op, &format!("before-{n}"), 100).await.0, 201);
    }
    let mut answered = 10;

    if !immutable(dir.path(), true) {
        return skip("chattr +i needs root and an ext4 (or similar) file system");
    }
    for n in 0..5 {
        let answer = send(&op, &format!("during-{n}"), 100).await;
        row.sent += 1;
        if answer.0 >= 500 && answer.0 != 503 {
            row.server_5xx += 1;
        }
        if answer.0 != 503 {
            immutable(dir.path(), false);
        }
        assert_problem(&answer, 503, "unavailable");
    }
    let page = op
        .poll("sink", 0, None)
        .await
        .expect("poll while unwritable");
    assert_eq!(page.events.len(), 10);

    let healed = Instant::now();
    assert!(immutable(dir.path(), false));
    for n in 0..5 {
        let answer = send(&op, &format!("during-{n}"), 100).await;
        assert_eq!(
            answer.0, 201,
            "written once the file is writable: {}",
            answer.1
        );
        answered += 1;
    }
    row.recovery_ms = Some(healed.elapsed().as_millis() as u64);
    row.sent += 10;
    row.acknowledged = answered as u64;
    let _ = server.child.kill();
    let _ = server.child.wait();
    let (check, events) = integrity_and_count(dir.path()).await;
    row.lost = (answered - events).max(0) as u64;
    row.note = format!("chattr +i on the file, then -i; integrity_check: {check}");
    row.record();
    assert_eq!(check, "ok");
    assert_eq!(events, answered);
    assert_eq!(row.server_5xx, 0, "no 500 for an unwritable file");
}
