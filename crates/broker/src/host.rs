//! A host's connected client for a login profile: the broker's logins, and the
//! client of every other `switchboard agent` command. The login is
//! `SWITCHBOARD_SERVER` + `SWITCHBOARD_TOKEN` when both are set, else the profile
//! in the OS keyring (`switchboard_sdk::credentials`); a device login's refresh
//! token rotates in the keyring under a lock file ([`KeyringLogin`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use switchboard_sdk::credentials::{self, Credentials, KeyringLogin, TokenStore};
use switchboard_sdk::login::{MemoryRefreshStore, RefreshTokenStore, is_refresh_token};
use switchboard_sdk::{Client, ClientBuilder};

/// The bearer of requests that need none (capabilities, the OAuth endpoints).
pub const ANONYMOUS: &str = "anonymous";

/// The login of `profile`: from the environment when set (`true`), else the
/// keyring profile.
pub fn credentials(profile: &str) -> anyhow::Result<(Credentials, bool)> {
    if let Some(credentials) = credentials::from_env()? {
        return Ok((credentials, true));
    }
    let store = TokenStore::os().ok();
    Ok((credentials::resolve(store.as_ref(), profile)?, false))
}

/// A client builder trusting the CA certificates of the PEM file `ca_file` besides
/// the system's (a server whose certificate a private CA signed).
pub fn client_builder(ca_file: Option<&Path>) -> anyhow::Result<ClientBuilder> {
    let mut builder = Client::builder();
    if let Some(path) = ca_file {
        let pem = std::fs::read(path)
            .with_context(|| format!("cannot read the CA file {}", path.display()))?;
        builder = builder
            .ca_pem(&pem)
            .with_context(|| format!("the CA file {}", path.display()))?;
    }
    Ok(builder)
}

/// A client for the login of `profile` built on `builder`, after checking that the
/// server speaks this client's API (`GET /api/v1/capabilities`, one attempt of at
/// most 3 s): another major version is refused with what to do. A server that does
/// not answer is let pass: the caller retries. A device login's refresh token
/// rotates in the keyring under the lock file `lock` (or, from the environment, in
/// memory).
pub async fn connect(
    profile: &str,
    builder: ClientBuilder,
    lock: PathBuf,
) -> anyhow::Result<Client> {
    let (credentials, from_env) = credentials(profile)?;
    let check = builder
        .clone()
        .retry(switchboard_sdk::RetryPolicy::none())
        .request_timeout(std::time::Duration::from_secs(3))
        // The capabilities are open: no credential goes to the check.
        .build(&credentials.server, ANONYMOUS)
        .with_context(|| format!("cannot use the server URL {}", credentials.server))?;
    if let Err(e @ switchboard_sdk::Error::Incompatible { .. }) = check.check_server().await {
        return Err(e.into());
    }
    let builder = builder
        .region_constraint(credentials.region.clone())
        .signing_key(credentials.signing_key.clone());
    if is_refresh_token(&credentials.token) {
        let store: Arc<dyn RefreshTokenStore> = if from_env {
            Arc::new(MemoryRefreshStore::new(credentials.token))
        } else {
            Arc::new(KeyringLogin::new(
                TokenStore::os()?,
                profile.to_owned(),
                credentials.server.clone(),
                lock,
            ))
        };
        return builder
            .build_with_login(&credentials.server, store)
            .with_context(|| format!("cannot use the server URL {}", credentials.server));
    }
    builder
        .build(&credentials.server, credentials.token)
        .with_context(|| format!("cannot use the server URL {}", credentials.server))
}

/// The lock file of `profile`'s device login when its local state is the default
/// one (`<data dir>/agents/<profile>.db`): `<data dir>/agents/<profile>.login-lock`,
/// `data_dir` being `$XDG_DATA_HOME/switchboard` (the server's `Config::data_dir`).
pub fn default_lock(data_dir: &Path, profile: &str) -> PathBuf {
    data_dir
        .join("agents")
        .join(format!("{profile}.login-lock"))
}

/// `$XDG_CONFIG_HOME/switchboard`, else `~/.config/switchboard`.
pub fn config_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("XDG_CONFIG_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(dir).join("switchboard");
    }
    match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
        Some(home) => PathBuf::from(home).join(".config/switchboard"),
        None => PathBuf::from(".switchboard"),
    }
}
