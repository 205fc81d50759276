//! Memory instances and name + memory leases with fencing tokens
//! (`/api/v1/memories`, `/api/v1/leases`, `/api/v1/ops/leases`).

use reqwest::Method;
use switchboard_proto::{
    AcquireLease, BranchMemory, Lease, LeaseId, LeasePage, Lineage, Memory, MemoryId, OpsLease,
    RegisterMemory, ReleaseLease, RenewLease,
};

use crate::call::Call;
use crate::{Client, Error, Sent};

impl Client {
    /// `POST /memories`: a new memory instance (the server mints the id).
    pub async fn register_memory(&self, request: &RegisterMemory) -> Result<Memory, Error> {
        let url = self.api_url(&["memories"])?;
        self.fetch(Call::new(Method::POST, url).json(request)?)
            .await
    }

    /// `POST /memories/branch`: a new memory recording its parent and the parent's
    /// fencing token.
    ///
    /// Errors: `not_found` (parent), `validation_failed` (token above the parent's).
    pub async fn branch_memory(&self, request: &BranchMemory) -> Result<Memory, Error> {
        let url = self.api_url(&["memories", "branch"])?;
        self.fetch(Call::new(Method::POST, url).json(request)?)
            .await
    }

    /// `GET /memories/{id}`.
    pub async fn memory(&self, id: MemoryId) -> Result<Memory, Error> {
        let id = id.to_string();
        self.fetch(Call::get(self.api_url(&["memories", &id])?))
            .await
    }

    /// `GET /memories/{id}/lineage`: ancestors and descendants.
    pub async fn lineage(&self, id: MemoryId) -> Result<Lineage, Error> {
        let id = id.to_string();
        self.fetch(Call::get(self.api_url(&["memories", &id, "lineage"])?))
            .await
    }

    /// `POST /leases`: claims the name and the memory together, or neither. `Sent`
    /// says whether this was a replay (200) of an earlier claim with the same key.
    ///
    /// Errors: `lease_held` (423), `name_invalid`, `name_confusable`, `not_found`
    /// (memory), `request_in_progress`, `idempotency_key_reused`.
    pub async fn acquire_lease(
        &self,
        request: &AcquireLease,
        idempotency_key: &str,
    ) -> Result<(Lease, Sent), Error> {
        let call = Call::new(Method::POST, self.api_url(&["leases"])?)
            .json(request)?
            .idempotency_key(idempotency_key)?;
        self.fetch_with_response(call).await
    }

    /// `POST /leases/renew`.
    ///
    /// Errors: `stale_fence` (409), `lease_expired` (410).
    pub async fn renew_lease(&self, request: &RenewLease) -> Result<Lease, Error> {
        let url = self.api_url(&["leases", "renew"])?;
        self.fetch(Call::new(Method::POST, url).json(request)?)
            .await
    }

    /// `POST /leases/release` (204).
    ///
    /// Errors: `stale_fence`.
    pub async fn release_lease(&self, request: &ReleaseLease) -> Result<(), Error> {
        let url = self.api_url(&["leases", "release"])?;
        self.send(Call::new(Method::POST, url).json(request)?)
            .await
            .map(drop)
    }

    /// `GET /ops/leases`: every lease of the tenant.
    pub async fn ops_leases(&self) -> Result<LeasePage, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "leases"])?))
            .await
    }

    /// `POST /ops/leases/{id}/force-release`.
    pub async fn force_release_lease(&self, id: LeaseId) -> Result<OpsLease, Error> {
        let id = id.to_string();
        let url = self.api_url(&["ops", "leases", &id, "force-release"])?;
        self.fetch(Call::new(Method::POST, url)).await
    }
}
