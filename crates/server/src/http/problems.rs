//! Every error is a problem document, and the OpenAPI document says so: the derived
//! document lists `Problem` bodies as `application/json` and leaves out the errors
//! that every route shares (a request that cannot be read, no token, a token without
//! the scope, a body too large or of the wrong type). [`document`] adds them, and
//! the bearer token every route but the open ones takes. A JSON body whose fields
//! are all optional may be left out (the server reads no body as `{}`), so such a
//! body is not required.

use switchboard_proto::PROBLEM_JSON;
use utoipa::openapi::path::{Operation, ParameterIn};
use utoipa::openapi::security::{Http, HttpAuthScheme, SecurityRequirement, SecurityScheme};
use utoipa::openapi::{ContentBuilder, OpenApi, Ref, RefOr, Required, ResponseBuilder, Schema};

/// The name of the bearer scheme in `components.securitySchemes`.
const BEARER: &str = "bearer";

/// Operations that answer without a token: the capabilities, and the console's
/// login (it takes a one-time ticket) and logout (it ends the cookie's session).
const OPEN: &[(&str, &str)] = &[
    ("get", "/api/v1/capabilities"),
    ("post", "/api/v1/session"),
    ("delete", "/api/v1/session"),
];

/// Whether `method path` (as received: `/api/v1/…` or the seeds' `/v1/…`) is an
/// operation that takes no token, or the OpenAPI document: such a request is
/// never authenticated, whatever `Authorization` it carries.
pub(super) fn open(method: &str, path: &str) -> bool {
    let path = path.strip_prefix("/api").unwrap_or(path);
    path == "/v1/openapi.json"
        || OPEN
            .iter()
            .any(|(m, p)| m.eq_ignore_ascii_case(method) && p.strip_prefix("/api") == Some(path))
}

/// The errors every operation of a kind can answer, with when.
const READ: (u16, &str) = (
    400,
    "`validation_failed`, `malformed_json` or `idempotency_key_required`: the request \
     cannot be read (a path, query or header value, or the JSON body); \
     `digest_mismatch`: a signed request's body does not match its Content-Digest",
);
const UNAUTHORIZED: (u16, &str) = (
    401,
    "`unauthorized`: no bearer token, or one the server does not know; for an agent's \
     credential, `signature_required` (a credential bound to a key, or a tenant that \
     requires signatures: see `Accept-Signature`), `signature_invalid`, \
     `signature_expired` or `signature_replayed` (RFC 9421 signed requests)",
);
const FORBIDDEN: (u16, &str) = (
    403,
    "`forbidden`: the token lacks the scope, or a state-changing request came from \
     another origin",
);
const NOT_FOUND: (u16, &str) = (
    404,
    "`not_found`: it does not exist or is not visible to this token",
);
const IN_PROGRESS: (u16, &str) = (
    409,
    "`request_in_progress`: a request with this Idempotency-Key is still running",
);
const TOO_LARGE: (u16, &str) = (
    413,
    "`payload_too_large`: the body is larger than `max_body_bytes`",
);
const MEDIA_TYPE: (u16, &str) = (415, "`unsupported_media_type`: send `application/json`");
const UNPROCESSABLE: (u16, &str) = (
    422,
    "`validation_failed` (a well-formed body or query with values out of range), or \
     `idempotency_key_reused` (the key came with a different request)",
);

/// Rewrites every `Problem` body to `application/problem+json` and adds the shared
/// errors each operation can answer.
pub(super) fn document(doc: &mut OpenApi) {
    let components = doc.components.get_or_insert_with(Default::default);
    components.add_security_scheme(
        BEARER,
        SecurityScheme::Http(Http::new(HttpAuthScheme::Bearer)),
    );
    // Bodies that may be left out: objects without a required field.
    let optional: Vec<String> = components
        .schemas
        .iter()
        .filter(|(_, s)| matches!(s, RefOr::T(Schema::Object(o)) if o.required.is_empty()))
        .map(|(name, _)| format!("#/components/schemas/{name}"))
        .collect();
    for (path, item) in &mut doc.paths.paths {
        for (method, op) in [
            ("get", &mut item.get),
            ("put", &mut item.put),
            ("post", &mut item.post),
            ("delete", &mut item.delete),
            ("patch", &mut item.patch),
        ] {
            if let Some(op) = op {
                let open = OPEN.contains(&(method, path.as_str()));
                operation(op, open, method != "get");
                optional_body(op, &optional);
            }
        }
    }
}

/// Marks the JSON body as not required when its schema is one of `optional`.
fn optional_body(op: &mut Operation, optional: &[String]) {
    let Some(RefOr::T(body)) = &mut op.request_body else {
        return;
    };
    let all_optional = body.content.get("application/json").is_some_and(|c| {
        matches!(c, RefOr::T(c)
            if matches!(&c.schema, Some(RefOr::Ref(r)) if optional.contains(&r.ref_location)))
    });
    if all_optional {
        body.required = Some(Required::False);
        body.description = Some("May be left out: no body reads as `{}`.".to_owned());
    }
}

/// `open`: it takes no token; `write`: it changes state, so a request from another
/// origin is refused (403).
fn operation(op: &mut Operation, open: bool, write: bool) {
    for response in op.responses.responses.values_mut() {
        let RefOr::T(response) = response else {
            continue;
        };
        if let Some(content) = response.content.shift_remove("application/json") {
            let problem = matches!(&content, RefOr::T(c)
                if matches!(&c.schema, Some(RefOr::Ref(r)) if r.ref_location.ends_with("/Problem")));
            let media = if problem {
                PROBLEM_JSON
            } else {
                "application/json"
            };
            response.content.insert(media.to_owned(), content);
        }
    }
    let params = op.parameters.as_deref().unwrap_or_default();
    let has = |place: ParameterIn| {
        params
            .iter()
            .any(|p| matches!(p, RefOr::T(p) if p.parameter_in == place))
    };
    let idempotent = params.iter().any(|p| {
        matches!(p, RefOr::T(p) if p.parameter_in == ParameterIn::Header
            && p.name.eq_ignore_ascii_case("idempotency-key"))
    });
    let body = op.request_body.is_some();
    let mut shared = Vec::new();
    if body || !params.is_empty() {
        shared.push(READ);
    }
    if !open {
        shared.push(UNAUTHORIZED);
        op.security = Some(vec![SecurityRequirement::new::<_, [&str; 0], &str>(
            BEARER,
            [],
        )]);
    }
    if !open || write {
        shared.push(FORBIDDEN);
    }
    if has(ParameterIn::Path) {
        shared.push(NOT_FOUND);
    }
    if idempotent {
        shared.extend([IN_PROGRESS, UNPROCESSABLE]);
    }
    if has(ParameterIn::Query) {
        shared.push(UNPROCESSABLE);
    }
    if body {
        shared.extend([TOO_LARGE, MEDIA_TYPE, UNPROCESSABLE]);
    }
    for (status, description) in shared {
        op.responses
            .responses
            .entry(status.to_string())
            .or_insert_with(|| {
                ResponseBuilder::new()
                    .description(description)
                    .content(
                        PROBLEM_JSON,
                        ContentBuilder::new()
                            .schema(Some(Ref::from_schema_name("Problem")))
                            .build(),
                    )
                    .build()
                    .into()
            });
    }
}
