//! API surface tests over real HTTP: idempotency, isolation, errors, operators, rooms.

mod bola;
mod client_settings;
mod credentials;
mod delete_agent;
mod devices;
mod errors;
mod idempotency;
mod isolation;
mod jobs;
mod leases;
mod limits;
mod oauth;
mod ops;
mod prometheus;
mod rate_limits;
mod records;
mod records_pages;
mod rooms;
mod seed_leases;
mod seeds;
mod signin;
mod support;
mod system;
mod tenants;
mod webhook_retries;
mod webhooks;
