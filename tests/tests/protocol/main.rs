//! Inbox protocol tests over real HTTP against a real SQLite file.
//!
//! Each test starts its own server on `127.0.0.1:0` over a fresh database file (see
//! `switchboard_tests::TestServer`). Lease and retention tests drive a manual clock
//! instead of sleeping; only the SSE heartbeat test waits on real time.

mod batch_ack;
mod common;
mod concurrency;
mod inbox;
mod leases;
mod name_leases;
mod races;
mod retention;
mod sse;
mod zombie;
