//! The zombie: a real process holds a name + memory lease and writes under it, is
//! stopped with SIGSTOP past its TTL, a second process takes over and writes, and
//! after SIGCONT the first keeps writing with its old token. The fence, not the
//! client, stops it: every write it sends after the takeover is refused with
//! `stale_fence` and listed as a fencing rejection, and none of its writes lands
//! after the takeover (record versions order every accepted write).

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use switchboard_tests::TestServer;
use switchboard_tests::sdk::proto::RegisterMemory;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

struct Holder {
    child: Child,
    lines: mpsc::UnboundedReceiver<Value>,
}

impl Holder {
    fn spawn(server: &TestServer, token: &str, memory: &str, ttl: &str, tag: &str) -> Self {
        let mut child = Command::new(env!("CARGO_BIN_EXE_lease-holder"))
            .args([&server.url, token, "zombie-bot", memory, ttl, "40", tag])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn lease-holder");
        let out = child.stdout.take().expect("stdout");
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(out).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Ok(v) = serde_json::from_str::<Value>(&line) {
                    let _ = tx.send(v);
                }
            }
        });
        Self { child, lines }
    }

    /// The next line, within 10 s.
    async fn next(&mut self) -> Value {
        tokio::time::timeout(Duration::from_secs(10), self.lines.recv())
            .await
            .expect("a line within 10 s")
            .expect("the holder is running")
    }

    /// Lines until `ok` successful writes were seen (after the acquisition line).
    async fn acquire_and_write(&mut self, ok: usize) -> (u64, Vec<Value>) {
        let first = self.next().await;
        let token = first["acquired"].as_u64().expect("acquired first");
        let mut seen = Vec::new();
        while seen.iter().filter(|l: &&Value| l["ok"] == true).count() < ok {
            seen.push(self.next().await);
        }
        (token, seen)
    }

    fn signal(&self, sig: &str) {
        let pid = self.child.id().expect("running").to_string();
        let status = std::process::Command::new("kill")
            .args([sig, &pid])
            .status()
            .expect("kill");
        assert!(status.success(), "kill {sig} {pid}");
    }
}

fn accepted_versions(lines: &[Value]) -> Vec<u64> {
    lines
        .iter()
        .filter(|l| l["ok"] == true)
        .filter_map(|l| l["version"].as_u64())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_holder_is_fenced_off_after_a_takeover() {
    let server = TestServer::start().await;
    let (created, agent) = server.agent("zombie-host").await;
    let memory = agent
        .register_memory(&RegisterMemory::default())
        .await
        .expect("memory")
        .memory_instance_id
        .to_string();

    let mut a = Holder::spawn(&server, &created.token, &memory, "1", "process-a");
    let (a_token, mut a_lines) = a.acquire_and_write(3).await;
    a.signal("-STOP");
    // Past A's one-second TTL (no lock delay), then B takes over and writes.
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    let mut b = Holder::spawn(&server, &created.token, &memory, "30", "process-b");
    let (b_token, b_before) = b.acquire_and_write(3).await;
    assert!(
        b_token > a_token,
        "the takeover's token {b_token} > {a_token}"
    );
    a.signal("-CONT");

    // A wakes up and goes on writing with its old token.
    let mut after = Vec::new();
    while after
        .iter()
        .filter(|l: &&Value| l.get("n").is_some())
        .count()
        < 8
    {
        after.push(a.next().await);
    }
    let b_more = {
        let mut more = Vec::new();
        while more.len() < 3 {
            more.push(b.next().await);
        }
        more
    };
    drop(a);
    drop(b);

    // At most the write A had in flight when it was stopped (sent before the
    // takeover) comes back accepted; everything it sent after is refused.
    let writes: Vec<&Value> = after.iter().filter(|l| l.get("n").is_some()).collect();
    for w in &writes[1..] {
        assert_eq!(
            w["ok"], false,
            "a write of the zombie after the takeover: {w}"
        );
        assert_eq!(w["code"], "stale_fence", "{w}");
    }
    assert!(
        writes[0]["ok"] == false || writes[0]["token"] == a_token,
        "{}",
        writes[0]
    );
    // No accepted write of A comes after B's first accepted write.
    a_lines.extend(after.iter().cloned());
    let last_a = accepted_versions(&a_lines)
        .into_iter()
        .max()
        .expect("A wrote");
    let b_all: Vec<Value> = b_before.into_iter().chain(b_more).collect();
    let first_b = accepted_versions(&b_all)
        .into_iter()
        .min()
        .expect("B wrote");
    assert!(
        last_a < first_b,
        "A's last accepted version {last_a} is before B's first {first_b}"
    );

    // The server recorded each refusal, naming the zombie.
    let rejections = server
        .operator()
        .fencing_rejections()
        .await
        .expect("rejections")
        .rejections;
    let zombie: Vec<_> = rejections
        .iter()
        .filter(|r| r.presented_token == a_token)
        .collect();
    assert!(
        zombie.len() >= writes.len() - 1,
        "{} refusals recorded for {} writes",
        zombie.len(),
        writes.len()
    );
    for r in &zombie {
        assert_eq!(r.owner_client.as_deref(), Some("process-a"));
        assert!(r.current_token >= b_token, "{r:?}");
    }
}
