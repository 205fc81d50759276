//! The Switchboard desktop shell: the embedded server plus a window onto its console.
//!
//! Thin by design (no SQL, no business rules): [`run`] starts the server on
//! `127.0.0.1:0` in a tokio runtime that Tauri shares, then [`run_app`] opens one
//! webview window on the console the server serves at `/`, and a tray icon. The console
//! is the same page a browser gets from `switchboard serve`.
//!
//! The window first opens a one-time login link (`/login?ticket=…`) minted by the
//! embedded server, which sets the HttpOnly session cookie and redirects to `/`: the
//! operator is logged in without pasting a token, and the token never reaches the
//! page. Closing the window hides it; the app lives on in the tray (Open console,
//! Pause notifications, Quit), whose tooltip shows the quarantined count.
//!
//! The app also hosts the local token broker (`broker.rs`, the same broker as
//! `switchboard agent broker`) when a policy file exists or is named.
//!
//! Terms: the *console* is the web UI (`ui/`); *smoke mode* (`--smoke-test`) opens the
//! window, waits for the console to render, takes a screenshot and quits, for CI.

mod broker;
mod embedded;
mod notify;
mod options;
mod pause;
mod signin;
mod smoke;
mod status;
mod tray;

use std::path::PathBuf;

use anyhow::Context as _;
use switchboard_server::embed::Console as ServerConsole;
use tauri::{App, AppHandle, Manager, Runtime, Url, WebviewUrl, WebviewWindowBuilder};

pub use crate::broker::Config as BrokerConfig;
use crate::embedded::EmbeddedServer;
use crate::options::Options;
pub use crate::smoke::Smoke;

/// Label of the console window.
const WINDOW: &str = "main";

/// Exit status when there is no display to open a window on.
const EXIT_NO_DISPLAY: i32 = 2;

/// Where the console lives, shared with the tray so it can reopen the window.
struct Console {
    /// The console's home, `http://127.0.0.1:PORT/` (the session cookie is set).
    home: Url,
}

/// The console's addresses: its home, and what the window opens first (a one-time
/// login link, or the home when there is none).
#[derive(Debug, Clone)]
pub struct ConsoleUrls {
    pub home: Url,
    pub entry: Url,
}

impl ConsoleUrls {
    /// The window opens `home` itself (no login link).
    pub fn home(home: Url) -> Self {
        Self {
            entry: home.clone(),
            home,
        }
    }
}

/// Runs the desktop app and exits the process with its status.
pub fn run() {
    smoke::mark_start();
    let code = match try_run() {
        Ok(code) => code,
        Err(error) => {
            eprintln!("switchboard-desktop: {error:#}");
            1
        }
    };
    std::process::exit(code);
}

fn try_run() -> anyhow::Result<i32> {
    let options = match Options::parse(std::env::args_os().skip(1))? {
        Some(options) => options,
        None => return Ok(0), // --help
    };
    if !has_display() {
        eprintln!(
            "switchboard-desktop: no display (DISPLAY and WAYLAND_DISPLAY are unset): \
             run `switchboard serve` or `cargo xtask run` for headless"
        );
        return Ok(EXIT_NO_DISPLAY);
    }
    init_tracing();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the tokio runtime")?;
    tauri::async_runtime::set(runtime.handle().clone());

    // The local token broker: its host logins are the keyring profiles its policy
    // names, whichever console the window shows.
    let broker = broker::Config::resolve(options.broker_policy, options.broker_socket);

    if let Some(remote) = options.server_url {
        // A remote console: no embedded server, no tray status. A one-time link
        // opens as it is; any other address signs in through the system browser
        // (authorization code + PKCE), and the sign-in ends when the app quits.
        let home = remote.join("/").context("the server URL's root")?;
        tracing::info!(url = %home, "opening a remote console");
        let signed_in = if is_login_link(&remote) {
            None
        } else {
            Some(runtime.block_on(signin::sign_in(&home))?)
        };
        let entry = signed_in.as_ref().map_or(remote, |s| s.entry.clone());
        let smoke = options.smoke.map(|smoke| smoke.require_ready(true));
        let result = run_app(
            tauri::Builder::default(),
            ConsoleUrls { home, entry },
            smoke,
            None,
            broker,
        );
        if let Some(signed_in) = signed_in {
            runtime.block_on(signed_in.sign_out());
        }
        return result.context("running the desktop app");
    }

    let config = switchboard_server::Config {
        ui_dir: ui_dir(),
        ..switchboard_server::Config::default()
    };
    let serves_ui = config.ui_dir.is_some() || switchboard_server::http::console_embedded();
    let server = runtime.block_on(EmbeddedServer::start(config))?;
    tracing::info!(url = %server.url(), "embedded server listening");

    let urls = match runtime.block_on(server.login_url()) {
        Ok(entry) => ConsoleUrls {
            home: server.url().clone(),
            entry,
        },
        Err(error) => {
            tracing::warn!("{error:#}; the console will ask for the operator token");
            ConsoleUrls::home(server.url().clone())
        }
    };
    let smoke = options.smoke.map(|smoke| {
        smoke
            .require_ready(serves_ui)
            .with_server(server.console().clone(), server.url().clone())
    });
    let result = run_app(
        tauri::Builder::default(),
        urls,
        smoke,
        Some(server.console().clone()),
        broker,
    );
    runtime.block_on(server.stop());
    // A notification still on screen holds a blocking thread (waiting for a click);
    // dropping the runtime would wait for it, so give it only a moment.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    result.context("running the desktop app")
}

