//! The console UI build: the `switchboard-ui` crate compiled to wasm32, bound with
//! `wasm-bindgen --target web`, plus `ui/index.html`, all in `ui/dist` (gitignored),
//! which the server serves at `/`.
//!
//! No wasm-opt: Debian's binaryen (108) silently breaks wasm-bindgen 0.2.130 output.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::cmd;
use crate::prereqs::Tools;

/// `<root>/ui/dist`, absolute.
pub(crate) fn dist_dir() -> PathBuf {
    cmd::root().join("ui").join("dist")
}

/// Builds the UI into [`dist_dir`] and returns that directory.
pub(crate) fn build(tools: &Tools) -> Result<PathBuf> {
    cmd::run(cmd::cargo().args([
        "build",
        "-p",
        "switchboard-ui",
        "--target",
        "wasm32-unknown-unknown",
        "--release",
    ]))?;

    let release = cmd::target_dir()
        .join("wasm32-unknown-unknown")
        .join("release");
    // Cargo keeps the bin name as is (`switchboard-ui.wasm`); accept the underscore
    // spelling too in case the target is ever renamed.
    let wasm = ["switchboard-ui.wasm", "switchboard_ui.wasm"]
        .iter()
        .map(|name| release.join(name))
        .find(|path| path.is_file())
        .with_context(|| format!("no switchboard-ui wasm in {}", release.display()))?;

    let dist = dist_dir();
    std::fs::create_dir_all(&dist).with_context(|| format!("creating {}", dist.display()))?;
    cmd::run(
        Command::new(&tools.wasm_bindgen)
            .args([
                "--target",
                "web",
                "--no-typescript",
                "--out-name",
                "switchboard_ui",
            ])
            .arg("--out-dir")
            .arg(&dist)
            .arg(&wasm),
    )?;

    let index = cmd::root().join("ui").join("index.html");
    std::fs::copy(&index, dist.join("index.html"))
        .with_context(|| format!("copying {} into {}", index.display(), dist.display()))?;

    let bound = dist.join("switchboard_ui_bg.wasm");
    let Ok(meta) = std::fs::metadata(&bound) else {
        bail!("wasm-bindgen produced no {}", bound.display());
    };
    eprintln!(
        "ui: built {} ({} KiB of wasm)",
        dist.display(),
        meta.len().div_ceil(1024)
    );
    Ok(dist)
}
