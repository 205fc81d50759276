//! The statements the backends write alike, written once. Each file holds a macro
//! that implements one `…Statements` trait of the engine for a backend's store type;
//! [`shared_statements!`] stamps all of them out for a backend (its `mod.rs` calls it
//! once). They are macros, not generic functions, because a function generic over
//! `sqlx::Database` needs a higher-ranked bound for every type it binds or reads.
//!
//! A statement's text is one template ([`sql!`](crate::dialect::sql)) that
//! each dialect renders; what a backend does in another shape (PostgreSQL's one-trip
//! CTEs, `SKIP LOCKED` against a loop) is a method of the engine's `…Driver` trait,
//! whose default is the portable shape and which that backend overrides.
//!
//! Every statement runs in the caller's transaction (`&mut **tx`) except those that
//! say so: reads on the backend's read pool (`self.read_pool()`), and single-statement
//! writes on its write pool (`self.write_pool()`).

mod audit;
mod bulk;
mod callbacks;
mod deletion;
mod directory;
mod events;
mod idempotency;
mod identity;
mod inbox;
mod instances;
mod jobs;
mod lease_audit;
mod leases;
mod lineage;
mod maintenance;
mod memories;
mod ops;
mod records;
mod request_keys;
mod send;
mod signin;
mod trim;

pub(crate) use audit::audit_statements;
pub(crate) use bulk::bulk_statements;
pub(crate) use callbacks::callback_statements;
pub(crate) use deletion::deletion_statements;
pub(crate) use directory::directory_statements;
pub(crate) use events::{bind_new_event, event_statements};
pub(crate) use idempotency::{INSERT_KEY, bind_key, idem_statements};
pub(crate) use identity::identity_statements;
pub(crate) use inbox::inbox_statements;
pub(crate) use instances::instance_statements;
pub(crate) use jobs::job_statements;
pub(crate) use lease_audit::lease_audit_statements;
pub(crate) use leases::lease_statements;
pub(crate) use lineage::lineage_statements;
pub(crate) use maintenance::maintenance_statements;
pub(crate) use memories::memory_statements;
pub(crate) use ops::ops_statements;
pub(crate) use records::record_statements;
pub(crate) use request_keys::request_key_statements;
pub(crate) use send::send_statements;
pub(crate) use signin::signin_statements;
pub(crate) use trim::{trim_sql, trim_statements};

/// Implements every shared statement trait for `$store`.
macro_rules! shared_statements {
    ($store:ty) => {
        $crate::statements::directory_statements!($store);
        $crate::statements::event_statements!($store);
        $crate::statements::inbox_statements!($store);
        $crate::statements::lease_audit_statements!($store);
        $crate::statements::lease_statements!($store);
        $crate::statements::memory_statements!($store);
        $crate::statements::maintenance_statements!($store);
        $crate::statements::record_statements!($store);
        $crate::statements::request_key_statements!($store);
        $crate::statements::instance_statements!($store);
        $crate::statements::idem_statements!($store);
        $crate::statements::identity_statements!($store);
        $crate::statements::signin_statements!($store);
        $crate::statements::send_statements!($store);
        $crate::statements::ops_statements!($store);
        $crate::statements::bulk_statements!($store);
        $crate::statements::job_statements!($store);
        $crate::statements::callback_statements!($store);
        $crate::statements::deletion_statements!($store);
        $crate::statements::audit_statements!($store);
        $crate::statements::lineage_statements!($store);
        $crate::statements::trim_statements!($store);
    };
}
pub(crate) use shared_statements;