/// Builds the app on `builder`, with a window on `console` (the embedded server's URL),
/// and runs it until it exits; returns its exit status. The caller owns the server;
/// with its console handle, the tray shows the quarantined count and notifies of bursts.
/// `broker`: the local token broker to host (`Err`: why it stays off); it stops,
/// removing its socket, when the app exits.
///
/// Generic over the runtime (the thin-shell pattern), so `tauri::test::mock_builder()`
/// can drive it as well as the real Wry runtime.
pub fn run_app<R: Runtime>(
    builder: tauri::Builder<R>,
    console: ConsoleUrls,
    smoke: Option<Smoke>,
    server: Option<ServerConsole>,
    broker: Result<broker::Config, String>,
) -> tauri::Result<i32> {
    let entry = console.entry;
    let app = builder
        .manage(Console { home: console.home })
        .manage(pause::Notifications::default())
        .on_window_event(|window, event| {
            // Closing the console keeps the app in the tray; Quit ends it.
            if let tauri::WindowEvent::CloseRequested { api, .. } = event
                && window.label() == WINDOW
            {
                api.prevent_close();
                if let Err(error) = window.hide() {
                    tracing::warn!(%error, "could not hide the console window");
                }
            }
        })
        .setup(move |app| {
            broker::manage(app.handle(), broker);
            if let Some(state) = server {
                tauri::async_runtime::spawn(tray::watch(app.handle().clone(), state));
            }
            // An error returned from setup makes Tauri panic; report it and exit instead.
            if let Err(error) = setup(app, smoke, entry) {
                eprintln!("switchboard-desktop: {error:#}");
                app.handle().exit(1);
            }
            Ok(())
        })
        .build(tauri::generate_context!())?;
    Ok(app.run_return(|app, event| {
        if let tauri::RunEvent::Exit = event {
            broker::stop(app);
        }
    }))
}

fn setup<R: Runtime>(app: &mut App<R>, smoke: Option<Smoke>, entry: Url) -> anyhow::Result<()> {
    tray::install(app).context("creating the tray icon")?;
    let mut window = console_window(app, entry);
    if let Some(smoke) = smoke {
        let probe = smoke.start(app.handle().clone());
        window = window.on_page_load(move |_, payload| probe.page_load(payload.event()));
    }
    window.build().context("opening the console window")?;
    Ok(())
}

/// Shows and focuses the console window, reopening it if it was closed.
fn show_console<R: Runtime>(app: &AppHandle<R>) -> tauri::Result<()> {
    if let Some(window) = app.get_webview_window(WINDOW) {
        window.unminimize()?;
        window.show()?;
        return window.set_focus();
    }
    let home = app.state::<Console>().home.clone();
    console_window(app, home).build().map(drop)
}

/// The console's home URL.
fn console_home<R: Runtime>(app: &AppHandle<R>) -> Url {
    app.state::<Console>().home.clone()
}

/// Shows the console window on `url` (a page of the console), creating it if needed.
fn open_console_at<R: Runtime>(app: &AppHandle<R>, url: Url) -> tauri::Result<()> {
    if let Some(window) = app.get_webview_window(WINDOW) {
        window.navigate(url)?;
        window.unminimize()?;
        window.show()?;
        return window.set_focus();
    }
    console_window(app, url).build().map(drop)
}

/// The console window on `url`, not yet built.
fn console_window<R: Runtime, M: Manager<R>>(
    manager: &M,
    url: Url,
) -> WebviewWindowBuilder<'_, R, M> {
    WebviewWindowBuilder::new(manager, WINDOW, WebviewUrl::External(url))
        .title("Switchboard")
        .inner_size(1200.0, 760.0)
        .min_inner_size(480.0, 320.0)
}

/// Whether `url` is a one-time console link (`/login?ticket=…`).
fn is_login_link(url: &Url) -> bool {
    url.path() == "/login" && url.query_pairs().any(|(k, _)| k == "ticket")
}

fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|var| std::env::var_os(var).is_some_and(|v| !v.is_empty()))
}

/// The console from disk: `SWITCHBOARD_UI_DIR`, else, in a build without the console
/// inside (a debug build), `ui/dist` of this source tree when it exists. A release
/// build serves the console it carries (see `crates/server/build.rs`).
fn ui_dir() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("SWITCHBOARD_UI_DIR").filter(|d| !d.is_empty()) {
        return Some(PathBuf::from(dir));
    }
    if switchboard_server::http::console_embedded() {
        return None;
    }
    let dev = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../ui/dist"));
    match dev.canonicalize() {
        Ok(dir) if dir.is_dir() => Some(dir),
        _ => {
            eprintln!(
                "switchboard-desktop: no console UI found (set SWITCHBOARD_UI_DIR or run \
                 `cargo xtask ui`); the window will show the server's fallback page"
            );
            None
        }
    }
}

fn init_tracing() {
    use tracing_subscriber::EnvFilter;
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    // Ignore the error if a subscriber is already installed (e.g. by a test).
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
