//! The steps that run in a session of their own (their own HOME, XDG dirs and D-Bus),
//! so they touch nothing of the user's: the desktop smoke test under Xvfb and the
//! SDK's real-keyring tests.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use super::build::{Built, Select};
use super::package::{self, Installed};
use super::{Counts, run_counting};
use crate::cmd;

/// Hard limit on the desktop smoke run, Xvfb start-up included. The app has its own,
/// shorter watchdog; this one also covers a wedged Xvfb or D-Bus.
const SMOKE_TIMEOUT_SECS: &str = "180";

pub(super) fn smoke_screenshot() -> PathBuf {
    cmd::target_dir().join("desktop-smoke.png")
}

/// The desktop package, installed, smoke-tested: the app the test build made (with
/// the console inside, which the server's build script built), packaged (`dist.rs`) and installed
/// ([`Installed`]); the installed binary starts with `--smoke-test` under Xvfb and a
/// private D-Bus session, with its own HOME and XDG_RUNTIME_DIR so it touches
/// nothing of the user's, and no `SWITCHBOARD_UI_DIR`: it shows the console it
/// carries. Then the same app signs in to a remote `server` ([`remote_sign_in_smoke`]).
///
/// Last, the installed app hosts the local token broker while a test of the build
/// (`crates/cli/tests/broker.rs`, `…the_desktop_app_hosts_the_broker…`) is its
/// sidecar.
pub(super) fn desktop_smoke(built: &Built, counts: &mut Counts) -> Result<()> {
    let (desktop, server) = (&built.desktop, &built.server);
    let deb = crate::dist::desktop_deb(desktop, &package::out_dir())?;
    let installed = Installed::new(&deb, "switchboard-desktop", None, None)?;
    let root = installed.root();
    // The prerequisites install desktop-file-utils.
    cmd::run(
        Command::new("desktop-file-validate")
            .arg(root.join("usr/share/applications/switchboard-desktop.desktop")),
    )?;
    let bin = root.join("usr/bin/switchboard-desktop");
    let shot = smoke_screenshot();
    let _ = std::fs::remove_file(&shot);

    let scratch = Scratch::new("switchboard-smoke")?;
    let mut smoke = smoke_command(&bin, &scratch, "embedded")?;
    smoke.arg("--smoke-test").arg(&shot);
    cmd::run(&mut smoke).context("the desktop smoke test failed (exit 124 means it timed out)")?;
    if shot.is_file() {
        eprintln!("desktop smoke: screenshot at {}", shot.display());
    }
    remote_sign_in_smoke(&bin, server, &scratch)?;
    built
        .run(
            Select::Tests(&["broker"]),
            &["the_desktop_app_hosts_the_broker", "--nocapture"],
            &[],
            &[("SWITCHBOARD_DESKTOP_BIN", bin.as_os_str())],
            counts,
        )
        .context("the desktop app's token broker test failed")
}

/// The desktop binary `bin` under Xvfb and a private D-Bus session, with its own
/// HOME and XDG dirs in `scratch` (named after `run`); arguments to add.
pub(crate) fn smoke_command(bin: &Path, scratch: &Scratch, run: &str) -> Result<Command> {
    let home = scratch.dir(&format!("{run}-home"), 0o755)?;
    let runtime = scratch.dir(&format!("{run}-runtime"), 0o700)?;
    let mut smoke = Command::new("timeout");
    smoke
        .args(["-k", "10", SMOKE_TIMEOUT_SECS])
        .args(["xvfb-run", "-a", "-s", "-screen 0 1280x800x24"])
        .args(["dbus-run-session", "--"])
        .arg(bin)
        .current_dir(cmd::root());
    keep_toolchain(&mut smoke);
    smoke
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("GDK_BACKEND", "x11")
        // WebKitGTK's accelerated compositing draws nothing into Xvfb's screenshot
        // (the page renders, the PNG is white); software compositing shows it.
        .env("WEBKIT_DISABLE_COMPOSITING_MODE", "1")
        // No accessibility bus: nothing reads it here, and it only adds noise.
        .env("NO_AT_BRIDGE", "1")
        .env_remove("SWITCHBOARD_UI_DIR")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    Ok(smoke)
}

/// A `switchboard serve` of the test build, killed when dropped.
struct Serving(std::process::Child);

impl Drop for Serving {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The desktop signing in to a remote server (`--server-url`): a real `switchboard
/// serve` on SQLite; the app opens the authorization page with `BROWSER`, a
/// script that plays the operator allowing the sign-in (`smoke_browser.py`); the
/// app redeems the code (PKCE), its window opens the console with the one-time
/// link it minted and must render the logged-in overview, as in the embedded run.
fn remote_sign_in_smoke(desktop: &Path, server: &Path, scratch: &Scratch) -> Result<()> {
    use std::io::BufRead as _;
    let data = scratch.dir("remote", 0o700)?;
    let token_file = data.join("operator-token");
    let mut child = Command::new(server)
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(format!(
            "sqlite://{}",
            data.join("switchboard.db").display()
        ))
        .arg("--operator-token-file")
        .arg(&token_file)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {}", server.display()))?;
    let stdout = child.stdout.take().context("serve's stdout")?;
    let serving = Serving(child);
    let mut line = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut line)
        .context("reading serve's ready line")?;
    let ready: serde_json::Value =
        serde_json::from_str(&line).with_context(|| format!("serve's ready line: {line:?}"))?;
    let url = ready["url"]
        .as_str()
        .with_context(|| format!("no url in serve's ready line: {line}"))?;

