//! The replay cache of signed requests (issue 39): whether a `(keyid, nonce)` is
//! used for the first time.
//!
//! - **Several instances on one database** (PostgreSQL, MariaDB): the database's
//!   `signature_nonces` is the cache, one insert per signed request, its primary key
//!   refusing a second use whichever instance it reaches.
//! - **One process owns the database** (SQLite): that process sees every request,
//!   so it checks in memory and saves what it saw behind, in one transaction per
//!   worker pass ([`Replays::save`], and at shutdown), loading what is live again
//!   at start. An insert per request would put a second writer member in front of
//!   every signed call's business write (bench AUTH measured W2 signed at 0.42× of
//!   unsigned). What a crash can lose is the last pass's nonces (a second by
//!   default): a request signed and seen in that second could be replayed once
//!   after the restart, within its window.

use crate::clock::Millis;
use crate::store::{Store, StoreResult, UsedNonce};
use std::collections::HashMap;
use std::sync::Mutex;

/// See the module's docs.
pub struct Replays {
    local: Option<Local>,
}

/// The cache of a process that owns its database: one lock, taken once per
/// signed request.
#[derive(Default)]
struct Local(Mutex<Nonces>);

#[derive(Default)]
struct Nonces {
    /// Each nonce seen, by (keyid, nonce), until when it is kept.
    seen: HashMap<(String, String), Millis>,
    /// Seen and not saved yet.
    unsaved: Vec<UsedNonce>,
}

impl Local {
    fn lock(&self) -> std::sync::MutexGuard<'_, Nonces> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Replays {
    /// The cache of a server on `store`: in memory when one process owns it.
    pub fn new(store: &dyn Store) -> Self {
        Self {
            local: (store.backend() == "sqlite").then(Local::default),
        }
    }

    /// Loads the nonces saved before this process started that are still live.
    pub async fn load(&self, store: &dyn Store, now: Millis) -> StoreResult<()> {
        if let Some(local) = &self.local {
            let live = store.live_nonces(now).await?;
            let mut nonces = local.lock();
            for n in live {
                nonces.seen.insert((n.keyid, n.nonce), n.expires_at);
            }
        }
        Ok(())
    }

    /// Whether `(keyid, nonce)` is used for the first time; it is kept until
    /// `expires_at` either way.
    pub async fn first_use(
        &self,
        store: &dyn Store,
        keyid: &str,
        nonce: &str,
        expires_at: Millis,
    ) -> StoreResult<bool> {
        let Some(local) = &self.local else {
            return store.use_nonce(keyid, nonce, expires_at).await;
        };
        let mut nonces = local.lock();
        match nonces.seen.entry((keyid.to_owned(), nonce.to_owned())) {
            std::collections::hash_map::Entry::Occupied(_) => Ok(false),
            std::collections::hash_map::Entry::Vacant(entry) => {
                entry.insert(expires_at);
                nonces.unsaved.push(UsedNonce {
                    keyid: keyid.to_owned(),
                    nonce: nonce.to_owned(),
                    expires_at,
                });
                Ok(true)
            }
        }
    }

    /// Saves what was seen since the last save, and forgets from memory what has
    /// expired at `now`; how many were saved. A failed save keeps them for the
    /// next pass.
    pub async fn save(&self, store: &dyn Store, now: Millis) -> StoreResult<u64> {
        let Some(local) = &self.local else {
            return Ok(0);
        };
        let batch = std::mem::take(&mut local.lock().unsaved);
        if let Err(e) = store.save_nonces(&batch).await {
            local.lock().unsaved.extend(batch);
            return Err(e);
        }
        local.lock().seen.retain(|_, expires_at| *expires_at > now);
        Ok(batch.len() as u64)
    }
}
