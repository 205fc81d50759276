//! The environment override and the lookup order: environment, then the store.

use super::{CredentialError, Credentials, TokenStore, check_profile, check_server};
use crate::Token;

/// The server URL of the environment login.
pub const SERVER_VAR: &str = "SWITCHBOARD_SERVER";
/// The token of the environment login.
pub const TOKEN_VAR: &str = "SWITCHBOARD_TOKEN";
/// The regions the server must be in, for the environment login (optional).
pub const REGION_VAR: &str = "SWITCHBOARD_REGION_CONSTRAINT";

/// The login in `SWITCHBOARD_SERVER` and `SWITCHBOARD_TOKEN`, for containers and CI
/// without a keyring: `None` when neither is set (an empty variable counts as unset),
/// [`CredentialError::EnvIncomplete`] when only one is, and
/// [`CredentialError::InvalidServer`] when the URL is not http or https.
pub fn from_env() -> Result<Option<Credentials>, CredentialError> {
    from_lookup(|name| std::env::var(name).ok())
}

/// The login to use for `profile`: the environment's if set ([`from_env`]), else the
/// store's. [`CredentialError::NotLoggedIn`] (which says how to log in) when there is
/// none, including when there is no store (`None`, e.g. no keyring on this machine).
pub fn resolve(store: Option<&TokenStore>, profile: &str) -> Result<Credentials, CredentialError> {
    resolve_with(from_env()?, store, profile)
}

/// [`from_env`] over any variable lookup, so tests need not touch the process
/// environment.
pub(crate) fn from_lookup(
    get: impl Fn(&str) -> Option<String>,
) -> Result<Option<Credentials>, CredentialError> {
    let var = |name| {
        get(name)
            .map(|v| v.trim().to_owned())
            .filter(|v| !v.is_empty())
    };
    match (var(SERVER_VAR), var(TOKEN_VAR)) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(CredentialError::EnvIncomplete {
            present: SERVER_VAR,
            missing: TOKEN_VAR,
        }),
        (None, Some(_)) => Err(CredentialError::EnvIncomplete {
            present: TOKEN_VAR,
            missing: SERVER_VAR,
        }),
        (Some(server), Some(token)) => {
            check_server(&server, || format!("in {SERVER_VAR}"))?;
            Ok(Some(Credentials {
                server,
                token: Token::from(token),
                region: var(REGION_VAR),
                signing_key: None,
            }))
        }
    }
}

/// [`resolve`] with the environment's answer given.
pub(crate) fn resolve_with(
    env: Option<Credentials>,
    store: Option<&TokenStore>,
    profile: &str,
) -> Result<Credentials, CredentialError> {
    if let Some(credentials) = env {
        return Ok(credentials);
    }
    check_profile(profile)?;
    let stored = match store {
        Some(store) => store.load(profile)?,
        None => None,
    };
    stored.ok_or_else(|| CredentialError::NotLoggedIn {
        profile: profile.to_owned(),
    })
}
