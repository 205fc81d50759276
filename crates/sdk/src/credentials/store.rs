//! [`TokenStore`]: tokens in a keyring, server URLs in the profiles file.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use keyring_core::{CredentialStore, Entry};

use super::error::keyring;
use super::{CredentialError, Credentials, SERVICE, check_profile, check_server, os, profiles};
use crate::Token;

/// The keyring a [`TokenStore`] keeps tokens in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Backend {
    /// The freedesktop Secret Service over D-Bus (gnome-keyring, KWallet): on disk,
    /// encrypted, kept across reboots.
    SecretService,
    /// The Linux kernel's keyutils keyring: in kernel memory, gone at reboot.
    Keyutils,
    /// The macOS Keychain.
    Keychain,
    /// The Windows Credential Manager.
    CredentialManager,
    /// keyring-core's in-memory mock store ([`TokenStore::mock`]).
    Mock,
    /// A store handed to [`TokenStore::with_store`].
    Custom,
}

impl Backend {
    /// Whether a token saved here survives a reboot.
    pub fn survives_reboot(self) -> bool {
        matches!(
            self,
            Self::SecretService | Self::Keychain | Self::CredentialManager
        )
    }
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::SecretService => "Secret Service",
            Self::Keyutils => "kernel keyutils",
            Self::Keychain => "macOS Keychain",
            Self::CredentialManager => "Windows Credential Manager",
            Self::Mock => "in-memory mock",
            Self::Custom => "custom",
        })
    }
}

/// Saved logins: each profile's token in a keyring (service `switchboard`, user = the
/// profile), its server URL in the profiles file.
///
/// Calls block (the keyring answers over D-Bus or a system call); from async code
/// they are short enough to call directly at start-up, or use `spawn_blocking`.
#[derive(Clone)]
pub struct TokenStore {
    store: Arc<CredentialStore>,
    backend: Backend,
    profiles: PathBuf,
}

impl fmt::Debug for TokenStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TokenStore")
            .field("backend", &self.backend)
            .field("profiles", &self.profiles)
            .finish()
    }
}

impl TokenStore {
    /// The OS keyring, chosen as the module docs say (on Linux: Secret Service, else
    /// kernel keyutils; `SWITCHBOARD_KEYRING=secret-service|keyutils` forces one),
    /// with the profiles file at [`default_profiles_path`](super::default_profiles_path).
    pub fn os() -> Result<Self, CredentialError> {
        let (store, backend) = os::choose()?;
        Ok(Self {
            store,
            backend,
            profiles: profiles::default_profiles_path()?,
        })
    }

    /// One OS keyring by name, without fallback, with the default profiles file.
    /// [`Backend::Mock`] gives a fresh mock store; [`Backend::Custom`] is refused.
    pub fn open(backend: Backend) -> Result<Self, CredentialError> {
        Ok(Self {
            store: os::open(backend)?,
            backend,
            profiles: profiles::default_profiles_path()?,
        })
    }

    /// Any keyring-core store (tests, or a store this crate does not pick itself).
    pub fn with_store(store: Arc<CredentialStore>, profiles_path: PathBuf) -> Self {
        Self {
            store,
            backend: Backend::Custom,
            profiles: profiles_path,
        }
    }

    /// An in-memory keyring (keyring-core's mock store), for tests. The profiles file
    /// is real; give it a temporary path.
    pub fn mock(profiles_path: PathBuf) -> Self {
        Self {
            store: os::mock(),
            backend: Backend::Mock,
            profiles: profiles_path,
        }
    }

    /// The same keyring with another profiles file.
    pub fn with_profiles_path(mut self, profiles_path: PathBuf) -> Self {
        self.profiles = profiles_path;
        self
    }

    /// Which keyring holds the tokens.
    pub fn backend(&self) -> Backend {
        self.backend
    }

    /// Where the server URLs are kept.
    pub fn profiles_path(&self) -> &Path {
        &self.profiles
    }

    /// Stores `token` for `profile` in the keyring, then `server` in the profiles file.
    /// Replaces an earlier login of the same profile. The server must be an http or
    /// https URL; an empty token is refused.
    pub fn save(&self, profile: &str, server: &str, token: &Token) -> Result<(), CredentialError> {
        check_profile(profile)?;
        check_server(server, || format!("for profile `{profile}`"))?;
        if token.expose().trim().is_empty() {
            return Err(CredentialError::EmptyToken);
        }
        self.entry(profile, "save")?
            .set_password(token.expose())
            .map_err(|e| keyring(self.backend, "save", profile, e))?;
        let mut file = profiles::read(&self.profiles)?;
        file.set_server(profile, server);
        profiles::write(&self.profiles, &file)
    }

