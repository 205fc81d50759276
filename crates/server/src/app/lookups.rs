//! Short-lived caches of the two reads every agent request makes: the bearer token
//! (→ principal) and the agent named in the path. On PostgreSQL each read is a
//! transaction of its own; without these, a claim plus a batch ack of 16 events
//! costs six transactions instead of two.
//!
//! What is cached never changes once written (a token's tenant, agent and scopes; an
//! agent's id, tenant and name), except the counters an agent record carries
//! (`head_seq`, `low_water`), which callers of the cache use only as hints, and the
//! client settings read with a token, which a change on another instance updates
//! here within [`TTL`] (the instance that made it forgets its tokens at once). Only hits
//! are cached, for [`TTL`]; a new token or agent is found at once. A revoked token
//! stops working at once on the instance that revoked it (it forgets its tokens) and
//! within [`TTL`] on every other. Age is measured on the server's clock, so a test on
//! the manual clock moves past the TTL without waiting. A hand-written map rather
//! than a caching crate: two maps, one TTL, no eviction policy beyond "clear the
//! expired when full".

use crate::clock::{Clock, Millis};
use crate::oauth::Claims;
use crate::store::{AccessGrant, AgentRecord, SignaturePolicy, TokenRecord};
use std::collections::HashMap;
use std::hash::Hash;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_proto::TenantId;

/// How long a hit is reused.
pub const TTL: Duration = Duration::from_secs(2);
const TTL_MS: Millis = TTL.as_millis() as Millis;
/// Entries per map; a full map first drops what expired, then everything.
const CAPACITY: usize = 10_000;

struct Ttl<K, V> {
    map: Mutex<HashMap<K, (V, Millis)>>,
}

impl<K: Eq + Hash, V: Clone> Ttl<K, V> {
    fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
        }
    }

    fn get(&self, key: &K, now: Millis) -> Option<V> {
        let map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        map.get(key)
            .filter(|(_, at)| fresh(*at, now))
            .map(|(v, _)| v.clone())
    }

    fn clear(&self) {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    fn put(&self, key: K, value: V, now: Millis) {
        let mut map = self.map.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= CAPACITY {
            map.retain(|_, (_, at)| fresh(*at, now));
            if map.len() >= CAPACITY {
                map.clear();
            }
        }
        map.insert(key, (value, now));
    }
}

/// Whether an entry put at `at` may still be used at `now` (a clock that went back
/// leaves it fresh only within the TTL the other way too).
fn fresh(at: Millis, now: Millis) -> bool {
    (now - at).abs() < TTL_MS
}

/// A live request-signing key of a credential, as a signed request needs it: its
/// thumbprint, whether it binds the credential, and the public key parsed (`None`
/// for stored bytes that are no Ed25519 key: a signature naming it is refused).
#[derive(Debug, Clone)]
pub struct BoundKey {
    pub jkt: String,
    pub binds_parent: bool,
    pub public: Option<switchboard_webhook::agent::PublicKey>,
}

impl BoundKey {
    fn of(key: &crate::store::RequestKey) -> Self {
        Self {
            jkt: key.jkt.clone(),
            binds_parent: key.binds_parent,
            public: switchboard_webhook::agent::PublicKey::from_bytes(&key.public_key).ok(),
        }
    }
}

/// The caches of one server.
pub struct Lookups {
    tokens: Ttl<Vec<u8>, TokenRecord>,
    /// Access tokens (JWTs) by `jti`.
    access: Ttl<String, AccessGrant>,
    /// Access tokens whose signature verified, by the SHA-256 of the whole token,
    /// with the issuer they verified for: a client sends one token many times, and
    /// the signature is what an access token costs (bench AUTH). Expiry is checked
    /// on every use; revocation is the `jti` lookup's, which runs every time.
    verified: Ttl<[u8; 32], (String, Claims)>,
    agents: Ttl<(TenantId, String), AgentRecord>,
    /// The live request-signing keys of a credential, by its hash (issue 39),
    /// parsed once.
    keys: Ttl<Vec<u8>, Arc<Vec<BoundKey>>>,
    /// Each tenant's signature policy.
    policies: Ttl<TenantId, SignaturePolicy>,
    /// Static tokens the store did not know (by hash): a token presented again
    /// within the TTL is refused without a database read. Safe to keep: a token is
    /// made by the server, never presented before it exists.
    unknown: Ttl<[u8; 32], ()>,
    clock: Arc<dyn Clock>,
}

