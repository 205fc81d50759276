//! The deployment admin's API (scope `admin`): tenants.

use crate::TenantId;
use serde::{Deserialize, Serialize};
use time::OffsetDateTime;

/// `POST /api/v1/admin/tenants`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct CreateTenant {
    /// 1..=64 characters of `[A-Za-z0-9._-]`, unique in the deployment.
    pub name: String,
}

/// The answer to tenant creation: the tenant and the token of its first operator,
/// shown once (the server keeps only a hash).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantCreated {
    pub tenant_id: TenantId,
    pub name: String,
    /// Bearer token of the tenant's operator (`ops:read`, `ops:write`,
    /// `messages:send`, `metrics:read` in this tenant only). Store it now; it cannot
    /// be read again.
    pub operator_token: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
}

impl std::fmt::Debug for TenantCreated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TenantCreated")
            .field("tenant_id", &self.tenant_id)
            .field("name", &self.name)
            .field("operator_token", &"<redacted>")
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// One tenant as `GET /api/v1/admin/tenants` lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct TenantSummary {
    pub tenant_id: TenantId,
    pub name: String,
    #[serde(with = "time::serde::rfc3339")]
    pub created_at: OffsetDateTime,
    /// How many agents it has.
    pub agents: u64,
}
