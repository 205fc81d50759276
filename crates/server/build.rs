//! Puts the console (ui/) inside the server, so a release binary serves it with no
//! `--ui-dir`: `cargo install --path crates/cli` gives a working console.
//!
//! Which console, if any:
//! - `SWITCHBOARD_UI_DIST=<dir>`: that built console (what `cargo xtask` passes after
//!   its own UI build, so the wasm is built once);
//! - else `SWITCHBOARD_EMBED_UI=0`: none; `SWITCHBOARD_EMBED_UI=1`: build it here and
//!   embed it, in any profile;
//! - else: build and embed in release builds; debug builds embed nothing, so an
//!   edit-compile-test cycle never waits for the wasm build (the console then comes
//!   from `--ui-dir`, which `cargo xtask run|test` pass).
//!
//! Building it here is a nested cargo run with its own target directory
//! (`<target>/<profile>/console-build`), see `crates/console-build`. `wasm-opt` runs
//! when `SWITCHBOARD_WASM_OPT` or `PATH` has a safe one.

use std::path::{Path, PathBuf};

fn main() {
    println!("cargo::rustc-check-cfg=cfg(switchboard_console)");
    for var in [
        "SWITCHBOARD_UI_DIST",
        "SWITCHBOARD_EMBED_UI",
        "SWITCHBOARD_WASM_OPT",
    ] {
        println!("cargo::rerun-if-env-changed={var}");
    }
    println!("cargo::rerun-if-changed=build.rs");
    // `sqlx::migrate!` embeds the migrations at compile time: a new one must
    // rebuild the crate (a proc macro cannot say so on stable).
    println!("cargo::rerun-if-changed=../../migrations");
    if let Err(e) = run() {
        // One readable error instead of a panic's backtrace.
        eprintln!("error: embedding the console: {e:#}");
        std::process::exit(1);
    }
}

fn run() -> anyhow::Result<()> {
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let dist = match std::env::var_os("SWITCHBOARD_UI_DIST").filter(|d| !d.is_empty()) {
        Some(dist) => {
            let dist = PathBuf::from(dist);
            println!("cargo::rerun-if-changed={}", dist.display());
            dist
        }
        None => {
            let wanted = match std::env::var("SWITCHBOARD_EMBED_UI").as_deref() {
                Ok("0") => false,
                Ok("1") => true,
                Ok(other) => anyhow::bail!("SWITCHBOARD_EMBED_UI must be 0 or 1, got {other:?}"),
                Err(_) => std::env::var("PROFILE").as_deref() == Ok("release"),
            };
            if !wanted {
                return Ok(());
            }
            build_console(&out_dir)?
        }
    };
    let embedded = switchboard_console_build::embed::embed(&dist, &out_dir)?;
    let (plain, stored) = embedded
        .sizes
        .iter()
        .fold((0, 0), |(p, s), (_, plain, stored)| (p + plain, s + stored));
    println!(
        "cargo::warning=console embedded from {}: {} files, {} KiB ({} KiB stored)",
        dist.display(),
        embedded.sizes.len() + 1,
        plain / 1024,
        stored / 1024
    );
    println!(
        "cargo::rustc-env=SWITCHBOARD_CONSOLE_ASSETS={}",
        embedded.assets_rs.display()
    );
    println!(
        "cargo::rustc-env=SWITCHBOARD_CONSOLE_INDEX={}",
        embedded.index_html.display()
    );
    println!("cargo::rustc-cfg=switchboard_console");
    Ok(())
}

/// Builds the console from this source tree into `out_dir/console-dist`.
fn build_console(out_dir: &Path) -> anyhow::Result<PathBuf> {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?);
    let workspace = manifest
        .ancestors()
        .nth(2)
        .filter(|w| w.join("ui").join("Cargo.toml").is_file())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "the console sources (ui/) are not beside this crate; build from the \
                 Switchboard repository, or set SWITCHBOARD_EMBED_UI=0 for a server \
                 without the console"
            )
        })?
        .to_path_buf();
    // What the console is made of: a change here rebuilds it.
    for input in [
        "ui/src",
        "ui/index.html",
        "ui/Cargo.toml",
        "crates/proto",
        "crates/names",
        "Cargo.lock",
    ] {
        println!(
            "cargo::rerun-if-changed={}",
            workspace.join(input).display()
        );
    }
    // `<target>/<profile>/build/<crate>-<hash>/out` → `<target>/<profile>`: a target
    // directory for the nested build that outlives this one, so it stays incremental.
    let target_dir = out_dir
        .ancestors()
        .nth(3)
        .ok_or_else(|| anyhow::anyhow!("unexpected OUT_DIR {}", out_dir.display()))?
        .join("console-build");
    if !switchboard_console_build::ensure_wasm_target()? {
        println!(
            "cargo::warning=no rustup: the console build needs the {} target installed",
            switchboard_console_build::WASM_TARGET
        );
    }
    let (wasm_opt, why) = switchboard_console_build::find_wasm_opt();
    if wasm_opt.is_none() {
        println!("cargo::warning=console: no wasm-opt ({why}); the wasm is served unoptimized");
    }
    let built = switchboard_console_build::build(&switchboard_console_build::Options {
        workspace,
        target_dir,
        out_dir: out_dir.join("console-dist"),
        cargo: std::env::var_os("CARGO")
            .map(PathBuf::from)
            .unwrap_or_else(|| "cargo".into()),
        wasm_opt,
    })?;
    println!("cargo::warning={}", built.summary());
    Ok(built.dir)
}
