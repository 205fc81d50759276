//! The idempotency keys this process is running a request for. A second request
//! with a key that runs here is refused at once, without a database read: the same
//! request gets "in progress", another body "key reused" (as the stored record
//! would answer). The in-flight records this process writes carry its owner name.

use crate::store::IdemKey;
use std::collections::HashMap;
use std::collections::hash_map::Entry;
use std::sync::Mutex;

/// The keys running here (with each request's body fingerprint), and this
/// process's owner name.
pub(crate) struct Running {
    owner: [u8; 16],
    keys: Mutex<HashMap<RunningId, Vec<u8>>>,
}

type RunningId = (switchboard_proto::TenantId, String, Vec<u8>);

/// Why a key cannot run here now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Busy {
    /// The same request (same body) runs with the key.
    SameRequest,
    /// Another request (another body) runs with the key: a misuse.
    OtherRequest,
}

impl Default for Running {
    fn default() -> Self {
        Self::new(None)
    }
}

impl Running {
    /// Owned by `instance` (the store's instance name, a UUID, where several
    /// instances share the database: its heartbeat tells the others whether the
    /// keys it holds in flight are still running), else by a fresh random name.
    pub(crate) fn new(instance: Option<&str>) -> Self {
        let owner = instance
            .and_then(|i| uuid::Uuid::parse_str(i).ok())
            .unwrap_or_else(uuid::Uuid::new_v4);
        Self {
            owner: owner.into_bytes(),
            keys: Mutex::default(),
        }
    }

    /// The owner name this process's in-flight records carry.
    pub(crate) fn owner(&self) -> &[u8] {
        &self.owner
    }

    /// Marks `key` as running here until the guard drops.
    pub(crate) fn enter(&self, key: &IdemKey) -> Result<Entered<'_>, Busy> {
        let id = (key.tenant_id, key.principal.clone(), key.key_hash.clone());
        let mut keys = self.keys.lock().unwrap_or_else(|e| e.into_inner());
        match keys.entry(id.clone()) {
            Entry::Vacant(slot) => {
                slot.insert(key.fingerprint.clone());
                Ok(Entered { running: self, id })
            }
            Entry::Occupied(running) if *running.get() == key.fingerprint => Err(Busy::SameRequest),
            Entry::Occupied(_) => Err(Busy::OtherRequest),
        }
    }
}

/// One running request's key; dropped when the request ends, or when its client
/// goes away and the server drops the request.
pub(crate) struct Entered<'a> {
    running: &'a Running,
    id: RunningId,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.running
            .keys
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&self.id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sha2::{Digest, Sha256};

    fn key(name: &str, body: &str) -> IdemKey {
        IdemKey {
            tenant_id: switchboard_proto::TenantId(uuid::Uuid::nil()),
            principal: "agent:a".to_owned(),
            key_hash: Sha256::digest(name.as_bytes()).to_vec(),
            fingerprint: Sha256::digest(body.as_bytes()).to_vec(),
            owner: Vec::new(),
        }
    }

    fn busy(result: Result<Entered<'_>, Busy>) -> Option<Busy> {
        result.err()
    }

    #[test]
    fn one_request_per_key_runs_here_at_a_time() {
        let running = Running::default();
        let first = running.enter(&key("k", "body")).expect("the first enters");
        assert_eq!(
            busy(running.enter(&key("k", "body"))),
            Some(Busy::SameRequest)
        );
        assert_eq!(
            busy(running.enter(&key("k", "other body"))),
            Some(Busy::OtherRequest),
            "another body is a misuse, as the stored record would say"
        );
        // The refused ones must not have cleared the running one's mark.
        assert_eq!(
            busy(running.enter(&key("k", "body"))),
            Some(Busy::SameRequest)
        );
        let other = running
            .enter(&key("k2", "body"))
            .expect("another key runs too");
        drop(first);
        let again = running
            .enter(&key("k", "body"))
            .expect("free once the first ends");
        drop((again, other));
        assert!(running.keys.lock().unwrap().is_empty());
    }
}
