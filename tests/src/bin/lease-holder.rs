//! A lease holder as a real process, for the zombie test (`tests/tests/protocol/
//! zombie.rs`): it acquires a name + memory lease, then writes the record `state`
//! every `--every-ms` with its fencing token and renews at a third of the TTL,
//! printing one JSON line per step on stdout. It keeps writing when a renew fails,
//! as a paused process that does not know it lost its lease would: the fence, not
//! the client, must stop it.
//!
//! Usage: `lease-holder URL TOKEN NAME MEMORY_ID TTL_SECONDS EVERY_MS TAG`.

use std::io::Write;
use std::time::{Duration, Instant};

use serde_json::json;
use switchboard_sdk::proto::{AcquireLease, MemoryId, RenewLease};
use switchboard_sdk::{Client, Precondition, new_idempotency_key};

fn say(line: serde_json::Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

fn code(e: &switchboard_sdk::Error) -> String {
    e.problem()
        .and_then(|p| p.code.clone())
        .unwrap_or_else(|| e.to_string())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [url, token, name, memory, ttl, every, tag] = args.as_slice() else {
        anyhow::bail!("usage: lease-holder URL TOKEN NAME MEMORY_ID TTL_SECONDS EVERY_MS TAG");
    };
    let client = Client::new(url, token.as_str())?;
    let memory: MemoryId = memory.parse()?;
    let ttl: f64 = ttl.parse()?;
    let every = Duration::from_millis(every.parse()?);
    let ask = AcquireLease {
        name: name.clone(),
        display_name: None,
        memory_instance_id: memory,
        ttl_seconds: ttl,
        owner_client: Some(tag.clone()),
        lock_delay_seconds: Some(0.0),
    };
    let lease = loop {
        match client.acquire_lease(&ask, &new_idempotency_key()).await {
            Ok((lease, _)) => break lease,
            Err(e) if code(&e) == "lease_held" => tokio::time::sleep(every).await,
            Err(e) => return Err(e.into()),
        }
    };
    let fence = lease.fencing_token;
    say(json!({"acquired": fence, "lease_id": lease.lease_id}));
    let renew = RenewLease::of(&lease);
    let mut renewed = Instant::now();
    let mut version: Option<u64> = None;
    for n in 0u64.. {
        if renewed.elapsed().as_secs_f64() >= ttl / 3.0 {
            renewed = Instant::now();
            if let Err(e) = client.renew_lease(&renew).await {
                say(json!({"renew": false, "code": code(&e)}));
            }
        }
        let value = json!({"writer": tag, "n": n});
        let precondition = version.map_or(Precondition::None, Precondition::IfMatch);
        match client
            .put_record(memory, "state", &value, fence, precondition)
            .await
        {
            Ok(r) => {
                version = Some(r.version);
                say(json!({"n": n, "ok": true, "version": r.version, "token": r.fencing_token}));
            }
            Err(e) => {
                let c = code(&e);
                say(json!({"n": n, "ok": false, "code": c}));
                // Someone else wrote (412/428): learn the version and go on.
                if c.starts_with("precondition") {
                    version = client
                        .get_record(memory, "state", fence)
                        .await
                        .ok()
                        .map(|r| r.version);
                }
            }
        }
        tokio::time::sleep(every).await;
    }
    Ok(())
}
