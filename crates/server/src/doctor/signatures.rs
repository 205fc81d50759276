//! The tenants' signature policies and how many of their agents sign (issue 39):
//! one finding. `off` is a warning (signatures of credentials without a key are
//! ignored); `optional` and `required` are fine.

use super::Finding;

/// Each tenant: its name, its policy, its agents, and how many of them have a
/// credential bound to a key. The same text on every backend.
pub(super) const QUERY: &str = "SELECT t.name, t.signature_policy, \
     (SELECT COUNT(*) FROM agents a WHERE a.tenant_id = t.id AND a.deleted_at IS NULL) AS agents, \
     (SELECT COUNT(DISTINCT c.agent_id) FROM request_keys k \
      JOIN tokens c ON c.hash = k.parent_hash AND c.tenant_id = k.tenant_id \
      WHERE k.tenant_id = t.id AND k.revoked_at IS NULL AND c.revoked_at IS NULL \
      AND k.binds_parent = 1) AS signing \
     FROM tenants t ORDER BY t.name";

/// The finding of [`QUERY`]'s rows; none when it could not run (an older schema:
/// the migrations finding says so).
pub(super) fn finding(
    rows: Result<Vec<(String, String, i64, i64)>, sqlx::Error>,
) -> Option<Finding> {
    let rows = rows.ok()?;
    let said: Vec<String> = rows
        .iter()
        .map(|(tenant, policy, agents, signing)| {
            format!("{tenant}: {policy}, {signing} of {agents} agents sign with a bound key")
        })
        .collect();
    let off: Vec<&str> = rows
        .iter()
        .filter(|(_, policy, _, _)| policy == "off")
        .map(|(tenant, _, _, _)| tenant.as_str())
        .collect();
    Some(if off.is_empty() {
        Finding::ok("signatures", said.join("; "))
    } else {
        Finding::warning(
            "signatures",
            said.join("; "),
            format!(
                "the signature policy of {} is off: agents' signatures are not checked unless \
                 their credential has a key; set it to optional or required in the console \
                 (Agents, Signed requests) or with PUT /api/v1/ops/signatures",
                off.join(", ")
            ),
        )
    })
}
