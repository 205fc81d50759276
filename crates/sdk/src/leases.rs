//! Memory instances and name + memory leases with fencing tokens
//! (`/api/v1/memories`, `/api/v1/leases`, `/api/v1/ops/leases`).

use reqwest::Method;
use switchboard_proto::{
    AcquireLease, BranchMemory, FENCING_TOKEN, FencingRejectionPage, ImportNames, ImportReport,
    Lease, LeaseAuditPage, LeaseId, LeasePage, Lineage, Memory, MemoryId, MemoryRecord,
    MemoryRecordPage, OpsLease, RegisterMemory, ReleaseLease, RenewLease,
};

/// What a record write requires of the stored version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition {
    /// Nothing: only for a record that does not exist yet (else 428).
    None,
    /// The version read before (`If-Match: "v3"`); else 412.
    IfMatch(u64),
    /// Create only (`If-None-Match: *`); 412 if it exists.
    Absent,
}

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

    fn record_call(
        &self,
        method: Method,
        memory: MemoryId,
        key: &str,
        token: u64,
    ) -> Result<Call, Error> {
        let memory = memory.to_string();
        let url = self.api_url(&["memories", &memory, "records", key])?;
        Call::new(method, url).header(FENCING_TOKEN, &token.to_string())
    }

    /// `PUT /memories/{id}/records/{key}` with the lease's fencing token.
    ///
    /// Errors: `stale_fence` (409: this holder lost the lease), `lease_expired`
    /// (410), `precondition_failed` (412), `precondition_required` (428).
    pub async fn put_record(
        &self,
        memory: MemoryId,
        key: &str,
        value: &serde_json::Value,
        token: u64,
        precondition: Precondition,
    ) -> Result<MemoryRecord, Error> {
        let mut call = self
            .record_call(Method::PUT, memory, key, token)?
            .json(value)?;
        call = match precondition {
            Precondition::None => call,
            Precondition::IfMatch(v) => call.header("if-match", &MemoryRecord::etag(v))?,
            Precondition::Absent => call.header("if-none-match", "*")?,
        };
        self.fetch(call).await
    }

    /// `GET /memories/{id}/records/{key}` with the lease's fencing token.
    pub async fn get_record(
        &self,
        memory: MemoryId,
        key: &str,
        token: u64,
    ) -> Result<MemoryRecord, Error> {
        self.fetch(self.record_call(Method::GET, memory, key, token)?)
            .await
    }

    /// `DELETE /memories/{id}/records/{key}` (204).
    pub async fn delete_record(
        &self,
        memory: MemoryId,
        key: &str,
        token: u64,
        if_match: Option<u64>,
    ) -> Result<(), Error> {
        let mut call = self.record_call(Method::DELETE, memory, key, token)?;
        if let Some(v) = if_match {
            call = call.header("if-match", &MemoryRecord::etag(v))?;
        }
        self.send(call).await.map(drop)
    }

    /// `GET /memories/{id}/records`: one page of the memory's records in key order,
    /// from `cursor` (a previous page's `next_cursor`, unchanged; `None` for the
    /// first page), at most `limit` (`None`: the server's default, 100; at most
    /// 1000). No fencing token: this is the baseline to resync from, readable by the
    /// tenant's agents and operators. The page's `next_cursor` is `None` on the last.
    ///
    /// Errors: `not_found` (no such memory in this tenant), `validation_failed`
    /// (400: a cursor the server did not give; 422: `limit` out of range).
    pub async fn list_records(
        &self,
        memory: MemoryId,
        cursor: Option<&str>,
        limit: Option<u32>,
    ) -> Result<MemoryRecordPage, Error> {
        let memory = memory.to_string();
        let mut call = Call::get(self.api_url(&["memories", &memory, "records"])?);
        if let Some(cursor) = cursor {
            call = call.query("cursor", cursor);
        }
        if let Some(limit) = limit {
            call = call.query("limit", &limit.to_string());
        }
        self.fetch(call).await
    }

    /// Every record of the memory in key order, page by page ([`list_records`]
    /// with pages of `limit`). Each record present for the whole walk comes once,
    /// whatever the holder writes meanwhile; one written or deleted during the walk
    /// may come or not.
    ///
    /// [`list_records`]: Self::list_records
    pub async fn all_records(
        &self,
        memory: MemoryId,
        limit: Option<u32>,
    ) -> Result<Vec<MemoryRecord>, Error> {
        let mut records = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let page = self.list_records(memory, cursor.as_deref(), limit).await?;
            records.extend(page.records);
            match page.next_cursor {
                Some(next) => cursor = Some(next),
                None => return Ok(records),
            }
        }
    }

    /// `PUT` (or `DELETE` with `on == false`) `/memories/{id}/subscribers/{agent}`:
    /// `memory_updated` events of the memory go to the agent's inbox.
    pub async fn subscribe_memory(
        &self,
        memory: MemoryId,
        agent: &str,
        on: bool,
    ) -> Result<(), Error> {
        let memory = memory.to_string();
        let url = self.api_url(&["memories", &memory, "subscribers", agent])?;
        let method = if on { Method::PUT } else { Method::DELETE };
        self.send(Call::new(method, url)).await.map(drop)
    }

    /// `GET /ops/fencing-rejections`: refused data-plane calls, newest first.
    pub async fn fencing_rejections(&self) -> Result<FencingRejectionPage, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "fencing-rejections"])?))
            .await
    }

    /// `GET /ops/lease-audit`: the lease audit trail (salted hashes), newest first.
    pub async fn lease_audit(&self) -> Result<LeaseAuditPage, Error> {
        self.fetch(Call::get(self.api_url(&["ops", "lease-audit"])?))
            .await
    }

    /// `POST /ops/names/import`: legacy names into the registry of canonical names.
    pub async fn import_names(&self, request: &ImportNames) -> Result<ImportReport, Error> {
        let url = self.api_url(&["ops", "names", "import"])?;
        self.fetch(Call::new(Method::POST, url).json(request)?)
            .await
    }
}
