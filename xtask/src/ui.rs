//! The console UI build into `ui/dist` (gitignored), which `--ui-dir` serves in
//! development and the browser tests load: `crates/console-build`, the same build the
//! server's build script embeds in release binaries.

use std::path::PathBuf;

use anyhow::Result;

use crate::cmd;
use crate::prereqs::Tools;

/// `<root>/ui/dist`, absolute.
pub(crate) fn dist_dir() -> PathBuf {
    cmd::root().join("ui").join("dist")
}

/// Builds the UI into [`dist_dir`] and returns that directory.
pub(crate) fn build(tools: &Tools) -> Result<PathBuf> {
    let built = switchboard_console_build::build(&switchboard_console_build::Options {
        workspace: cmd::root(),
        // The workspace's own target dir: xtask runs outside any cargo build, so the
        // wasm artifacts are shared with `cargo clippy --target wasm32-unknown-unknown`.
        target_dir: cmd::target_dir(),
        out_dir: dist_dir(),
        cargo: std::env::var_os("CARGO")
            .map(PathBuf::from)
            .unwrap_or_else(|| "cargo".into()),
        wasm_opt: tools.wasm_opt.clone(),
    })?;
    eprintln!("ui: {}", built.summary());
    Ok(built.dir)
}
