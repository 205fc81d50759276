//! Smoke mode (`--smoke-test`): proves the whole desktop path works on a real display
//! (Xvfb in CI). It waits for the console page to load and, when a console UI is being
//! served, for the UI's `#app-ready` element *and* the logged-in overview (`#overview`,
//! which only an authenticated console renders: the one-time login link worked), and
//! prints `smoke: ready <secs>s after start, pid <pid>` at once (W5 of `cargo xtask
//! bench` reads it, then measures the process tree's memory while the rest runs); then
//! it screenshots the X root window, closes the window and checks that it was only
//! hidden (the app stays in the tray), prints one `smoke:` line and quits through the
//! app handle (exit 0 on success).
//!
//! It can never hang: a watchdog thread ends the process after [`HARD_TIMEOUT`].

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{OnceLock, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use switchboard_server::embed::Console;
use tauri::Url;
use tauri::webview::PageLoadEvent;
use tauri::{AppHandle, Manager, Runtime};

use crate::WINDOW;

/// The page (WebKit start-up included) must finish loading within this.
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);
/// After loading, the wasm console must render `#app-ready` within this.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Time for the last frame to reach the screen before the screenshot.
const SETTLE: Duration = Duration::from_millis(700);
/// Whatever happens, the process exits after this long.
const HARD_TIMEOUT: Duration = Duration::from_secs(90);
/// The tray polls every 3 s and reports a burst one poll after it ends.
const NOTIFY_TIMEOUT: Duration = Duration::from_secs(15);
/// Exit status when the watchdog fires (the same as coreutils `timeout`).
const EXIT_TIMED_OUT: i32 = 124;

/// How often the driver asks the page whether the console is ready: the granularity
/// of the start → ready time it reports.
const READY_POLL: Duration = Duration::from_millis(25);

/// With `SWITCHBOARD_SMOKE_HOLD` naming a file, the app stays up after its checks
/// until that file exists (a test talks to it meanwhile, e.g. to its token broker;
/// the watchdog still ends it after [`HARD_TIMEOUT`]).
fn hold() {
    let Some(file) = std::env::var_os("SWITCHBOARD_SMOKE_HOLD").filter(|v| !v.is_empty()) else {
        return;
    };
    println!("smoke: holding until {} exists", Path::new(&file).display());
    let _ = std::io::stdout().flush();
    while !Path::new(&file).exists() {
        thread::sleep(Duration::from_millis(50));
    }
}

/// When the app's `run` began ([`mark_start`]).
static STARTED: OnceLock<Instant> = OnceLock::new();

/// Notes the moment the app starts, for the `smoke: ready` line's start → ready time.
pub(crate) fn mark_start() {
    STARTED.get_or_init(Instant::now);
}

/// Returns the text of `#server-info` once `#app-ready` and the logged-in overview
/// exist, else `null`.
const READY_PROBE: &str = "(function () {
  if (!document.getElementById('app-ready')) return null;
  if (!document.getElementById('overview')) return null;
  var info = document.getElementById('server-info');
  if (info && info.textContent === '\\u2026') return null;
  return info ? info.textContent : '';
})()";

/// What smoke mode should do; see the module docs.
pub struct Smoke {
    screenshot: Option<PathBuf>,
    require_ready: bool,
    /// The embedded server: with it, smoke mode also checks that a burst of
    /// quarantines gives exactly one notification.
    server: Option<(Console, Url)>,
}

impl std::fmt::Debug for Smoke {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Smoke")
            .field("screenshot", &self.screenshot)
            .field("require_ready", &self.require_ready)
            .field("server", &self.server.is_some())
            .finish()
    }
}

impl Smoke {
    /// Smoke mode, saving a screenshot to `screenshot` if given.
    pub fn new(screenshot: Option<PathBuf>) -> Self {
        Self {
            screenshot,
            require_ready: false,
            server: None,
        }
    }

    /// Also check the quarantine notification against this embedded server, which
    /// serves its HTTP API at `url`.
    pub fn with_server(mut self, server: Console, url: Url) -> Self {
        self.server = Some((server, url));
        self
    }

    /// Whether the console UI must render `#app-ready` (true when a UI is served).
    pub fn require_ready(mut self, require: bool) -> Self {
        self.require_ready = require;
        self
    }

    /// Where the screenshot goes, if anywhere.
    pub fn screenshot(&self) -> Option<&Path> {
        self.screenshot.as_deref()
    }

    /// Starts the watchdog and the driver thread; feed page-load events to the probe.
    pub(crate) fn start<R: Runtime>(self, app: AppHandle<R>) -> Probe {
        thread::spawn(|| {
            thread::sleep(HARD_TIMEOUT);
            eprintln!(
                "smoke: FAILED: still running after {}s",
                HARD_TIMEOUT.as_secs()
            );
            std::process::exit(EXIT_TIMED_OUT);
        });
        let (loaded, on_load) = mpsc::channel();
        thread::spawn(move || {
            let code = self.drive(&app, &on_load);
            if let Some(hosted) = app.try_state::<std::sync::Arc<crate::broker::Hosted>>() {
                println!("smoke: {}", hosted.status());
            }
            hold();
            app.exit(code);
        });
        Probe { loaded }
    }