    let browser = data.join("smoke-browser.py");
    std::fs::write(&browser, include_str!("smoke_browser.py"))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&browser, std::fs::Permissions::from_mode(0o755))?;
    }
    let browser_log = data.join("browser.log");
    let mut smoke = smoke_command(desktop, scratch, "remote")?;
    smoke
        .arg("--server-url")
        .arg(format!("{url}/"))
        .arg("--smoke-test")
        .env("BROWSER", &browser)
        .env("SWITCHBOARD_SMOKE_TOKEN_FILE", &token_file)
        .env("SWITCHBOARD_SMOKE_BROWSER_LOG", &browser_log);
    let result = cmd::run(&mut smoke);
    let said = std::fs::read_to_string(&browser_log).unwrap_or_default();
    drop(serving);
    result.with_context(|| {
        format!("the desktop's remote sign-in smoke test failed; the browser script said: {said}")
    })?;
    eprintln!(
        "desktop smoke: remote sign-in through the browser: {}",
        said.trim()
    );
    Ok(())
}

/// Hard limit on each real-keyring test run.
const KEYRING_TIMEOUT_SECS: &str = "600";

/// The SDK's token store against real keyrings (`crates/sdk/tests/keyring_os.rs`):
/// the kernel keyutils keyring in a fresh `keyctl session` with no session bus (so
/// the automatic choice must fall back to it), then the Secret Service of a
/// gnome-keyring started and unlocked inside `dbus-run-session`. Each run gets its own
/// HOME and XDG dirs, so it touches no keyring of the user's. Without the tools this
/// is a skip locally and a failure in CI (`CI=true`).
pub(super) fn keyring_tests(built: &Built, counts: &mut Counts) -> Result<()> {
    let tools = [
        ("keyctl", "keyutils"),
        ("dbus-run-session", "dbus-daemon"),
        ("gnome-keyring-daemon", "gnome-keyring"),
    ];
    let missing: Vec<&str> = tools
        .iter()
        .filter(|(tool, _)| cmd::stdout(Command::new(tool).arg("--version")).is_none())
        .map(|(_, package)| *package)
        .collect();
    if !missing.is_empty() {
        let what = format!(
            "missing keyring tools; install the Debian packages: {}",
            missing.join(" ")
        );
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            bail!("{what}");
        }
        eprintln!("keyring: SKIPPED, {what} (in CI this fails)");
        return Ok(());
    }

    // The test binary the build made (`cargo test --test keyring_os` would resolve
    // features anew and rebuild); the filter picks the group of tests.
    let (binary, package_dir) = built.test("keyring_os")?;
    let tests = |filter: &str| -> Vec<std::ffi::OsString> { vec![binary.into(), filter.into()] };

    let scratch = Scratch::new("switchboard-keyring")?;
    let mut keyutils = Command::new("timeout");
    keyutils
        .args(["-k", "10", KEYRING_TIMEOUT_SECS, "keyctl", "session", "-"])
        .args(tests("keyutils"));
    isolate(&mut keyutils, &scratch, "keyutils", package_dir)?;
    let first = run_counting(&mut keyutils, counts).context("the keyutils keyring tests failed");

    // gnome-keyring creates and unlocks a `login` keyring with this password; it
    // exits with the session bus when dbus-run-session ends.
    let mut secret_service = Command::new("timeout");
    secret_service
        .args(["-k", "10", KEYRING_TIMEOUT_SECS, "dbus-run-session", "--"])
        .args(["sh", "-c"])
        .arg(
            "echo -n switchboard-test | gnome-keyring-daemon --unlock --components=secrets \
             >/dev/null && exec \"$@\"",
        )
        .arg("sh")
        .args(tests("secret_service"));
    isolate(&mut secret_service, &scratch, "secret-service", package_dir)?;
    let second = run_counting(&mut secret_service, counts)
        .context("the Secret Service keyring tests failed");
    first.and(second)
}

/// Gives a keyring test run its own HOME, XDG dirs and runtime dir (with no session
/// bus in it), runs it in its package's directory `dir`, and turns the tests on.
fn isolate(command: &mut Command, scratch: &Scratch, name: &str, dir: &Path) -> Result<()> {
    let home = scratch.dir(name, 0o700)?;
    let runtime = home.join("runtime");
    std::fs::create_dir(&runtime).with_context(|| format!("creating {}", runtime.display()))?;
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&runtime, std::fs::Permissions::from_mode(0o700))?;
    }
    command
        .current_dir(dir)
        .env("SWITCHBOARD_KEYRING_TEST", "1")
        .env("HOME", &home)
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env_remove("SWITCHBOARD_KEYRING")
        .env_remove("DBUS_SESSION_BUS_ADDRESS");
    Ok(())
}

/// Keeps toolchain lookups working although HOME moves.
fn keep_toolchain(command: &mut Command) {
    for (var, default) in [("CARGO_HOME", ".cargo"), ("RUSTUP_HOME", ".rustup")] {
        if let Some(value) = std::env::var_os(var)
            .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(default).into()))
        {
            command.env(var, value);
        }
    }
}

/// A temporary directory removed on drop.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(prefix: &str) -> Result<Self> {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let path = std::env::temp_dir().join(format!("{prefix}-{}-{nanos}", std::process::id()));
        std::fs::create_dir(&path).with_context(|| format!("creating {}", path.display()))?;
        Ok(Self(path))
    }

    pub(super) fn path(&self) -> &Path {
        &self.0
    }

    fn dir(&self, name: &str, mode: u32) -> Result<PathBuf> {
        use std::os::unix::fs::DirBuilderExt;
        let path = self.0.join(name);
        std::fs::DirBuilder::new()
            .mode(mode)
            .create(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        Ok(path)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
