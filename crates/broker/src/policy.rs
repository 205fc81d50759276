//! The broker's policy file (TOML): which executables may have tokens for which
//! agent, from which login profile, with which scopes at most.
//!
//! ```toml
//! [[allow]]
//! agent = "reviewer"                       # what sidecars ask for
//! profile = "reviewer"                     # the login holding that agent [default: --profile]
//! executables = ["/opt/agents/venv/bin/python3"]   # absolute; compared canonicalized
//! scopes = ["agent:{agent_id}:read", "messages:send"]  # optional cap
//! ```
//!
//! `{agent_id}` in a scope stands for the host login's agent id. The file is read
//! whole at start (and on SIGHUP); anything wrong in it stops the broker with what
//! to fix, and no entry is partly applied.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use serde::Deserialize;

/// The largest policy file read (bytes).
const MAX_POLICY_BYTES: u64 = 1024 * 1024;

/// A checked policy.
#[derive(Debug, Clone)]
pub(super) struct Policy {
    pub(super) entries: Vec<Entry>,
}

/// One `[[allow]]` entry, checked: executables canonicalized, profile filled in.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    pub(super) agent: String,
    pub(super) profile: String,
    pub(super) executables: Vec<PathBuf>,
    pub(super) scopes: Option<Vec<String>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    allow: Vec<Allow>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Allow {
    agent: String,
    profile: Option<String>,
    executables: Vec<String>,
    scopes: Option<Vec<String>>,
}

impl Policy {
    /// Reads and checks the policy at `path`; `profile` is the default profile.
    pub(super) fn load(path: &Path, profile: &str) -> anyhow::Result<Self> {
        let meta = std::fs::metadata(path).with_context(|| {
            format!(
                "cannot read the broker policy {}: write one (see `switchboard agent broker \
                 --help` and docs/broker.md) or name another file (`switchboard agent broker \
                 --policy FILE`; the desktop app: --broker-policy FILE or \
                 SWITCHBOARD_BROKER_POLICY)",
                path.display()
            )
        })?;
        if meta.len() > MAX_POLICY_BYTES {
            bail!(
                "the broker policy {} is {} bytes; at most {MAX_POLICY_BYTES} are read",
                path.display(),
                meta.len()
            );
        }
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the broker policy {}", path.display()))?;
        Self::parse(&text, profile).with_context(|| format!("the broker policy {}", path.display()))
    }

    /// Checks the policy `text`.
    pub(super) fn parse(text: &str, profile: &str) -> anyhow::Result<Self> {
        let file: File = toml::from_str(text)?;
        if file.allow.is_empty() {
            bail!(
                "it allows nothing: add an [[allow]] entry with `agent`, `executables` and \
                 optionally `profile` and `scopes`"
            );
        }
        let mut agents = BTreeSet::new();
        let mut entries = Vec::new();
        for (i, allow) in file.allow.into_iter().enumerate() {
            let at = format!("[[allow]] #{} (agent {:?})", i + 1, allow.agent);
            entries.push(check(allow, profile).with_context(|| at.clone())?);
            let agent = &entries[entries.len() - 1].agent;
            if !agents.insert(agent.clone()) {
                bail!("{at}: the agent is listed twice; give it one entry");
            }
        }
        Ok(Self { entries })
    }

    /// The entry for `agent`.
    pub(super) fn entry(&self, agent: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.agent == agent)
    }

    /// The profiles the entries use.
    pub(super) fn profiles(&self) -> BTreeSet<String> {
        self.entries.iter().map(|e| e.profile.clone()).collect()
    }
}

fn check(allow: Allow, default_profile: &str) -> anyhow::Result<Entry> {
    let agent = allow.agent.trim().to_owned();
    if agent.is_empty() || agent.chars().any(char::is_control) {
        bail!("`agent` must be an agent's name");
    }
    let profile = allow
        .profile
        .unwrap_or_else(|| default_profile.to_owned())
        .trim()
        .to_owned();
    if profile.is_empty() {
        bail!("`profile` must name a login profile (`switchboard agent login --profile NAME`)");
    }
    if allow.executables.is_empty() {
        bail!(
            "`executables` lists no program: name the absolute paths of the programs that may \
             have this agent's tokens (a Python sidecar: its interpreter, e.g. the venv's \
             bin/python3)"
        );
    }
    let mut executables = Vec::new();
    for exe in &allow.executables {
        let path = Path::new(exe);
        if !path.is_absolute() {
            bail!("executable {exe:?} is not an absolute path");
        }
        let real = std::fs::canonicalize(path).with_context(|| {
            format!("executable {exe:?} cannot be resolved; install it or remove it from the list")
        })?;
        if !real.is_file() {
            bail!("executable {exe:?} is not a file");
        }
        executables.push(real);
    }
    let scopes = match allow.scopes {
        None => None,
        Some(scopes) if scopes.is_empty() => {
            bail!(
                "`scopes` is empty, which would allow no token; remove it to allow the login's scopes"
            )
        }
        Some(scopes) => {
            for scope in &scopes {
                if scope.is_empty() || scope.chars().any(|c| c.is_whitespace() || c.is_control()) {
                    bail!("scope {scope:?} is not one scope (one word, no spaces)");
                }
            }
            Some(scopes)
        }
    };
    Ok(Entry {
        agent,
        profile,
        executables,
        scopes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exe() -> String {
        std::env::current_exe().unwrap().display().to_string()
    }

    #[test]
    fn an_entry_gets_the_default_profile_and_canonical_executables() {
        let text = format!(
            "[[allow]]\nagent = \"reviewer\"\nexecutables = [{:?}]\nscopes = [\"messages:send\"]\n",
            exe()
        );
        let policy = Policy::parse(&text, "main").unwrap();
        let entry = policy.entry("reviewer").unwrap();
        assert_eq!(entry.profile, "main");
        assert_eq!(entry.executables, [std::fs::canonicalize(exe()).unwrap()]);
        assert_eq!(
            entry.scopes.as_deref(),
            Some(&["messages:send".to_owned()][..])
        );
        assert!(policy.entry("writer").is_none());
    }

    #[test]
    fn a_bad_policy_says_what_to_fix() {
        let exe = exe();
        for (text, says) in [
            ("", "allows nothing"),
            (
                "[[allow]]\nagent = \"a\"\nexecutables = []\n",
                "lists no program",
            ),
            (
                "[[allow]]\nagent = \"a\"\nexecutables = [\"python3\"]\n",
                "not an absolute path",
            ),
            (
                "[[allow]]\nagent = \"a\"\nexecutables = [\"/nonexistent/python3\"]\n",
                "cannot be resolved",
            ),
            (
                &format!("[[allow]]\nagent = \"a\"\nexecutables = [{exe:?}]\nscopes = []\n"),
                "`scopes` is empty",
            ),
            (
                &format!("[[allow]]\nagent = \"a\"\nexecutables = [{exe:?}]\nscopes = [\"a b\"]\n"),
                "not one scope",
            ),
            (
                &format!(
                    "[[allow]]\nagent = \"a\"\nexecutables = [{exe:?}]\n\
                     [[allow]]\nagent = \"a\"\nexecutables = [{exe:?}]\n"
                ),
                "listed twice",
            ),
            (
                &format!("[[allow]]\nagent = \"a\"\nexecutable = [{exe:?}]\n"),
                "unknown field",
            ),
        ] {
            let error = format!("{:#}", Policy::parse(text, "default").unwrap_err());
            assert!(error.contains(says), "{text:?}: {error}");
        }
    }
}
