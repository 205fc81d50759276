//! Opening the OS keyring, and which one [`TokenStore::os`](super::TokenStore::os)
//! picks.
//!
//! Linux has two: the Secret Service (a D-Bus service, usually gnome-keyring or
//! KWallet; encrypted on disk, kept across reboots, but only where a desktop session
//! or a started daemon provides it) and the kernel's keyutils keyring (always there,
//! in kernel memory, gone at reboot; it needs a session keyring the process may
//! write, which `keyctl session` provides). The persistent one is preferred; keyutils
//! is the fallback when nothing answers on the session bus. `SWITCHBOARD_KEYRING`
//! names one and turns the fallback off. The choice and its reason are logged once
//! per process, at `info` (`warn` for the fallback, whose tokens die at reboot).

use std::sync::{Arc, Once};

use keyring_core::CredentialStore;

use super::error::describe;
use super::{Backend, CredentialError};

/// Names the keyring to use, without fallback: `secret-service`, `keyutils`,
/// `keychain`, `credential-manager` or `mock`.
pub const KEYRING_VAR: &str = "SWITCHBOARD_KEYRING";

/// A fresh in-memory store.
pub(crate) fn mock() -> Arc<CredentialStore> {
    keyring_core::mock::Store::new().expect("creating keyring-core's mock store cannot fail")
}

/// Opens `backend`, or says why it cannot be opened here.
pub(crate) fn open(backend: Backend) -> Result<Arc<CredentialStore>, CredentialError> {
    let opened: keyring_core::Result<Arc<CredentialStore>> = match backend {
        #[cfg(all(
            unix,
            not(any(target_os = "macos", target_os = "ios", target_os = "android"))
        ))]
        Backend::SecretService => {
            zbus_secret_service_keyring_store::Store::new().map(|s| s as Arc<CredentialStore>)
        }
        #[cfg(target_os = "linux")]
        Backend::Keyutils => {
            linux_keyutils_keyring_store::Store::new().map(|s| s as Arc<CredentialStore>)
        }
        #[cfg(target_os = "macos")]
        Backend::Keychain => {
            apple_native_keyring_store::keychain::Store::new().map(|s| s as Arc<CredentialStore>)
        }
        #[cfg(target_os = "windows")]
        Backend::CredentialManager => {
            windows_native_keyring_store::Store::new().map(|s| s as Arc<CredentialStore>)
        }
        Backend::Mock => return Ok(mock()),
        other => {
            return Err(CredentialError::NoKeyring {
                reason: format!("the {other} keyring does not exist on this platform"),
            });
        }
    };
    opened.map_err(|e| CredentialError::NoKeyring {
        reason: format!(
            "the {backend} keyring did not open: {}",
            describe(backend, e)
        ),
    })
}

/// The keyring `TokenStore::os()` uses, logged once per process.
pub(crate) fn choose() -> Result<(Arc<CredentialStore>, Backend), CredentialError> {
    let forced = std::env::var(KEYRING_VAR)
        .ok()
        .filter(|v| !v.trim().is_empty());
    let (store, backend, why) = match forced {
        Some(name) => {
            let backend = parse(name.trim())?;
            (
                open(backend)?,
                backend,
                format!("{KEYRING_VAR}={}", name.trim()),
            )
        }
        None => automatic()?,
    };
    static LOGGED: Once = Once::new();
    LOGGED.call_once(|| {
        if backend.survives_reboot() {
            tracing::info!(keyring = %backend, reason = %why, "agent tokens are kept in the {backend} keyring");
        } else {
            tracing::warn!(
                keyring = %backend,
                reason = %why,
                "agent tokens are kept in the {backend} keyring, which forgets them at reboot"
            );
        }
    });
    Ok((store, backend))
}

pub(crate) fn parse(name: &str) -> Result<Backend, CredentialError> {
    Ok(match name {
        "secret-service" => Backend::SecretService,
        "keyutils" => Backend::Keyutils,
        "keychain" => Backend::Keychain,
        "credential-manager" => Backend::CredentialManager,
        "mock" => Backend::Mock,
        _ => {
            return Err(CredentialError::NoKeyring {
                reason: format!(
                    "{KEYRING_VAR} is `{name}`, not one of secret-service, keyutils, \
                     keychain, credential-manager or mock"
                ),
            });
        }
    })
}

/// Linux: Secret Service, else keyutils.
#[cfg(target_os = "linux")]
fn automatic() -> Result<(Arc<CredentialStore>, Backend, String), CredentialError> {
    let secret_service = match open(Backend::SecretService) {
        Ok(store) => {
            let why = "a Secret Service answered on the session bus".to_owned();
            return Ok((store, Backend::SecretService, why));
        }
        Err(CredentialError::NoKeyring { reason }) => reason,
        Err(other) => other.to_string(),
    };
    match open(Backend::Keyutils) {
        Ok(store) => Ok((
            store,
            Backend::Keyutils,
            format!("no Secret Service ({secret_service})"),
        )),
        Err(CredentialError::NoKeyring { reason }) => Err(CredentialError::NoKeyring {
            reason: format!("{secret_service}; {reason}"),
        }),
        Err(other) => Err(other),
    }
}

/// Elsewhere: the platform's one keyring.
#[cfg(not(target_os = "linux"))]
fn automatic() -> Result<(Arc<CredentialStore>, Backend, String), CredentialError> {
    let backend = if cfg!(target_os = "macos") {
        Backend::Keychain
    } else if cfg!(target_os = "windows") {
        Backend::CredentialManager
    } else {
        Backend::SecretService
    };
    Ok((open(backend)?, backend, "the platform's keyring".to_owned()))
}
