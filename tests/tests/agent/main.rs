//! The agent SDK's durable layer end to end against the real server: the inbox
//! consumer (claims, dedup, lease extension, local quarantine, shutdown), the
//! cursor follower (restart, resync after retention) and the outbox through an
//! outage. Real HTTP on 127.0.0.1:0, a real server database and a real local state
//! file per agent.

mod client_settings;
mod consumer;
mod follow;
mod outbox;
mod report;
mod signed;
mod support;
