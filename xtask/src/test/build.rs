//! The one build of `cargo xtask test`, and the test binaries it made, which the
//! steps after it run again on other databases.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::{Counts, each_stdout_line, run_counting};
use crate::{cmd, prereqs};

/// The variables of every cargo run of `cargo xtask test` ([`cmd::BUILD_ENV`]):
///
/// - clippy as the workspace's compiler (`RUSTC_WORKSPACE_WRAPPER`, the variables
///   `cargo clippy` sets): the code is linted, `-D warnings`, while it is built, not
///   in a second pass that compiles every dependency again in check mode;
/// - `SWITCHBOARD_EMBED_UI=1`: the server's build script builds the console
///   (`crates/console-build`) and embeds it, as in a release build, so the desktop app
///   and `switchboard` of the test build have the console inside; the nested console
///   build inherits the wrapper, so the UI's crates are linted for wasm32 too;
/// - never the caller's `SWITCHBOARD_UI_DIST`, and the wasm-opt the prerequisites
///   found (`PATH` may lack it).
pub(super) fn build_env(tools: &prereqs::Tools) -> Vec<(&'static str, Option<std::ffi::OsString>)> {
    vec![
        (
            "RUSTC_WORKSPACE_WRAPPER",
            Some(tools.clippy_driver.clone().into()),
        ),
        // `cargo clippy -- -D warnings`, in the form clippy-driver reads.
        (
            "CLIPPY_ARGS",
            Some("-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__".into()),
        ),
        ("SWITCHBOARD_EMBED_UI", Some("1".into())),
        ("SWITCHBOARD_UI_DIST", None),
        (
            "SWITCHBOARD_WASM_OPT",
            Some(tools.wasm_opt.clone().map(Into::into).unwrap_or_default()),
        ),
    ]
}

/// What [`build`] made.
pub(super) struct Built {
    /// The console the server's build script built (`SWITCHBOARD_UI_DIR` of the
    /// browser tests).
    pub(super) console: PathBuf,
    /// `switchboard` and `switchboard-desktop`, with that console inside.
    pub(super) server: PathBuf,
    pub(super) desktop: PathBuf,
    /// Every test binary, for the steps that run some of them again.
    tests: Vec<TestBinary>,
}

/// A test binary of the build: a library's unit tests, or an integration test.
struct TestBinary {
    /// `lib` (unit tests), `test`, `bin`, `example`, … as cargo names target kinds.
    kinds: Vec<String>,
    name: String,
    path: PathBuf,
    /// Its package's directory, where `cargo test` runs it.
    dir: PathBuf,
}

impl TestBinary {
    fn is_test(&self) -> bool {
        self.kinds.iter().any(|k| k == "test")
    }

    /// A library's unit tests (`lib`, `rlib`, `cdylib`, …).
    fn is_lib(&self) -> bool {
        self.kinds.iter().any(|k| k.ends_with("lib"))
    }
}

/// Which test binaries a step runs.
pub(super) enum Select<'a> {
    /// Every library's unit tests (`cargo test --lib`).
    Libs,
    /// These integration tests (`cargo test --test …`).
    Tests(&'a [&'a str]),
}

impl Built {
    /// The integration test binary `name` and its package's directory.
    pub(super) fn test(&self, name: &str) -> Result<(&Path, &Path)> {
        self.tests
            .iter()
            .find(|t| t.is_test() && t.name == name)
            .map(|t| (t.path.as_path(), t.dir.as_path()))
            .with_context(|| format!("the build made no `{name}` test binary"))
    }

    /// Runs the test binaries `select` picks, as `cargo test` would (in the package's
    /// directory, with the environment [`cmd::cargo`] gives tests, plus `env`), each
    /// even if an earlier one failed. Not `cargo test --test …`: a selection other
    /// than the build's resolves features anew and rebuilds much of what it built.
    pub(super) fn run(
        &self,
        select: Select<'_>,
        args: &[&str],
        cargo_test_args: &[String],
        env: &[(&str, &OsStr)],
        counts: &mut Counts,
    ) -> Result<()> {
        let picked: Vec<&TestBinary> = self
            .tests
            .iter()
            .filter(|t| match &select {
                Select::Libs => t.is_lib(),
                Select::Tests(names) => t.is_test() && names.contains(&t.name.as_str()),
            })
            .collect();
        if picked.is_empty() {
            bail!("the build made none of these test binaries");
        }
        // What the caller meant for the test binaries: after its `--`.
        let passed = cargo_test_args.iter().skip_while(|a| *a != "--").skip(1);
        let mut failed = Vec::new();
        for test in picked {
            let mut command = Command::new(&test.path);
            command
                .current_dir(&test.dir)
                .args(args)
                .args(passed.clone());
            cmd::test_env(&mut command);
            for (name, value) in env {
                command.env(name, value);
            }
            if let Err(e) = run_counting(&mut command, counts) {
                eprintln!("{e:#}");
                failed.push(test.name.clone());
            }
        }
        if !failed.is_empty() {
            bail!("test binaries failed: {}", failed.join(", "));
        }
        Ok(())
    }
}

/// The one build of the run: every target of the workspace, with the
/// [`build_env`], so `cargo test` and each later step find it built. Cargo's JSON
/// messages say where the console and the two binaries are.
pub(super) fn build(cargo_test_args: &[String]) -> Result<Built> {
    // Filters and flags before `--`; what follows is for the test binaries.
    let cargo_args = cargo_test_args.iter().take_while(|a| *a != "--");
    let (mut console, mut server, mut desktop) = (None, None, None);
    let mut tests = Vec::new();
    each_stdout_line(
        cmd::cargo()
            .args(["test", "--workspace", "--all-targets", "--no-run"])
            .arg("--message-format=json-render-diagnostics")
            .args(cargo_args),
        |message| {
            let Ok(message) = serde_json::from_str::<serde_json::Value>(message) else {
                return;
            };
            let field = |name: &str| message.get(name).and_then(|v| v.as_str());
            let package = field("package_id").unwrap_or_default();
            match field("reason") {
                Some("build-script-executed") if package.contains("#switchboard-server@") => {
                    console = field("out_dir").map(|d| Path::new(d).join("console-dist"));
                }
                Some("compiler-artifact") if message["profile"]["test"] == true => {
                    let (Some(path), Some(manifest)) =
                        (field("executable"), field("manifest_path"))
                    else {
                        return;
                    };
                    let target = &message["target"];
                    tests.push(TestBinary {
                        kinds: target["kind"]
                            .as_array()
                            .into_iter()
                            .flatten()
                            .filter_map(|k| k.as_str().map(str::to_owned))
                            .collect(),
                        name: target["name"].as_str().unwrap_or_default().to_owned(),
                        path: PathBuf::from(path),
                        dir: Path::new(manifest)
                            .parent()
                            .unwrap_or(Path::new("."))
                            .to_path_buf(),
                    });
                }
                Some("compiler-artifact") => {
                    let path = field("executable").map(PathBuf::from);
                    match message["target"]["name"].as_str() {
                        Some("switchboard") => server = path,
                        Some("switchboard-desktop") => desktop = path,
                        _ => {}
                    }
                }
                _ => {}
            }
        },
    )?;
    let console = console
        .filter(|dir| dir.join("index.html").is_file())
        .context("the server's build script embedded no console (SWITCHBOARD_EMBED_UI=1)")?;
    eprintln!(
        "build: the console the server embeds is {}",
        console.display()
    );
    Ok(Built {
        console,
        server: server.context("the build made no `switchboard` binary")?,
        desktop: desktop.context("the build made no `switchboard-desktop` binary")?,
        tests,
    })
}