    fn drive<R: Runtime>(&self, app: &AppHandle<R>, on_load: &mpsc::Receiver<()>) -> i32 {
        let started = Instant::now();
        if on_load.recv_timeout(LOAD_TIMEOUT).is_err() {
            self.screenshot_if_asked();
            println!(
                "smoke: FAILED: the console page did not load within {}s",
                LOAD_TIMEOUT.as_secs()
            );
            return 1;
        }
        let loaded_after = started.elapsed();
        let ready = wait_ready(app, READY_TIMEOUT);
        let ready_after = started.elapsed();
        if ready.is_some() {
            // At once, while the app still runs: `cargo xtask bench`'s W5 reads this
            // line, then sums the memory of this process's tree.
            let since_start = STARTED.get().map_or(ready_after, Instant::elapsed);
            println!(
                "smoke: ready {:.3}s after start, pid {}",
                since_start.as_secs_f64(),
                std::process::id()
            );
            let _ = std::io::stdout().flush();
        }
        thread::sleep(SETTLE);
        let shot = self.screenshot_if_asked();
        let shot = shot
            .map(|p| format!(", screenshot {}", p.display()))
            .unwrap_or_default();

        let loaded = format!("page loaded in {:.1}s", loaded_after.as_secs_f64());
        if let Err(why) = close_hides(app) {
            println!("smoke: FAILED: {loaded}, but {why}");
            return 1;
        }
        let notified = match (&self.server, &ready) {
            (Some(server), Some(_)) => match one_notification_per_burst(app, server) {
                Ok(note) => format!(", {note}"),
                Err(why) => {
                    println!("smoke: FAILED: {loaded}, but {why}");
                    return 1;
                }
            },
            _ => String::new(),
        };
        match ready {
            Some(info) => {
                let after = ready_after.as_secs_f64();
                println!(
                    "smoke: ok: {loaded}, console logged in and ready in {after:.1}s ({info}), \
                     closing hides the window{notified}{shot}"
                );
                0
            }
            None if self.require_ready => {
                let secs = READY_TIMEOUT.as_secs();
                println!(
                    "smoke: FAILED: {loaded}, but no logged-in console (#app-ready and #overview) \
                     within {secs}s{shot}"
                );
                1
            }
            None => {
                println!(
                    "smoke: ok: {loaded} (no console UI served, #app-ready not required){shot}"
                );
                0
            }
        }
    }

    /// Takes the screenshot if one was asked for and `import` works; returns its path.
    fn screenshot_if_asked(&self) -> Option<&Path> {
        let path = self.screenshot.as_deref()?;
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            let _ = std::fs::create_dir_all(parent);
        }
        match Command::new("import")
            .args(["-window", "root"])
            .arg(path)
            .status()
        {
            Ok(status) if status.success() => Some(path),
            Ok(status) => {
                eprintln!("smoke: `import -window root` failed ({status}); no screenshot");
                None
            }
            Err(error) => {
                eprintln!("smoke: cannot run ImageMagick `import` ({error}); no screenshot");
                None
            }
        }
    }
}

/// Quarantines three events of a fresh agent through the embedded server's HTTP API
/// (an operator creates the agent and sends; the agent claims and fails them), then
/// waits for the tray's watcher to
/// ask for exactly one notification for the burst.
fn one_notification_per_burst<R: Runtime>(
    app: &AppHandle<R>,
    server: &(Console, Url),
) -> Result<String, String> {
    let before = crate::notify::counts();
    let agent = tauri::async_runtime::block_on(quarantine_three(server))
        .map_err(|e| format!("could not quarantine work for the notification check: {e}"))?;
    let agent = agent.as_str();
    let deadline = Instant::now() + NOTIFY_TIMEOUT;
    while crate::notify::counts().0 == before.0 {
        if Instant::now() > deadline {
            return Err(format!(
                "no notification for a burst of 3 quarantines within {}s",
                NOTIFY_TIMEOUT.as_secs()
            ));
        }
        thread::sleep(Duration::from_millis(200));
    }
    // One more poll without news: still exactly one.
    thread::sleep(crate::status::INTERVAL + Duration::from_millis(500));
    let (asked, shown) = crate::notify::counts();
    if asked - before.0 != 1 {
        return Err(format!(
            "a burst of 3 quarantines gave {} notifications, expected one",
            asked - before.0
        ));
    }
    if shown == before.1 {
        return Ok(
            "one notification for a burst of 3 quarantines (no daemon accepted it)".to_owned(),
        );
    }
    let click = click_opens_quarantine(app, agent)?;
    Ok(format!(
        "one notification for a burst of 3 quarantines (shown by the daemon){click}"
    ))
}

