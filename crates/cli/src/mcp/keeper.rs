//! The keeper: the claim tokens and fencing tokens this session holds, by the names
//! the model uses (an event id, a lease's name). Tokens never leave this process
//! through the protocol: a model that copied one could replay it after losing the
//! claim, which is what fencing is there to stop.
//!
//! In memory only: a claim or a lease belongs to the session that took it. When the
//! process ends its claims run out on the server (the event is claimable again
//! after its lease), and its name leases are released on a clean exit.

use std::collections::HashMap;
use std::sync::Mutex;

use switchboard_sdk::Client;
use switchboard_sdk::proto::{ClaimToken, EventId, Lease, ReleaseLease};
use time::OffsetDateTime;

/// One claimed event, as far as the session needs it.
#[derive(Debug, Clone)]
pub(crate) struct Claim {
    pub(crate) token: ClaimToken,
    pub(crate) lease_expires_at: OffsetDateTime,
}

#[derive(Debug, Default)]
pub(crate) struct Keeper {
    /// Events this session claimed and has not acked or released.
    claims: Mutex<HashMap<EventId, Claim>>,
    /// Name leases this session holds, by the name as the model gave it
    /// (case-folded) and by the server's canonical name.
    leases: Mutex<HashMap<String, Lease>>,
}

fn key(name: &str) -> String {
    name.trim().to_lowercase()
}

impl Keeper {
    pub(crate) fn hold_claim(&self, event: EventId, claim: Claim) {
        self.claims_mut().insert(event, claim);
    }

    pub(crate) fn claim(&self, event: EventId) -> Option<Claim> {
        self.claims_mut().get(&event).cloned()
    }

    pub(crate) fn drop_claim(&self, event: EventId) {
        self.claims_mut().remove(&event);
    }

    pub(crate) fn update_claim_expiry(&self, event: EventId, at: OffsetDateTime) {
        if let Some(claim) = self.claims_mut().get_mut(&event) {
            claim.lease_expires_at = at;
        }
    }

    /// The held claims, oldest lease end first.
    pub(crate) fn claims(&self) -> Vec<(EventId, Claim)> {
        let mut all: Vec<_> = self
            .claims_mut()
            .iter()
            .map(|(id, claim)| (*id, claim.clone()))
            .collect();
        all.sort_by_key(|(_, claim)| claim.lease_expires_at);
        all
    }

    pub(crate) fn hold_lease(&self, asked_as: &str, lease: Lease) {
        let mut leases = self.leases_mut();
        leases.retain(|_, held| held.lease_id != lease.lease_id);
        leases.insert(key(&lease.canonical_name), lease.clone());
        leases.insert(key(asked_as), lease);
    }

    pub(crate) fn lease(&self, name: &str) -> Option<Lease> {
        self.leases_mut().get(&key(name)).cloned()
    }

    pub(crate) fn drop_lease(&self, lease: &Lease) {
        self.leases_mut()
            .retain(|_, held| held.lease_id != lease.lease_id);
    }

    /// The names of the held leases (canonical), sorted.
    pub(crate) fn lease_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .leases_mut()
            .values()
            .map(|l| l.canonical_name.clone())
            .collect();
        names.sort();
        names.dedup();
        names
    }

    /// Releases every held lease (at the end of the session); failures are only
    /// reported: the lease then ends with its TTL.
    pub(crate) async fn release_leases(&self, client: &Client) {
        let held: Vec<Lease> = {
            let mut leases: Vec<Lease> = self.leases_mut().values().cloned().collect();
            leases.sort_by_key(|l| l.lease_id);
            leases.dedup_by_key(|l| l.lease_id);
            leases
        };
        for lease in held {
            if let Err(e) = client.release_lease(&ReleaseLease::of(&lease)).await {
                eprintln!(
                    "switchboard mcp: could not release the lease on {:?} ({e}); it ends with its TTL",
                    lease.canonical_name
                );
            }
            self.drop_lease(&lease);
        }
    }

    fn claims_mut(&self) -> std::sync::MutexGuard<'_, HashMap<EventId, Claim>> {
        // A panic while holding the lock cannot leave the map half-written (each
        // use is one map operation), so a poisoned lock is still usable.
        self.claims.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn leases_mut(&self) -> std::sync::MutexGuard<'_, HashMap<String, Lease>> {
        self.leases.lock().unwrap_or_else(|p| p.into_inner())
    }
}
