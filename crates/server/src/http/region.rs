//! The regional boundary (the client SDK seed, §9.3): a server may be configured
//! with one region (`--region EU`); a request that carries `X-Region-Constraint`
//! (one region, or several separated by commas: any of them will do) is refused
//! before anything else runs, with 421 `region_mismatch`, when the server's region
//! is not among them, or when the server has none. No header means no constraint.
//! Names compare without regard to ASCII case.
//!
//! What it does not cover: webhook targets (a delivery goes wherever its callback
//! points) and the retention archive (written where `archive_dir` is); both are the
//! deployment's to place.

use super::AppState;
use crate::error::ApiError;
use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use switchboard_proto::ErrorCode;

pub const REGION_CONSTRAINT: &str = "x-region-constraint";

/// Longest region name, and most names in one header.
const MAX_NAME: usize = 32;
const MAX_NAMES: usize = 16;

/// A region name: 1..=32 ASCII letters, digits, `-` or `_`.
pub fn valid_region(name: &str) -> bool {
    (1..=MAX_NAME).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
}

/// The regions a header value allows, or why it is not one.
fn allowed(value: &str) -> Result<Vec<&str>, String> {
    let names: Vec<&str> = value.split(',').map(str::trim).collect();
    if names.len() > MAX_NAMES || names.iter().any(|n| !valid_region(n)) {
        return Err(format!(
            "X-Region-Constraint must be one region name or up to {MAX_NAMES} separated by \
             commas, each 1 to {MAX_NAME} ASCII letters, digits, '-' or '_' (like \"EU\")"
        ));
    }
    Ok(names)
}

/// Whether a server in `region` meets the constraint `value`.
fn check(region: Option<&str>, value: &str) -> Result<(), ApiError> {
    let names = allowed(value).map_err(ApiError::validation)?;
    match region {
        Some(region) if names.iter().any(|n| n.eq_ignore_ascii_case(region)) => Ok(()),
        Some(region) => Err(ApiError::new(
            ErrorCode::RegionMismatch,
            format!(
                "this server is in region {region:?}, which X-Region-Constraint ({}) does not \
                 allow; nothing was done. Send the request to a server of an allowed region",
                names.join(", ")
            ),
        )),
        None => Err(ApiError::new(
            ErrorCode::RegionMismatch,
            format!(
                "this server has no region configured, so it cannot meet X-Region-Constraint \
                 ({}); nothing was done. Send the request to a server of that region (its \
                 operator sets --region)",
                names.join(", ")
            ),
        )),
    }
}

/// The layer: refuses a request whose constraint this server does not meet.
pub(super) async fn layer(State(state): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(value) = req.headers().get(REGION_CONSTRAINT) {
        let value = value.to_str().unwrap_or("\u{fffd}");
        if let Err(e) = check(state.config.region.as_deref(), value) {
            return e.into_response();
        }
    }
    next.run(req).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code(r: Result<(), ApiError>) -> Option<String> {
        r.err().and_then(|e| e.problem.code.clone())
    }

    #[test]
    fn a_constraint_is_met_by_any_region_it_names_and_nothing_else() {
        assert_eq!(code(check(Some("EU"), "EU")), None);
        assert_eq!(code(check(Some("eu"), "US, Eu")), None);
        assert_eq!(
            code(check(Some("US"), "EU")).as_deref(),
            Some("region_mismatch")
        );
        assert_eq!(code(check(None, "EU")).as_deref(), Some("region_mismatch"));
        for bad in ["", "E U", "EU,", "ü", &"x".repeat(33)] {
            assert_eq!(
                code(check(Some("EU"), bad)).as_deref(),
                Some("validation_failed"),
                "{bad:?}"
            );
        }
    }
}
