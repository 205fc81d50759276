//! The store's seam for deleting an agent (issue 15): what the Agents page's Delete
//! does, in one transaction: its record. The trait,
//! [`DeletionStore`](crate::DeletionStore), is declared with its one implementation in
//! `engine/deletion.rs`.

/// What deleting an agent did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AgentDeletion {
    /// Its credentials that were live (static tokens, device logins), with what
    /// they approved.
    pub revoked: u64,
    /// Its events that were still open (pending, claimed, quarantined), now purged.
    pub purged: u64,
}
