//! A device login's refresh token kept in a keyring profile ([`KeyringLogin`]), for
//! every process that builds a client from that profile (the CLI's commands, the
//! local token broker of the CLI and of the desktop app).

use std::path::PathBuf;

use super::TokenStore;
use crate::login::RefreshTokenStore;
use crate::{Error, Token};

/// A device login's refresh token in the keyring profile. Every refresh takes an
/// exclusive lock on a file (beside the profile's local state, by convention
/// `<state>.login-lock`), reads the newest token and saves its successor before
/// letting go, so the processes of one login (`agent run` beside `agent send`, or
/// beside a broker) take turns: a refresh token used twice would end the login.
pub struct KeyringLogin {
    store: TokenStore,
    profile: String,
    server: String,
    lock: PathBuf,
}

impl KeyringLogin {
    /// The login of `profile` (at `server`) in `store`, refreshed under the lock
    /// file `lock` (made with its directory when missing).
    pub fn new(store: TokenStore, profile: String, server: String, lock: PathBuf) -> Self {
        Self {
            store,
            profile,
            server,
            lock,
        }
    }
}

impl RefreshTokenStore for KeyringLogin {
    fn lock(&self) -> Result<Box<dyn Send>, Error> {
        let failed = |e: std::io::Error| {
            Error::Login(format!(
                "cannot lock {} for the login's turn: {e}",
                self.lock.display()
            ))
        };
        if let Some(dir) = self.lock.parent() {
            std::fs::create_dir_all(dir).map_err(failed)?;
        }
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&self.lock)
            .map_err(failed)?;
        file.lock().map_err(failed)?;
        Ok(Box::new(file))
    }

    fn load(&self) -> Result<Token, Error> {
        match self.store.load(&self.profile) {
            Ok(Some(login)) => Ok(login.token),
            Ok(None) => Err(Error::Login(format!(
                "profile {:?} was logged out; log in again with `switchboard agent login`",
                self.profile
            ))),
            Err(e) => Err(Error::Login(e.to_string())),
        }
    }

    fn save(&self, token: &Token) -> Result<(), Error> {
        self.store
            .save(&self.profile, &self.server, token)
            .map_err(|e| Error::Login(e.to_string()))
    }
}
