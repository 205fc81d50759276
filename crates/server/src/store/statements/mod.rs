//! The statements the backends write alike, written once. Each file holds a macro
//! that implements one `…Statements` trait of the engine for a backend's store type;
//! [`shared_statements!`] stamps all of them out for a backend (its `mod.rs` calls it
//! once). They are macros, not generic functions, because a function generic over
//! `sqlx::Database` needs a higher-ranked bound for every type it binds or reads.
//!
//! A statement's text is one template ([`sql!`](crate::store::dialect::sql)) that
//! each dialect renders; what a backend does in another shape (PostgreSQL's one-trip
//! CTEs, `SKIP LOCKED` against a loop) is a method of the engine's `…Driver` trait,
//! whose default is the portable shape and which that backend overrides.
//!
//! Every statement runs in the caller's transaction (`&mut **tx`) except the reads
//! that say so, which use the backend's read pool (`self.read_pool()`), and the
//! writes that say so, one autocommitted statement on `self.write_pool()`.

mod events;
mod inbox;
mod lease_audit;
mod maintenance;
mod records;

pub(crate) use events::event_statements;
pub(crate) use inbox::inbox_statements;
pub(crate) use lease_audit::lease_audit_statements;
pub(crate) use maintenance::maintenance_statements;
pub(crate) use records::record_statements;

/// Implements every shared statement trait for `$store`.
macro_rules! shared_statements {
    ($store:ty) => {
        $crate::store::statements::event_statements!($store);
        $crate::store::statements::inbox_statements!($store);
        $crate::store::statements::lease_audit_statements!($store);
        $crate::store::statements::maintenance_statements!($store);
        $crate::store::statements::record_statements!($store);
    };
}
pub(crate) use shared_statements;