impl Lookups {
    pub fn new(clock: Arc<dyn Clock>) -> Self {
        Self {
            tokens: Ttl::new(),
            access: Ttl::new(),
            verified: Ttl::new(),
            agents: Ttl::new(),
            keys: Ttl::new(),
            policies: Ttl::new(),
            unknown: Ttl::new(),
            clock,
        }
    }

    /// Whether the store did not know the token with this hash, within the TTL.
    pub fn unknown(&self, hash: &[u8; 32]) -> bool {
        self.unknown.get(hash, self.clock.now_ms()).is_some()
    }

    pub fn put_unknown(&self, hash: &[u8; 32]) {
        self.unknown.put(*hash, (), self.clock.now_ms());
    }

    pub fn token(&self, hash: &[u8]) -> Option<TokenRecord> {
        self.tokens.get(&hash.to_vec(), self.clock.now_ms())
    }

    pub fn put_token(&self, hash: &[u8], record: &TokenRecord) {
        self.tokens
            .put(hash.to_vec(), record.clone(), self.clock.now_ms());
    }

    pub fn access(&self, jti: &str) -> Option<AccessGrant> {
        self.access.get(&jti.to_owned(), self.clock.now_ms())
    }

    pub fn put_access(&self, jti: &str, grant: &AccessGrant) {
        self.access
            .put(jti.to_owned(), grant.clone(), self.clock.now_ms());
    }

    /// The claims of the access token with this digest, if it verified for
    /// `issuer` within the TTL.
    pub fn verified(&self, digest: &[u8; 32], issuer: &str) -> Option<Claims> {
        self.verified
            .get(digest, self.clock.now_ms())
            .filter(|(iss, _)| iss == issuer)
            .map(|(_, claims)| claims)
    }

    pub fn put_verified(&self, digest: [u8; 32], issuer: &str, claims: &Claims) {
        self.verified.put(
            digest,
            (issuer.to_owned(), claims.clone()),
            self.clock.now_ms(),
        );
    }

    /// Forgets every cached token (static and access tokens), so the next request
    /// of each reads its token (and the client settings that come with it) again.
    pub fn forget_tokens(&self) {
        self.tokens.clear();
        self.access.clear();
        self.keys.clear();
    }

    pub fn request_keys(&self, parent_hash: &[u8]) -> Option<Arc<Vec<BoundKey>>> {
        self.keys.get(&parent_hash.to_vec(), self.clock.now_ms())
    }

    pub fn put_request_keys(&self, parent_hash: &[u8], keys: Arc<Vec<BoundKey>>) {
        self.keys
            .put(parent_hash.to_vec(), keys, self.clock.now_ms());
    }

    /// Forgets the cached keys of every credential and the tenants' policies: one
    /// changed on this instance (the others see it within the TTL).
    pub fn forget_signing(&self) {
        self.keys.clear();
        self.policies.clear();
    }

    pub fn signature_policy(&self, tenant: TenantId) -> Option<SignaturePolicy> {
        self.policies.get(&tenant, self.clock.now_ms())
    }

    pub fn put_signature_policy(&self, tenant: TenantId, policy: SignaturePolicy) {
        self.policies.put(tenant, policy, self.clock.now_ms());
    }

    /// Forgets every cached agent (one was deleted: its id and name answer 404
    /// from the next request on this instance, within the TTL on the others).
    pub fn forget_agents(&self) {
        self.agents.clear();
    }

    pub fn agent(&self, tenant: TenantId, key: &str) -> Option<AgentRecord> {
        self.agents
            .get(&(tenant, key.to_owned()), self.clock.now_ms())
    }

