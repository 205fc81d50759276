//! The profiles file: each profile's server URL, never a token.
//!
//! ```toml
//! [profiles.default]
//! server = "http://127.0.0.1:7070"
//! region = "EU"   # optional: sent as X-Region-Constraint
//! ```
//!
//! Written whole to a temporary file with mode 0600 in the same directory (created
//! 0700), then renamed over the old one, so a reader never sees half a file and the
//! mode is right even if someone had widened the old file's.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

use super::CredentialError;

/// The file's contents.
///
/// Compatibility: additive only. New members go into [`Profile`] as optional fields;
/// members this version does not know are kept (`extra`) when it rewrites the file,
/// so an older CLI does not erase what a newer one wrote. No member may ever hold a
/// secret.
#[derive(Debug, Default, Serialize, Deserialize)]
pub(crate) struct ProfilesFile {
    #[serde(default)]
    profiles: BTreeMap<String, Profile>,
    #[serde(flatten)]
    extra: toml::Table,
}

#[derive(Debug, Serialize, Deserialize)]
struct Profile {
    server: String,
    /// The regions the server must be in, sent as `X-Region-Constraint`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    region: Option<String>,
    #[serde(flatten)]
    extra: toml::Table,
}

impl ProfilesFile {
    pub(crate) fn server(&self, profile: &str) -> Option<String> {
        self.profiles.get(profile).map(|p| p.server.clone())
    }

    pub(crate) fn region(&self, profile: &str) -> Option<String> {
        self.profiles.get(profile).and_then(|p| p.region.clone())
    }

    pub(crate) fn set_server(&mut self, profile: &str, server: &str) {
        self.profiles
            .entry(profile.to_owned())
            .and_modify(|p| server.clone_into(&mut p.server))
            .or_insert_with(|| Profile {
                server: server.to_owned(),
                region: None,
                extra: toml::Table::new(),
            });
    }

    /// Returns whether the profile was there.
    pub(crate) fn remove(&mut self, profile: &str) -> bool {
        self.profiles.remove(profile).is_some()
    }

    pub(crate) fn names(&self) -> Vec<String> {
        self.profiles.keys().cloned().collect()
    }
}

/// `$XDG_CONFIG_HOME/switchboard/profiles.toml`, else `$HOME/.config/switchboard/…`
/// (on Windows without either, `%APPDATA%\switchboard\profiles.toml`).
pub fn default_profiles_path() -> Result<PathBuf, CredentialError> {
    path_from(|name| std::env::var_os(name))
}

/// [`default_profiles_path`] over any variable lookup (tests).
pub(crate) fn path_from(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Result<PathBuf, CredentialError> {
    let var = |name| get(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    let config = var("XDG_CONFIG_HOME")
        .filter(|p| p.is_absolute())
        .or_else(|| var("HOME").map(|home| home.join(".config")))
        .or_else(|| if cfg!(windows) { var("APPDATA") } else { None })
        .ok_or(CredentialError::NoConfigDir)?;
    Ok(config.join("switchboard").join("profiles.toml"))
}

fn error(action: &'static str, path: &Path, detail: impl ToString) -> CredentialError {
    CredentialError::Profiles {
        action,
        path: path.to_owned(),
        detail: detail.to_string(),
    }
}

/// Reads the file; a missing file is an empty one.
pub(crate) fn read(path: &Path) -> Result<ProfilesFile, CredentialError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(ProfilesFile::default()),
        Err(e) => return Err(error("reading", path, e)),
    };
    // The parser's message only, not its rendering, which quotes the file's lines.
    toml::from_str(&text).map_err(|e| {
        let line = e
            .span()
            .map(|span| format!(" (line {})", text[..span.start].matches('\n').count() + 1))
            .unwrap_or_default();
        error(
            "parsing",
            path,
            format!(
                "{}{line}; fix or delete the file and log in again",
                e.message().trim()
            ),
        )
    })
}

/// Replaces the file atomically, mode 0600.
pub(crate) fn write(path: &Path, file: &ProfilesFile) -> Result<(), CredentialError> {
    let dir = path
        .parent()
        .filter(|d| !d.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    create_dir(dir)?;
    let text = toml::to_string(file).map_err(|e| error("serializing", path, e))?;

    let name = path
        .file_name()
        .map(|n| n.to_string_lossy())
        .unwrap_or_default();
    // Unique per process and per call, so two writers never share a temporary file.
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    let temp = dir.join(format!(".{name}.{}.{seq}.tmp", std::process::id()));
    let written = open_private(&temp)
        .and_then(|mut f| f.write_all(text.as_bytes()).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&temp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(error("writing", path, e));
    }
    Ok(())
}

fn create_dir(dir: &Path) -> Result<(), CredentialError> {
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder
        .create(dir)
        .map_err(|e| error("creating the directory", dir, e))
}

fn open_private(path: &Path) -> std::io::Result<std::fs::File> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let file = options.open(path)?;
    // `mode` only applies when the file is created; a leftover temp file keeps its own.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        file.set_permissions(std::fs::Permissions::from_mode(0o600))?;
    }
    Ok(file)
}
