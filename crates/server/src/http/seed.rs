//! The seeds' spelling in the OpenAPI document: what the derived document cannot
//! say (serde aliases, the events' second name for their sequence number, and the
//! `/v1` paths the seeds use; every `/api/v1` path answers there too, `mod.rs`'s
//! `seed_alias`, and the ones the seeds name are listed).

/// The `/v1` paths the seeds name, listed as copies of their `/api/v1` operations.
const SEED_PATHS: &[&str] = &[
    "/api/v1/capabilities",
    "/api/v1/memories",
    "/api/v1/memories/branch",
    "/api/v1/leases",
    "/api/v1/leases/renew",
    "/api/v1/leases/release",
    // Mounted by `records.rs`.
    "/api/v1/memories/{memory_id}/records",
];

/// Serde aliases of `AcquireLease` (alias, field): utoipa does not see aliases.
const SEED_ALIASES: &[(&str, &str)] = &[("owner_client_id", "owner_client")];

/// Adds what the derived document cannot say: `AcquireLease`'s seed aliases as
/// properties (the field they alias is then no longer required on its own), and the
/// seed's `/v1` paths as copies of the `/api/v1` operations.
pub(super) fn document(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{RefOr, Schema};
    sequence_number(doc);
    let schemas = doc.components.as_mut().map(|c| &mut c.schemas);
    if let Some(Some(RefOr::T(Schema::Object(acquire)))) =
        schemas.map(|s| s.get_mut("AcquireLease"))
    {
        for &(alias, field) in SEED_ALIASES {
            let Some(RefOr::T(Schema::Object(mut property))) =
                acquire.properties.get(field).cloned()
            else {
                continue;
            };
            property.description = Some(format!(
                "`{field}` as the names-and-leases seed spells it; send one of the two"
            ));
            acquire
                .properties
                .insert(alias.to_owned(), RefOr::T(Schema::Object(property)));
            if acquire.required.iter().any(|r| r == field) {
                acquire.required.retain(|r| r != field);
                acquire.description = Some(format!(
                    "{}\n\nOne of `{field}` and `{alias}` is required.",
                    acquire.description.take().unwrap_or_default()
                ));
            }
        }
    }
    for &path in SEED_PATHS {
        let Some(mut item) = doc.paths.paths.get(path).cloned() else {
            continue;
        };
        let seed = path.trim_start_matches("/api");
        for op in [&mut item.get, &mut item.post].into_iter().flatten() {
            op.operation_id = op.operation_id.take().map(|id| format!("{id}_seed"));
            op.summary = Some(format!("Alias of {path} for clients of the seeds"));
        }
        doc.paths.paths.insert(seed.to_owned(), item);
    }
}

/// `InboxEvent` is written with its sequence number under both names (`seq`, and
/// the notifications seed's `sequence_number`): the derived schema has one.
fn sequence_number(doc: &mut utoipa::openapi::OpenApi) {
    use utoipa::openapi::{RefOr, Schema};
    let Some(RefOr::T(Schema::Object(event))) = doc
        .components
        .as_mut()
        .and_then(|c| c.schemas.get_mut("InboxEvent"))
    else {
        return;
    };
    if let Some(RefOr::T(Schema::Object(seq))) = event.properties.get("seq").cloned() {
        let mut named = seq;
        named.description =
            Some("`seq` as the notifications seed names it: always equal to `seq`".to_owned());
        event.properties.insert(
            "sequence_number".to_owned(),
            RefOr::T(Schema::Object(named)),
        );
        event.required.push("sequence_number".to_owned());
    }
}
