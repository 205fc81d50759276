//! What the browser tests need before they start: the built console, the browser, a
//! server serving the console, and a bound on every wait.

use std::fmt::Display;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use switchboard_tests::{Options, TestServer};

/// The longest any single step (a browser start, a page load, an element) may take.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// Debian's `chromium` package.
pub(crate) const CHROMIUM: &str = "/usr/bin/chromium";
/// Debian's `chromium-driver` package.
pub(crate) const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// The built console, or `None` (after saying why) when the tests must be skipped.
///
/// Panics under `CI=true` instead of skipping.
pub(crate) fn console_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("SWITCHBOARD_UI_DIR").map(PathBuf::from);
    match dir {
        Some(dir) if dir.join("index.html").is_file() => Some(dir),
        Some(dir) => skip(&format!(
            "SWITCHBOARD_UI_DIR={} has no index.html (the console is not built)",
            dir.display()
        )),
        None => skip("SWITCHBOARD_UI_DIR is not set (the console is not built)"),
    }
}

/// Both the console and the browser, or `None` (after saying why) when the tests must
/// be skipped. Panics under `CI=true` instead of skipping.
pub(crate) fn console_and_browser() -> Option<PathBuf> {
    let dir = console_dir()?;
    for (tool, package) in [(CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")] {
        if !Path::new(tool).is_file() {
            return skip(&format!(
                "{tool} is missing (install the Debian package `{package}`; \
                 `cargo xtask test` installs it)"
            ));
        }
    }
    Some(dir)
}

/// The `switchboard` binary of the build (`cargo xtask test` sets
/// `SWITCHBOARD_CLI_BIN`), or `None` (after saying why) when the tests must be
/// skipped. Panics under `CI=true` instead of skipping.
pub(crate) fn cli_bin() -> Option<PathBuf> {
    match std::env::var_os("SWITCHBOARD_CLI_BIN").map(PathBuf::from) {
        Some(bin) if bin.is_file() => Some(bin),
        _ => skip("SWITCHBOARD_CLI_BIN does not name the built `switchboard` binary"),
    }
}

pub(crate) fn skip<T>(why: &str) -> Option<T> {
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!(
            "browser tests cannot run: {why}. Run them through `cargo xtask test`, or build \
             the console with `cargo xtask ui` and set SWITCHBOARD_UI_DIR=<repo>/ui/dist"
        );
    }
    // Once per binary, and straight to the stream, past libtest's capture, so the
    // skip is seen.
    static SAID: std::sync::Once = std::sync::Once::new();
    SAID.call_once(|| {
        let _ = writeln!(
            std::io::stderr(),
            "browser tests skipped: {why}. Run `cargo xtask ui` (or `cargo xtask test`) to build \
         the console and run them"
        );
    });
    None
}

/// The line the console shows under its title for a server of this workspace's
/// version on `backend`.
pub(crate) fn server_line(backend: &str) -> String {
    format!(
        "Switchboard server {} · {backend} backend · API v1",
        env!("CARGO_PKG_VERSION")
    )
}

/// A server on `127.0.0.1:0` serving the console at `/`.
pub(crate) async fn console_server(ui_dir: PathBuf) -> TestServer {
    TestServer::with(Options {
        ui_dir: Some(ui_dir),
        ..Options::default()
    })
    .await
}

/// Awaits `fut` for at most [`WAIT`]; panics with `what` on an error or the timeout.
pub(crate) async fn bounded<T, E: Display>(
    what: &str,
    fut: impl Future<Output = Result<T, E>>,
) -> T {
    match tokio::time::timeout(WAIT, fut).await {
        Ok(Ok(value)) => value,
        Ok(Err(error)) => panic!("{what}: {error}"),
        Err(_) => panic!("{what}: no answer within {WAIT:?}"),
    }
}

/// Cargo's target directory, found by walking up from this test binary
/// (`<target>/[<triple>/]<profile>/deps/browser-…`).
pub(crate) fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test binary");
    exe.ancestors()
        .find(|dir| dir.file_name().is_some_and(|name| name == "target"))
        // A CARGO_TARGET_DIR with another name: the parent of `<profile>`.
        .or_else(|| exe.ancestors().nth(3))
        .expect("the test binary lives under a target directory")
        .to_path_buf()
}