    pub fn put_agent(&self, tenant: TenantId, key: &str, agent: &AgentRecord) {
        self.agents
            .put((tenant, key.to_owned()), agent.clone(), self.clock.now_ms());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_is_reused_for_the_ttl_and_a_miss_is_not_remembered() {
        let cache: Ttl<u32, &str> = Ttl::new();
        assert_eq!(cache.get(&1, 0), None);
        cache.put(1, "one", 1_000);
        assert_eq!(cache.get(&1, 1_000), Some("one"));
        assert_eq!(cache.get(&1, 1_000 + TTL_MS - 1), Some("one"));
        // Past its TTL on the clock it was put with, it is not returned.
        assert_eq!(cache.get(&1, 1_000 + TTL_MS), None);
    }

    #[test]
    fn a_full_map_drops_the_expired_first() {
        let cache: Ttl<usize, usize> = Ttl::new();
        let now = 10_000;
        {
            let mut map = cache.map.lock().unwrap();
            for i in 0..CAPACITY {
                map.insert(i, (i, if i % 2 == 0 { now - TTL_MS } else { now }));
            }
        }
        cache.put(CAPACITY, CAPACITY, now);
        let map = cache.map.lock().unwrap();
        assert_eq!(map.len(), CAPACITY / 2 + 1, "the expired half went");
        assert!(map.contains_key(&1) && map.contains_key(&CAPACITY));
    }
}

/// The reads that find who a request's credential stands for, through the caches
/// above: http's extractors turn their answers into a principal.
pub mod reads {
    use crate::app::AppState;
    use crate::error::ApiResult;
    use crate::store::{AccessGrant, Grant, GrantKind, TokenRecord};

    /// The live static token with this hash, read through the token cache.
    pub async fn static_token(state: &AppState, hash: &[u8]) -> ApiResult<Option<TokenRecord>> {
        if let Some(record) = state.lookups.token(hash) {
            return Ok(Some(record));
        }
        let record = state.store.token(hash).await?;
        if let Some(record) = &record {
            state.lookups.put_token(hash, record);
        }
        Ok(record)
    }

    /// The live console session with this hash (sessions are not cached).
    pub async fn session(state: &AppState, hash: &[u8]) -> ApiResult<Option<Grant>> {
        Ok(state
            .store
            .grant(hash, GrantKind::Session, state.now())
            .await?)
    }

    /// The record of access token `jti`, read through the cache; `None` when it or
    /// the credential it was issued from was revoked.
    pub async fn access(state: &AppState, jti: &str) -> ApiResult<Option<AccessGrant>> {
        if let Some(grant) = state.lookups.access(jti) {
            return Ok(Some(grant));
        }
        let grant = state.store.access_token(jti, state.now()).await?;
        if let Some(grant) = &grant {
            state.lookups.put_access(jti, grant);
        }
        Ok(grant)
    }

    /// The live request-signing keys of the credential `parent_hash`, read through
    /// the cache (a key registered or revoked elsewhere is seen within its TTL).
    pub async fn request_keys(
        state: &AppState,
        parent_hash: &[u8],
    ) -> ApiResult<std::sync::Arc<Vec<super::BoundKey>>> {
        if let Some(keys) = state.lookups.request_keys(parent_hash) {
            return Ok(keys);
        }
        let stored = state.store.request_keys(parent_hash).await?;
        let keys: std::sync::Arc<Vec<_>> =
            std::sync::Arc::new(stored.iter().map(super::BoundKey::of).collect());
        state.lookups.put_request_keys(parent_hash, keys.clone());
        Ok(keys)
    }

    /// `tenant`'s signature policy, read through the cache.
    pub async fn signature_policy(
        state: &AppState,
        tenant: switchboard_proto::TenantId,
    ) -> ApiResult<crate::store::SignaturePolicy> {
        if let Some(policy) = state.lookups.signature_policy(tenant) {
            return Ok(policy);
        }
        let policy = state.store.signature_policy(tenant).await?;
        state.lookups.put_signature_policy(tenant, policy);
        Ok(policy)
    }

    /// Reads the signing keys again, for a token signed with a key this instance
    /// does not know yet (another instance rotated).
    pub async fn reload_keys(state: &AppState) -> ApiResult<()> {
        state
            .signing
            .reload_for_unknown(state.store.as_ref(), &state.webhooks.key, state.now())
            .await?;
        Ok(())
    }
}
