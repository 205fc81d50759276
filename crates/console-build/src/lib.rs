//! The console build: `switchboard-ui` compiled to `wasm32-unknown-unknown` (profile
//! `console`: release, for size),
//! bound for the web by wasm-bindgen (the library, at the version the UI pins), shrunk
//! by `wasm-opt` when a safe one is at hand, plus `ui/index.html`, all in one
//! directory that a browser loads as is.
//!
//! Two callers, one build: `cargo xtask ui` (into `ui/dist`, which `--ui-dir` serves
//! in development and the browser tests load) and the server's build script, which
//! embeds the result in release builds, so `cargo install --path crates/cli` gives a
//! binary with the console inside.
//!
//! The wasm build is a nested `cargo` run. Called from a build script, it must use a
//! target directory of its own: the outer cargo holds the lock of the workspace's.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

pub mod embed;

/// The console's crate and the target it builds for.
pub const UI_PACKAGE: &str = "switchboard-ui";
pub const WASM_TARGET: &str = "wasm32-unknown-unknown";

/// The cargo profile of the wasm build (the workspace's `Cargo.toml`: size first).
pub const PROFILE: &str = "console";

/// What the built console is called: `index.html` imports `/<OUT_NAME>.js`, which
/// loads `/<OUT_NAME>_bg.wasm`.
pub const OUT_NAME: &str = "switchboard_ui";

/// The oldest `wasm-opt` (binaryen) trusted with wasm-bindgen 0.2.130 output.
/// Debian's binaryen 108 breaks it silently ("WebAssembly.Table.set(): Argument 1 is
/// invalid" at run time); npm's `binaryen@132` was checked to work.
pub const MIN_WASM_OPT: u32 = 132;

/// Where and how to build.
#[derive(Debug, Clone)]
pub struct Options {
    /// The workspace root (it holds `ui/`).
    pub workspace: PathBuf,
    /// Cargo's target directory for the wasm build.
    pub target_dir: PathBuf,
    /// The directory the console is written to; what was there is replaced.
    pub out_dir: PathBuf,
    /// The `cargo` to run.
    pub cargo: PathBuf,
    /// A `wasm-opt` to run on the bound wasm (see [`find_wasm_opt`]), or none.
    pub wasm_opt: Option<PathBuf>,
}

/// What a build produced.
#[derive(Debug, Clone)]
pub struct Built {
    /// [`Options::out_dir`].
    pub dir: PathBuf,
    /// Size of the served wasm, in bytes.
    pub wasm_bytes: u64,
    /// Its size before `wasm-opt`, when it ran.
    pub wasm_bytes_before_opt: Option<u64>,
}

impl Built {
    /// One line for a log: where, and how big the wasm is.
    pub fn summary(&self) -> String {
        let kib = |b: u64| b.div_ceil(1024);
        match self.wasm_bytes_before_opt {
            Some(before) => format!(
                "console built in {}: {} KiB of wasm ({} KiB before wasm-opt)",
                self.dir.display(),
                kib(self.wasm_bytes),
                kib(before)
            ),
            None => format!(
                "console built in {}: {} KiB of wasm (no wasm-opt)",
                self.dir.display(),
                kib(self.wasm_bytes)
            ),
        }
    }
}

