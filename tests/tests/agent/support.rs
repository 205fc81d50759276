use std::future::Future;
use std::time::Duration;

use switchboard_tests::key;
use switchboard_tests::sdk::proto::SendMessage;
use switchboard_tests::sdk::{Client, LocalDb};

/// A local state file in its own temp dir (kept alive by the returned guard).
pub(crate) async fn local_db() -> (LocalDb, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = LocalDb::open(dir.path().join("agent.db"))
        .await
        .expect("local db");
    (db, dir)
}

/// Sends `n` messages `{ "n": i }` to `agent`, i = `from`..`from + n`.
pub(crate) async fn send_numbered(sender: &Client, agent: &str, from: u64, n: u64) {
    for i in from..from + n {
        let message = SendMessage {
            payload: serde_json::json!({ "n": i }),
            ..SendMessage::default()
        };
        sender
            .send_message(agent, &message, &key())
            .await
            .expect("send");
    }
}

/// Polls `check` every 20 ms until it returns true, for at most `limit`.
pub(crate) async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
