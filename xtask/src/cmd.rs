//! Small process helpers: where the workspace is, and running commands loudly.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The workspace root (the parent of `xtask/`).
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the workspace root")
        .to_path_buf()
}

/// Cargo's target directory: `CARGO_TARGET_DIR` if set, else `<root>/target`.
pub(crate) fn target_dir() -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) if !dir.is_empty() => root().join(dir),
        _ => root().join("target"),
    }
}

/// A `cargo` command (the one that runs xtask) in the workspace root.
pub(crate) fn cargo() -> Command {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root());
    test_env(&mut cmd);
    build_env(&mut cmd);
    cmd
}

/// What every test run gets, through cargo or started directly.
pub(crate) fn test_env(cmd: &mut Command) -> &mut Command {
    // Which database server a test suite runs on is the step's choice (it sets one),
    // never the caller's shell.
    cmd.env_remove(crate::postgres::URL_ENV)
        .env_remove(crate::mariadb::URL_ENV);
    // The chaos rows of every test run go to this target dir, where `chaos.rs`
    // clears and reads them.
    cmd.env("SWITCHBOARD_CHAOS_DIR", target_dir().join("chaos"));
    if let Some(dir) = PY_VERIFIERS.get() {
        cmd.env("SWITCHBOARD_TEST_PYVERIFY", dir);
    }
    if let Some(dir) = SCHEMATHESIS.get() {
        cmd.env("SWITCHBOARD_TEST_SCHEMATHESIS", dir);
    }
    if let Some((python, node)) = MCP_CLIENTS.get() {
        cmd.env("SWITCHBOARD_TEST_MCP_PY", python);
        if let Some(node) = node {
            cmd.env("SWITCHBOARD_TEST_MCP_NODE", node);
        }
    }
    cmd
}

/// How `cargo xtask test` builds, for every cargo it starts: the same variables on
/// each run, so no step rebuilds what an earlier one built. `None` removes one.
pub(crate) static BUILD_ENV: std::sync::OnceLock<Vec<(&'static str, Option<std::ffi::OsString>)>> =
    std::sync::OnceLock::new();

/// Gives `cmd` (a cargo, or a command that starts one) the [`BUILD_ENV`], if set.
pub(crate) fn build_env(cmd: &mut Command) -> &mut Command {
    for (name, value) in BUILD_ENV.get().into_iter().flatten() {
        match value {
            Some(value) => cmd.env(name, value),
            None => cmd.env_remove(name),
        };
    }
    cmd
}

/// Where the prerequisites installed the PyPI webhook verifiers; every test run
/// gets it as `SWITCHBOARD_TEST_PYVERIFY`.
pub(crate) static PY_VERIFIERS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Keeps where the prerequisites installed the PyPI tools, for every test run.
pub(crate) fn remember(tools: &crate::prereqs::Tools) {
    let _ = PY_VERIFIERS.set(tools.py_verifiers.clone());
    let _ = SCHEMATHESIS.set(tools.schemathesis.clone());
    let _ = MCP_CLIENTS.set((tools.mcp_python.clone(), tools.mcp_node.clone()));
}

/// Where the prerequisites installed the MCP clients `switchboard mcp` is tested
/// with (Python; TypeScript when npm is there): every test run gets them as
/// `SWITCHBOARD_TEST_MCP_PY` and `SWITCHBOARD_TEST_MCP_NODE`.
pub(crate) static MCP_CLIENTS: std::sync::OnceLock<(PathBuf, Option<PathBuf>)> =
    std::sync::OnceLock::new();

/// Where the prerequisites installed the pinned schemathesis; every test run gets
/// it as `SWITCHBOARD_TEST_SCHEMATHESIS`.
pub(crate) static SCHEMATHESIS: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();

/// Whether a graphical session is available (X11 or Wayland).
pub(crate) fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|value| !value.is_empty()))
}

/// The command line as a shell-like string, for echoing.
pub(crate) fn render(cmd: &Command) -> String {
    let quote = |s: &OsStr| {
        let s = s.to_string_lossy();
        if !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@".contains(c))
        {
            s.into_owned()
        } else {
            format!("'{}'", s.replace('\'', r"'\''"))
        }
    };
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
}

/// Echoes and runs `cmd`, failing unless it exits 0.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let line = render(cmd);
    eprintln!("$ {line}");
    let status = cmd
        .status()
        .with_context(|| format!("could not start `{line}`"))?;
    if !status.success() {
        bail!("`{line}` failed ({status})");
    }
    Ok(())
}

/// Runs `cmd` quietly and returns its stdout, or `None` if it could not start or
/// exited non-zero.
pub(crate) fn stdout(cmd: &mut Command) -> Option<String> {
    let output = cmd.output().ok()?;
    output
        .status
        .success()
        .then(|| String::from_utf8_lossy(&output.stdout).into_owned())
}