/// Builds the console into [`Options::out_dir`].
pub fn build(options: &Options) -> Result<Built> {
    let ui = options.workspace.join("ui");
    if !ui.join("Cargo.toml").is_file() {
        bail!("no console sources in {}", ui.display());
    }
    let mut cargo = Command::new(&options.cargo);
    cargo
        .current_dir(&options.workspace)
        .args([
            "build",
            "--profile",
            PROFILE,
            "-p",
            UI_PACKAGE,
            "--target",
            WASM_TARGET,
        ])
        .arg("--target-dir")
        .arg(&options.target_dir);
    // Settings meant for the outer build (its flags, its target dir) must not leak
    // into this one: host flags such as `-C target-cpu=native` break a wasm build.
    for var in [
        "CARGO_ENCODED_RUSTFLAGS",
        "RUSTFLAGS",
        "CARGO_BUILD_RUSTFLAGS",
        "CARGO_TARGET_DIR",
        "CARGO_BUILD_TARGET",
        "CARGO_BUILD_TARGET_DIR",
    ] {
        cargo.env_remove(var);
    }
    run(&mut cargo).with_context(|| {
        format!(
            "building the console for {WASM_TARGET} (if the target is missing: \
             `rustup target add {WASM_TARGET}`)"
        )
    })?;

    let release = options.target_dir.join(WASM_TARGET).join(PROFILE);
    let wasm = ["switchboard-ui.wasm", "switchboard_ui.wasm"]
        .iter()
        .map(|name| release.join(name))
        .find(|path| path.is_file())
        .with_context(|| format!("no {UI_PACKAGE} wasm in {}", release.display()))?;

    let out = &options.out_dir;
    if out.exists() {
        std::fs::remove_dir_all(out).with_context(|| format!("clearing {}", out.display()))?;
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    wasm_bindgen_cli_support::Bindgen::new()
        .input_path(&wasm)
        .out_name(OUT_NAME)
        .typescript(false)
        .web(true)
        .and_then(|b| b.generate(out))
        .map_err(|e| anyhow::anyhow!("wasm-bindgen on {}: {e:#}", wasm.display()))?;

    let bound = out.join(format!("{OUT_NAME}_bg.wasm"));
    let before = file_size(&bound)?;
    let mut wasm_bytes_before_opt = None;
    if let Some(wasm_opt) = &options.wasm_opt {
        let optimized = out.join(format!("{OUT_NAME}_bg.opt.wasm"));
        run(Command::new(wasm_opt)
            .arg("-Oz")
            // What rustc's wasm32 target emits today; wasm-opt must accept it.
            .args(["--enable-bulk-memory", "--enable-nontrapping-float-to-int"])
            .args(["--enable-sign-ext", "--enable-mutable-globals"])
            .args(["--enable-reference-types", "--enable-multivalue"])
            .arg(&bound)
            .arg("-o")
            .arg(&optimized))
        .with_context(|| format!("{} on {}", wasm_opt.display(), bound.display()))?;
        std::fs::rename(&optimized, &bound)?;
        wasm_bytes_before_opt = Some(before);
    }

    let index = ui.join("index.html");
    std::fs::copy(&index, out.join("index.html"))
        .with_context(|| format!("copying {} into {}", index.display(), out.display()))?;
    Ok(Built {
        dir: out.clone(),
        wasm_bytes: file_size(&bound)?,
        wasm_bytes_before_opt,
    })
}

/// Adds the wasm32 target with rustup when it is missing. `Ok(false)` when there is no
/// rustup to ask (a distribution's Rust): the build then says what is missing.
pub fn ensure_wasm_target() -> Result<bool> {
    let Some(installed) = stdout(Command::new("rustup").args(["target", "list", "--installed"]))
    else {
        return Ok(false);
    };
    if installed.lines().any(|t| t.trim() == WASM_TARGET) {
        return Ok(true);
    }
    run(Command::new("rustup").args(["target", "add", WASM_TARGET]))?;
    Ok(true)
}

/// A `wasm-opt` that is safe to run: `SWITCHBOARD_WASM_OPT` if set (an empty value
/// means none), else the one on `PATH`; see [`check_wasm_opt`]. With `None` comes
/// the reason, for the log.
pub fn find_wasm_opt() -> (Option<PathBuf>, String) {
    let candidate = match std::env::var_os("SWITCHBOARD_WASM_OPT") {
        Some(v) if v.is_empty() => return (None, "SWITCHBOARD_WASM_OPT is empty".into()),
        Some(v) => PathBuf::from(v),
        None => PathBuf::from("wasm-opt"),
    };
    check_wasm_opt(&candidate)
}

/// `candidate` if it runs and is version [`MIN_WASM_OPT`] or newer.
pub fn check_wasm_opt(candidate: &Path) -> (Option<PathBuf>, String) {
    match wasm_opt_version(candidate) {
        Some(v) if v >= MIN_WASM_OPT => {
            (Some(candidate.to_owned()), format!("wasm-opt version {v}"))
        }
        Some(v) => (
            None,
            format!(
                "{} is version {v}, older than {MIN_WASM_OPT} (Debian's 108 breaks the console); \
                 `npm install binaryen@{MIN_WASM_OPT}` gives a good one",
                candidate.display()
            ),
        ),
        None => (None, format!("no {} found", candidate.display())),
    }
}

/// `wasm-opt --version` prints `wasm-opt version 132 (version_132)`.
fn wasm_opt_version(program: &Path) -> Option<u32> {
    let out = stdout(Command::new(program).arg("--version"))?;
    parse_wasm_opt_version(&out)
}

fn parse_wasm_opt_version(out: &str) -> Option<u32> {
    let mut words = out.split_whitespace();
    words.find(|w| *w == "version")?;
    words.next()?.parse().ok()
}

fn file_size(path: &Path) -> Result<u64> {
    Ok(std::fs::metadata(path)
        .with_context(|| format!("{} was not produced", path.display()))?
        .len())
}

/// Runs `cmd` with its stdout sent to stderr: in a build script, stdout is cargo's
/// instruction channel.
fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .stdout(std::io::stderr())
        .status()
        .with_context(|| format!("could not start {:?}", cmd.get_program()))?;
    if !status.success() {
        bail!("{:?} failed ({status})", cmd.get_program());
    }
    Ok(())
}

fn stdout(cmd: &mut Command) -> Option<String> {
    let out = cmd.output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::parse_wasm_opt_version;

    #[test]
    fn reads_the_binaryen_version() {
        assert_eq!(
            parse_wasm_opt_version("wasm-opt version 132 (version_132)\n"),
            Some(132)
        );
        assert_eq!(parse_wasm_opt_version("wasm-opt version 108\n"), Some(108));
        assert_eq!(parse_wasm_opt_version("something else"), None);
    }
}
