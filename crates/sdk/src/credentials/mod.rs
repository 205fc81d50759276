//! Where an agent's login lives: the token in the OS keyring, the server URL in a
//! small profiles file, and an environment override for machines without a keyring.
//!
//! Terms:
//! - a **profile** names one login (`default` unless told otherwise); a machine can
//!   hold several, for several servers or agents;
//! - the **token** is the agent's bearer token ([`Token`], redacted in `Debug` and
//!   `Display`). It is kept in the OS keyring through `keyring-core`, as the entry
//!   with service `switchboard` and user = the profile name, and nowhere else;
//! - the **server** is the base URL of the Switchboard server. It is not a secret:
//!   it is kept per profile in `$XDG_CONFIG_HOME/switchboard/profiles.toml`
//!   (`~/.config/…` without `XDG_CONFIG_HOME`), mode 0600, which never holds a token;
//! - the **backend** ([`Backend`]) is the keyring in use. On Linux [`TokenStore::os`]
//!   prefers the Secret Service (gnome-keyring, KWallet: persistent across reboots)
//!   and falls back to the kernel keyutils keyring (kept until reboot) when no
//!   Secret Service answers on the session bus. The choice is logged once per process;
//! - the **environment override**: `SWITCHBOARD_SERVER` and `SWITCHBOARD_TOKEN`, both
//!   set, win over any stored login ([`from_env`], [`resolve`]). That is the way in
//!   for containers and CI, where no keyring exists.
//!
//! ```
//! use switchboard_sdk::{Token, credentials::{TokenStore, resolve}};
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let store = TokenStore::mock(dir.path().join("profiles.toml")); // TokenStore::os()? for real
//! store.save("default", "http://127.0.0.1:7070", &Token::from("sb_ag_secret"))?;
//! let login = resolve(Some(&store), "default")?; // the environment would win
//! assert_eq!(login.server, "http://127.0.0.1:7070");
//! assert!(!format!("{login:?}").contains("sb_ag_secret"));
//! assert!(store.sign_out("default")?);
//! # Ok::<(), switchboard_sdk::credentials::CredentialError>(())
//! ```

mod env;
mod error;
mod login;
mod os;
mod profiles;
mod store;
#[cfg(test)]
mod tests;

use async_trait::async_trait;

pub use env::{REGION_VAR, SERVER_VAR, TOKEN_VAR, from_env, resolve};
pub use error::CredentialError;
/// keyring-core, for [`TokenStore::with_store`] (`Arc<keyring_core::CredentialStore>`).
pub use keyring_core;
pub use login::KeyringLogin;
pub use os::KEYRING_VAR;
pub use profiles::default_profiles_path;
pub use store::{Backend, TokenStore};

use crate::Token;

/// The keyring service name of every Switchboard entry.
pub const SERVICE: &str = "switchboard";

/// The profile used when none is named.
pub const DEFAULT_PROFILE: &str = "default";

/// A usable login: where the server is and the token to show it.
///
/// `Debug` shows the server and `Token(<redacted>)`.
#[derive(Clone, Debug)]
pub struct Credentials {
    /// The server's base URL, e.g. `http://127.0.0.1:7070`.
    pub server: String,
    /// The agent's bearer token.
    pub token: Token,
    /// The regions the server must be in (`X-Region-Constraint`): the profile's
    /// `region`, or `SWITCHBOARD_REGION_CONSTRAINT`; `None`: no constraint.
    pub region: Option<String>,
    /// The key the login signs its requests with (kept in the keyring next to the
    /// token: [`TokenStore::save_signing_key`]); `None`: unsigned. Redacted in
    /// `Debug`.
    pub signing_key: Option<crate::signing::SigningKey>,
}

impl Credentials {
    /// A [`Client`](crate::Client) for this server with this token.
    pub fn client(&self) -> Result<crate::Client, crate::Error> {
        crate::Client::builder()
            .region_constraint(self.region.clone())
            .signing_key(self.signing_key.clone())
            .build(&self.server, self.token.clone())
    }
}

/// A refresh hook, for the login flows to come: called when the server answers 401
/// with the credentials that were refused; returns a new token, or `None` when it
/// cannot get one (the caller then reports the 401).
///
/// An implementation that gets a new token should also [`TokenStore::save`] it, so
/// the next process starts with it. Errors must not carry a token
/// ([`CredentialError::Refresh`]).
#[async_trait]
pub trait Refresh: Send + Sync {
    /// Returns a replacement for `current.token`, or `None`.
    async fn refresh(&self, current: &Credentials) -> Result<Option<Token>, CredentialError>;
}

/// The [`Refresh`] of static tokens: there is never a new one.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoRefresh;

#[async_trait]
impl Refresh for NoRefresh {
    async fn refresh(&self, _current: &Credentials) -> Result<Option<Token>, CredentialError> {
        Ok(None)
    }
}

/// Checks a profile name: 1 to 64 of `[A-Za-z0-9._-]`, so it is a safe keyring user
/// name and TOML key on every platform.
pub(crate) fn check_profile(profile: &str) -> Result<(), CredentialError> {
    let reason = if profile.is_empty() {
        "it is empty"
    } else if profile.len() > 64 {
        "it is longer than 64 characters"
    } else if !profile
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b))
    {
        "it contains a character other than a letter, digit, `.`, `_` or `-`"
    } else {
        return Ok(());
    };
    Err(CredentialError::InvalidProfile { reason })
}

/// Checks a server URL: absolute, `http` or `https`, with a host and without a user
/// name or password (which would put a secret into the profiles file). `origin`
/// says where it came from, for the message; the URL itself is never repeated.
pub(crate) fn check_server(
    server: &str,
    origin: impl FnOnce() -> String,
) -> Result<(), CredentialError> {
    let reason = match reqwest::Url::parse(server) {
        Err(e) => e.to_string(),
        Ok(url) if !matches!(url.scheme(), "http" | "https") => {
            "the scheme is not http or https".to_owned()
        }
        Ok(url) if url.host_str().is_none_or(str::is_empty) => "it has no host".to_owned(),
        Ok(url) if !url.username().is_empty() || url.password().is_some() => {
            "it contains a user name or password; give the token with --token instead".to_owned()
        }
        Ok(_) => return Ok(()),
    };
    Err(CredentialError::InvalidServer {
        origin: origin(),
        reason,
    })
}
