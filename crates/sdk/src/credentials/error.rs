//! [`CredentialError`]: what went wrong with a stored or configured login, and how to
//! fix it.
//!
//! No message carries a secret. That is why nothing here wraps `keyring_core::Error`:
//! its `BadEncoding` and `BadDataFormat` variants hold the raw bytes of the stored
//! secret and print them with `Debug`. [`keyring`] turns one into a sentence first.
//! The server URL a user typed is not echoed either: a user who swapped
//! `--server` and `--token` would otherwise see the token in the error.

use std::path::PathBuf;

use super::Backend;

/// How to log in again; every "no login" message ends with it.
pub(crate) const LOGIN_HINT: &str = "run `switchboard agent login --server URL --token T`, \
     or set both SWITCHBOARD_SERVER and SWITCHBOARD_TOKEN";

/// An error of the token store or of the login in the environment.
///
/// `Display` says how to fix it; neither `Display` nor `Debug` ever contains a token.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CredentialError {
    /// No login for this profile: not in the environment, not in the store.
    #[error("not logged in to Switchboard (profile `{profile}`); {hint}", hint = login_hint(profile))]
    NotLoggedIn {
        /// The profile that was looked up.
        profile: String,
    },

    /// The profile has a server URL but the keyring has no token for it, for example
    /// because the kernel keyring forgot it at a reboot.
    #[error(
        "profile `{profile}` has a server but the {backend} keyring has no token for it{why}; {hint}",
        why = if backend.survives_reboot() { "" } else { " (it forgets tokens at reboot)" },
        hint = login_hint(profile)
    )]
    TokenMissing {
        /// The profile that was looked up.
        profile: String,
        /// Where the token was looked for.
        backend: Backend,
    },

    /// The keyring's signing key of a profile is not one (32 bytes, base64url).
    #[error(
        "the signing key saved for profile `{profile}` is damaged; log in again \
         (`switchboard agent login --profile {profile}`) or register a new key \
         (`switchboard agent key rotate --profile {profile}`)"
    )]
    CorruptKey {
        /// The profile whose key was read.
        profile: String,
    },

    /// Exactly one of `SWITCHBOARD_SERVER` and `SWITCHBOARD_TOKEN` is set.
    #[error(
        "{present} is set but {missing} is not; set both to log in from the environment, \
         or unset {present} to use the stored login"
    )]
    EnvIncomplete {
        /// The variable that is set.
        present: &'static str,
        /// The variable that is missing or empty.
        missing: &'static str,
    },

    /// A profile name outside `[A-Za-z0-9._-]{1,64}`.
    #[error(
        "invalid profile name: {reason}; use 1 to 64 letters, digits, `.`, `_` or `-` \
         (the default profile is `default`)"
    )]
    InvalidProfile {
        /// What is wrong with it (the name itself is not repeated).
        reason: &'static str,
    },

    /// The server URL is not an absolute `http` or `https` URL.
    #[error(
        "the server URL {origin} is not usable: {reason}; give an absolute http or https URL \
         such as http://127.0.0.1:7070"
    )]
    InvalidServer {
        /// Where the URL came from (`for profile \`x\`` or `in SWITCHBOARD_SERVER`).
        origin: String,
        /// What is wrong with it (the URL itself is not repeated).
        reason: String,
    },

    /// An empty token was given to save.
    #[error(
        "the token is empty; pass the agent token the server showed when the agent was created"
    )]
    EmptyToken,

    /// No OS keyring could be opened.
    #[error(
        "no OS keyring is available ({reason}); on Linux start a Secret Service such as \
         gnome-keyring, or run under `keyctl session - CMD` for the kernel keyring; \
         in containers and CI set SWITCHBOARD_SERVER and SWITCHBOARD_TOKEN instead"
    )]
    NoKeyring {
        /// Why (from the platform, without secrets).
        reason: String,
    },

    /// The keyring answered an operation with an error.
    #[error("the {backend} keyring could not {action} the token of profile `{profile}`: {detail}")]
    Keyring {
        /// The store that failed.
        backend: Backend,
        /// `save`, `read` or `delete`.
        action: &'static str,
        /// The profile.
        profile: String,
        /// What happened and what to do, without the secret.
        detail: String,
    },

    /// Neither `XDG_CONFIG_HOME` nor `HOME` (nor `APPDATA` on Windows) is set.
    #[error("cannot find the config directory for profiles.toml: set XDG_CONFIG_HOME or HOME")]
    NoConfigDir,

    /// The profiles file could not be read, parsed or written.
    #[error("{action} {path}: {detail}")]
    Profiles {
        /// `reading`, `writing`, `parsing`, …
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause (an I/O error or the TOML parser's message, without file contents).
        detail: String,
    },

    /// A [`Refresh`](super::Refresh) hook failed. Implementations must not put a token
    /// in `reason`.
    #[error("refreshing the token failed: {reason}")]
    Refresh {
        /// Why.
        reason: String,
    },
}

fn login_hint(profile: &str) -> String {
    if profile == super::DEFAULT_PROFILE {
        LOGIN_HINT.to_owned()
    } else {
        format!("{LOGIN_HINT} (with `--profile {profile}`)")
    }
}

/// Turns a keyring error into a [`CredentialError::Keyring`] whose text holds no
/// secret and says what to do.
pub(crate) fn keyring(
    backend: Backend,
    action: &'static str,
    profile: &str,
    error: keyring_core::Error,
) -> CredentialError {
    CredentialError::Keyring {
        backend,
        action,
        profile: profile.to_owned(),
        detail: describe(backend, error),
    }
}

/// What a keyring error means and what to do, without the secret.
pub(crate) fn describe(backend: Backend, error: keyring_core::Error) -> String {
    use keyring_core::Error as E;
    match error {
        E::NoStorageAccess(cause) => match backend {
            Backend::Keyutils => format!(
                "access denied ({cause}); this process has no session keyring it may write: \
                 run it under `keyctl session - CMD`, or log in to a full session"
            ),
            Backend::SecretService => format!(
                "access denied ({cause}); the keyring is locked or has no default \
                 collection: unlock it (log in to the desktop, or \
                 `echo -n PASSWORD | gnome-keyring-daemon --unlock`), or set \
                 SWITCHBOARD_KEYRING=keyutils to use the kernel keyring"
            ),
            _ => format!("access denied ({cause}); unlock the keyring and try again"),
        },
        E::PlatformFailure(cause) => format!("platform failure ({cause})"),
        // Both carry the stored bytes: never print them.
        E::BadEncoding(_) | E::BadDataFormat(..) => {
            "the stored token is not valid text; sign out and log in again".to_owned()
        }
        E::BadStoreFormat(reason) => format!("the keyring's data is malformed ({reason})"),
        E::TooLong(name, limit) => format!("{name} is longer than the keyring's limit of {limit}"),
        E::Invalid(name, reason) => format!("{name} is invalid ({reason})"),
        E::Ambiguous(entries) => format!(
            "{} entries match service `switchboard` and this profile; delete the extra ones \
             with your keyring's tool (for example `secret-tool clear service switchboard`)",
            entries.len()
        ),
        E::NoDefaultStore => "no credential store is set".to_owned(),
        E::NotSupportedByStore(what) => format!("not supported by this store ({what})"),
        E::NoEntry => "no such entry".to_owned(),
        // `keyring_core::Error` is non-exhaustive; a future variant gets a generic text
        // rather than its `Display`, which might hold data.
        _ => "an unexpected keyring error".to_owned(),
    }
}