/// Clicks the notification through dunst (`dunstctl action 0`, its default action)
/// and checks that the hidden window comes back on the agent's quarantine.
fn click_opens_quarantine<R: Runtime>(app: &AppHandle<R>, agent: &str) -> Result<String, String> {
    let clicked = Command::new("dunstctl").args(["action", "0"]).status();
    if !matches!(clicked, Ok(s) if s.success()) {
        return Ok(" (dunstctl unavailable: click not checked)".to_owned());
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut seen = String::new();
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(200));
        if let Some(window) = app.get_webview_window(WINDOW)
            && let Ok(url) = window.url()
        {
            seen = url.to_string();
            let agent_matches = url.query_pairs().any(|(k, v)| k == "agent" && v == agent);
            if url.path() == "/quarantine"
                && agent_matches
                && matches!(window.is_visible(), Ok(true))
            {
                return Ok(", clicking it opens the agent's quarantine".to_owned());
            }
        }
    }
    Err(format!(
        "clicking the notification did not show the quarantine of {agent} (window at {seen})"
    ))
}

/// Returns the new agent's name.
async fn quarantine_three((server, url): &(Console, Url)) -> Result<String, String> {
    use switchboard_proto::{AgentCreated, ClaimResponse, CreateAgent, ReleaseRequest};
    let http = reqwest::Client::new();
    let api = |path: &str| {
        url.join(path)
            .map_err(|e| format!("bad API path {path}: {e}"))
    };
    let name = format!("smoke-bot-{}", std::process::id());
    let agent: AgentCreated = call(
        http.post(api("/api/v1/ops/agents")?)
            .bearer_auth(server.operator_token())
            .json(&CreateAgent { name: name.clone() }),
    )
    .await?;
    for n in 0..3 {
        let _: serde_json::Value = call(
            http.post(api(&format!("/api/v1/agents/{name}/messages"))?)
                .bearer_auth(server.operator_token())
                // A structured-field string, as the idempotency draft spells it.
                .header("Idempotency-Key", format!("\"{name}-{n}\""))
                .json(&serde_json::json!({ "payload": { "smoke": n } })),
        )
        .await?;
    }
    let claimed: ClaimResponse = call(
        http.post(api(&format!("/api/v1/agents/{name}/inbox/claim"))?)
            .bearer_auth(&agent.token)
            .json(&serde_json::json!({ "limit": 3, "lease_seconds": 60 })),
    )
    .await?;
    for c in claimed.events {
        let release = ReleaseRequest {
            claim_token: c.claim_token,
            delay_seconds: None,
            error: Some("smoke: schema mismatch".to_owned()),
            terminal: true,
        };
        let path = format!("/api/v1/agents/{name}/inbox/{}/release", c.event.event_id);
        let _: serde_json::Value = call(
            http.post(api(&path)?)
                .bearer_auth(&agent.token)
                .json(&release),
        )
        .await?;
    }
    Ok(name)
}

/// Sends `request` and decodes a 2xx answer; anything else is the problem's text.
async fn call<T: serde::de::DeserializeOwned>(
    request: reqwest::RequestBuilder,
) -> Result<T, String> {
    let response = request
        .send()
        .await
        .map_err(|e| format!("request failed: {e}"))?;
    let status = response.status();
    let body = response
        .text()
        .await
        .map_err(|e| format!("reading the answer: {e}"))?;
    if !status.is_success() {
        return Err(format!("the API answered {status}: {body}"));
    }
    serde_json::from_str(&body).map_err(|e| format!("decoding {body}: {e}"))
}

/// Closes the console window and checks that it was hidden, not destroyed.
fn close_hides<R: Runtime>(app: &AppHandle<R>) -> Result<(), String> {
    let window = app
        .get_webview_window(WINDOW)
        .ok_or("the console window is gone before closing it")?;
    window
        .close()
        .map_err(|e| format!("closing the window failed: {e}"))?;
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        thread::sleep(Duration::from_millis(100));
        let Some(window) = app.get_webview_window(WINDOW) else {
            return Err("closing the window destroyed it (it should only hide)".to_owned());
        };
        if matches!(window.is_visible(), Ok(false)) {
            return Ok(());
        }
    }
    Err("the window was still visible 5 s after closing it".to_owned())
}

/// Polls the window for `#app-ready`; returns the `#server-info` text once it exists.
fn wait_ready<R: Runtime>(app: &AppHandle<R>, timeout: Duration) -> Option<String> {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        let window = app.get_webview_window(WINDOW)?;
        let (tx, rx) = mpsc::channel();
        let asked = window.eval_with_callback(READY_PROBE, move |result| {
            let _ = tx.send(result);
        });
        if asked.is_ok()
            && let Ok(result) = rx.recv_timeout(Duration::from_secs(2))
            && !matches!(result.trim(), "" | "null")
        {
            return Some(result.trim().trim_matches('"').to_owned());
        }
        thread::sleep(READY_POLL);
    }
    None
}

/// Receives the window's page-load events for the smoke driver.
pub(crate) struct Probe {
    loaded: mpsc::Sender<()>,
}

impl Probe {
    pub(crate) fn page_load(&self, event: PageLoadEvent) {
        if matches!(event, PageLoadEvent::Finished) {
            let _ = self.loaded.send(());
        }
    }
}