    /// The saved login of `profile`: `None` if the profiles file does not know it;
    /// [`CredentialError::TokenMissing`] if it does but the keyring has no token.
    pub fn load(&self, profile: &str) -> Result<Option<Credentials>, CredentialError> {
        check_profile(profile)?;
        let file = profiles::read(&self.profiles)?;
        let Some(server) = file.server(profile) else {
            return Ok(None);
        };
        match self.entry(profile, "read")?.get_password() {
            Ok(token) => Ok(Some(Credentials {
                server,
                token: Token::from(token),
                region: file.region(profile),
                signing_key: self.signing_key(profile)?,
            })),
            Err(keyring_core::Error::NoEntry) => Err(CredentialError::TokenMissing {
                profile: profile.to_owned(),
                backend: self.backend,
            }),
            Err(e) => Err(keyring(self.backend, "read", profile, e)),
        }
    }

    /// Forgets `profile`: deletes its keyring entries (every one that matches, should
    /// a keyring hold duplicates), then its line in the profiles file. Returns whether
    /// anything was removed. If the keyring refuses, the profile is left in place so a
    /// second try finds it.
    pub fn sign_out(&self, profile: &str) -> Result<bool, CredentialError> {
        check_profile(profile)?;
        let delete = |entry: &Entry| match entry.delete_credential() {
            Ok(()) => Ok(true),
            Err(keyring_core::Error::NoEntry) => Ok(false),
            Err(e) => Err(keyring(self.backend, "delete", profile, e)),
        };
        let removed_token = match self.entry(profile, "delete")?.delete_credential() {
            Ok(()) => true,
            Err(keyring_core::Error::NoEntry) => false,
            Err(keyring_core::Error::Ambiguous(entries)) => {
                let mut any = false;
                for entry in &entries {
                    any |= delete(entry)?;
                }
                any
            }
            Err(e) => return Err(keyring(self.backend, "delete", profile, e)),
        };
        let removed_key = match self.key_entry(profile, "delete")?.delete_credential() {
            Ok(()) => true,
            Err(keyring_core::Error::NoEntry) => false,
            Err(e) => return Err(keyring(self.backend, "delete", profile, e)),
        };
        let mut file = profiles::read(&self.profiles)?;
        let removed_profile = file.remove(profile);
        if removed_profile {
            profiles::write(&self.profiles, &file)?;
        }
        Ok(removed_token || removed_key || removed_profile)
    }

    /// Keeps `key`, the private key `profile`'s requests are signed with, in the
    /// keyring next to its token (its own entry: user `<profile>#signing-key`;
    /// profile names have no `#`). Replaces the one it had.
    pub fn save_signing_key(
        &self,
        profile: &str,
        key: &crate::signing::SigningKey,
    ) -> Result<(), CredentialError> {
        check_profile(profile)?;
        let encoded = URL_SAFE_NO_PAD.encode(key.to_bytes());
        self.key_entry(profile, "save")?
            .set_password(&encoded)
            .map_err(|e| keyring(self.backend, "save", profile, e))
    }

    /// The signing key of `profile`, if it has one.
    pub fn signing_key(
        &self,
        profile: &str,
    ) -> Result<Option<crate::signing::SigningKey>, CredentialError> {
        check_profile(profile)?;
        let encoded = match self.key_entry(profile, "read")?.get_password() {
            Ok(encoded) => encoded,
            Err(keyring_core::Error::NoEntry) => return Ok(None),
            Err(e) => return Err(keyring(self.backend, "read", profile, e)),
        };
        let bytes: [u8; 32] = URL_SAFE_NO_PAD
            .decode(encoded.trim())
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| CredentialError::CorruptKey {
                profile: profile.to_owned(),
            })?;
        Ok(Some(crate::signing::SigningKey::from_bytes(&bytes)))
    }

    fn key_entry(&self, profile: &str, action: &'static str) -> Result<Entry, CredentialError> {
        self.store
            .build(SERVICE, &format!("{profile}#signing-key"), None)
            .map_err(|e| keyring(self.backend, action, profile, e))
    }

    /// The profiles that have a server in the profiles file, sorted.
    pub fn profiles(&self) -> Result<Vec<String>, CredentialError> {
        Ok(profiles::read(&self.profiles)?.names())
    }

    fn entry(&self, profile: &str, action: &'static str) -> Result<Entry, CredentialError> {
        self.store
            .build(SERVICE, profile, None)
            .map_err(|e| keyring(self.backend, action, profile, e))
    }
}
