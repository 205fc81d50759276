//! A headless Chromium session behind a chromedriver of its own, both ended on drop.
//!
//! chromedriver runs in its own process group, so the browser it launches can be
//! killed with it even when a test panics half-way: drop first asks chromedriver to
//! end the session (which closes Chromium), then kills the whole group.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

use fantoccini::elements::Element;
use fantoccini::error::CmdError;
use switchboard_tests::TestServer;

use crate::support::{CHROMEDRIVER, CHROMIUM, WAIT, bounded, target_dir};

/// The browser's flags: headless, no sandbox (tests run as root), and nothing that
/// reaches out to the network or depends on the machine's GPU and /dev/shm.
const CHROMIUM_ARGS: &[&str] = &[
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
    // A fixed viewport, so screenshots look alike from run to run.
    "--window-size=1280,800",
];

/// How often chromedriver may fail to start before the test gives up. A retry covers
/// the port picked by binding `:0` being taken by someone else before chromedriver
/// binds it.
const DRIVER_ATTEMPTS: usize = 3;

/// A WebDriver session in headless Chromium.
pub(crate) struct Browser {
    pub(crate) client: Client,
    session_id: String,
    /// A script to run once between a helper's next lookup and its action
    /// ([`Browser::after_next_lookup`]).
    after_lookup: std::sync::Mutex<Option<String>>,
    // Dropped after `Browser::drop` has ended the session; then it kills the group.
    driver: Driver,
    // Chromium's profile and chromedriver's log; removed last.
    _scratch: tempfile::TempDir,
}

impl Browser {
    /// Starts chromedriver and a fresh Chromium session with its own profile.
    pub(crate) async fn start() -> Self {
        let scratch = tempfile::tempdir().expect("temp dir for the browser");
        let profile = scratch.path().join("profile");
        let driver = Driver::start(&scratch.path().join("chromedriver.log")).await;

        let mut args: Vec<String> = CHROMIUM_ARGS.iter().map(|a| (*a).to_owned()).collect();
        args.push(format!("--user-data-dir={}", profile.display()));
        let mut caps = serde_json::Map::new();
        caps.insert("browserName".to_owned(), json!("chrome"));
        caps.insert(
            "goog:chromeOptions".to_owned(),
            json!({ "binary": CHROMIUM, "args": args }),
        );
        let url = driver.url();
        let connected = tokio::time::timeout(WAIT, async {
            ClientBuilder::rustls()
                .map_err(|e| format!("no TLS roots for the WebDriver client: {e}"))?
                .capabilities(caps)
                .connect(&url)
                .await
                .map_err(|e| e.to_string())
        })
        .await;
        let client = match connected {
            Ok(Ok(client)) => client,
            Ok(Err(error)) => panic!(
                "chromedriver did not start a Chromium session: {error}\n{}",
                driver.log_tail()
            ),
            Err(_) => panic!(
                "chromedriver did not start a Chromium session within {WAIT:?}\n{}",
                driver.log_tail()
            ),
        };
        let session_id = bounded("reading the WebDriver session id", client.session_id())
            .await
            .expect("a connected client has a session id");
        Self {
            client,
            session_id,
            after_lookup: std::sync::Mutex::new(None),
            driver,
            _scratch: scratch,
        }
    }

    /// Opens `url` and waits for the console's `#app-ready`. On a timeout the panic
    /// message carries the page as the browser sees it.
    pub(crate) async fn open_console(&self, url: &str) {
        bounded(&format!("loading {url}"), self.client.goto(url)).await;
        let waited = tokio::time::timeout(
            WAIT + Duration::from_secs(5),
            self.client
                .wait()
                .at_most(WAIT)
                .for_element(Locator::Css("#app-ready")),
        )
        .await;
        if let Ok(Ok(_)) = waited {
            return;
        }
        let source = tokio::time::timeout(Duration::from_secs(5), self.client.source()).await;
        let source = match source {
            Ok(Ok(html)) => html,
            Ok(Err(e)) => format!("(could not read the page: {e})"),
            Err(_) => "(could not read the page: no answer)".to_owned(),
        };
        panic!(
            "{url} did not render #app-ready within {WAIT:?} ({}); the page is:\n{source}",
            match waited {
                Ok(Err(e)) => e.to_string(),
                _ => "the browser stopped answering".to_owned(),
            }
        );
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        // Synchronous on purpose: the client's own close is async and would not run
        // once the test's runtime is gone (or while it unwinds from a panic).
        if let Err(error) = self.driver.delete_session(&self.session_id) {
            eprintln!("could not end the Chromium session (killing it instead): {error}");
        }
    }
}

/// A chromedriver process on a free local port, in its own process group.
struct Driver {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Driver {
    async fn start(log: &Path) -> Self {
        let mut last_error = String::new();
        for _ in 0..DRIVER_ATTEMPTS {
            let port = free_port();
            let log_file = std::fs::File::create(log).expect("chromedriver log file");
            let child = Command::new(CHROMEDRIVER)
                .arg(format!("--port={port}"))
                .stdin(Stdio::null())
                .stdout(log_file.try_clone().expect("log file handle"))
                .stderr(log_file)
                // Its own group, so the browser it launches can be killed with it.
                .process_group(0)
                .spawn()
                .unwrap_or_else(|e| panic!("could not start {CHROMEDRIVER}: {e}"));
            let mut driver = Self {
                child,
                port,
                log: log.to_owned(),
            };
            match driver.wait_ready().await {
                Ok(()) => return driver,
                Err(error) => last_error = format!("{error}\n{}", driver.log_tail()),
            }
        }
        panic!("chromedriver did not start ({DRIVER_ATTEMPTS} attempts): {last_error}");
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Polls `/status` until chromedriver says it is ready, it exits, or [`WAIT`] passes.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(2))
            .build()
            .expect("http client");
        let status = format!("{}/status", self.url());
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(exit) = self.child.try_wait().expect("chromedriver status") {
                return Err(format!("chromedriver exited early ({exit})"));
            }
            if let Ok(response) = http.get(&status).send().await
                && let Ok(body) = response.json::<serde_json::Value>().await
                && body["value"]["ready"] == true
            {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(format!("chromedriver's {status} not ready within {WAIT:?}"));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `DELETE /session/{id}` over a plain socket: chromedriver closes the browser.
    fn delete_session(&self, session_id: &str) -> std::io::Result<()> {
        let timeout = Some(Duration::from_secs(10));
        let mut stream = TcpStream::connect((Ipv4Addr::LOCALHOST, self.port))?;
        stream.set_write_timeout(timeout)?;
        stream.set_read_timeout(timeout)?;
        write!(
            stream,
            "DELETE /session/{session_id} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\n\
             Content-Length: 0\r\nConnection: close\r\n\r\n",
            self.port
        )?;
        // chromedriver answers once the browser is closed. It may keep the connection
        // open despite `Connection: close`, so read the status line, not to EOF.
        let mut response = Vec::new();
        let mut chunk = [0u8; 1024];
        while !response.windows(2).any(|w| w == b"\r\n") {
            let n = stream.read(&mut chunk)?;
            if n == 0 {
                break;
            }
            response.extend_from_slice(&chunk[..n]);
        }
        let response = String::from_utf8_lossy(&response);
        if response.starts_with("HTTP/1.1 200") {
            Ok(())
        } else {
            Err(std::io::Error::other(format!(
                "chromedriver answered: {}",
                response.lines().next().unwrap_or("nothing")
            )))
        }
    }

    /// The end of chromedriver's output, for failure messages.
    fn log_tail(&self) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(20)..].join("\n");
        format!("chromedriver output (last 20 lines):\n{tail}")
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        // The group id is chromedriver's pid (`process_group(0)`); the browser is in it.
        let group = format!("-{}", self.child.id());
        let killed = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        if !killed {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A port that was free a moment ago: bind `127.0.0.1:0`, read the port, let it go.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .expect("a free local port")
        .port()
}

/// Waiting and acting on the page, each bounded by [`WAIT`].
///
/// The console re-renders live: an SSE event makes a page fetch its data again and
/// replace its table rows (and their buttons) with new DOM nodes. An element found
/// a moment ago may be gone when the next WebDriver command reaches it ("stale
/// element reference"). So every helper that acts on an element (or reads one) finds
/// it and acts in one step ([`Browser::on_element`]), and when the element was
/// replaced in between, it looks it up again and retries until [`WAIT`] has passed.
/// Any other error fails at once, with the action and the selector in the message.
/// A test that holds an [`Element`] across awaits has the same problem: act through
/// these helpers instead.
impl Browser {
    /// Waits until `css` matches an element; returns it. Only for waiting: the next
    /// re-render may replace it, so read it or act on it through the helpers below,
    /// which look it up again.
    pub(crate) async fn find(&self, css: &str) -> Element {
        self.on_element(Target::Css(css), "waiting for", async |e| Ok(e))
            .await
    }

    /// Loads `path` of `server` (a console route, the session cookie already set).
    pub(crate) async fn goto(&self, server: &TestServer, path: &str) {
        bounded(
            &format!("loading {path}"),
            self.client.goto(&format!("{}{path}", server.url)),
        )
        .await;
    }

    pub(crate) async fn click(&self, css: &str) {
        self.on_element(Target::Css(css), "clicking", async |e| e.click().await)
            .await;
    }

    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        self.on_element(Target::Css(css), "typing into", async |e| {
            e.send_keys(text).await
        })
        .await;
    }

    /// Empties the field `css` matches.
    pub(crate) async fn clear(&self, css: &str) {
        self.on_element(Target::Css(css), "clearing", async |e| e.clear().await)
            .await;
    }

    /// Chooses the option of value `value` in the `<select>` `css` matches.
    pub(crate) async fn select(&self, css: &str, value: &str) {
        self.on_element(Target::Css(css), "choosing an option of", async |e| {
            e.select_by_value(value).await
        })
        .await;
    }

    /// Sends `keys` to the focused element.
    pub(crate) async fn press(&self, keys: &str) {
        self.on_element(Target::Focused, "pressing keys in", async |e| {
            e.send_keys(keys).await
        })
        .await;
    }

    /// The text of the element `css` matches, waiting for it: a page renders after
    /// its own fetch, so an element read right after navigating may not exist yet.
    pub(crate) async fn text(&self, css: &str) -> String {
        self.on_element(Target::Css(css), "reading the text of", async |e| {
            e.text().await
        })
        .await
    }

    /// An attribute of the element `css` matches, waiting for it (as [`Self::text`]).
    pub(crate) async fn attr(&self, css: &str, name: &str) -> Option<String> {
        self.on_element(Target::Css(css), &format!("reading {name} of"), async |e| {
            e.attr(name).await
        })
        .await
    }

    /// The texts of every element `css` matches (none: an empty list), read in one
    /// step: if a re-render replaces any of them, all are read again.
    pub(crate) async fn texts(&self, css: &str) -> Vec<String> {
        let what = "reading the texts of";
        let deadline = Instant::now() + WAIT;
        let mut retries = Retries::default();
        loop {
            let all = answer(what, css, deadline, self.client.find_all(Locator::Css(css)))
                .await
                .unwrap_or_else(|e| panic!("{what} {css}: looking it up: {e}"));
            if let Some(first) = all.first() {
                self.run_after_lookup(first, what, css, deadline).await;
            }
            let read = async {
                let mut texts = Vec::with_capacity(all.len());
                for e in &all {
                    texts.push(e.text().await?);
                }
                Ok(texts)
            };
            match answer(what, css, deadline, read).await {
                Ok(texts) => return texts,
                // One of them is gone: the selector may match other nodes now.
                Err(e) if is_stale(&e) => retries.replaced(what, css, e),
                Err(e) => panic!("{what} {css}: {e}"),
            }
            retries.pause(what, css, deadline).await;
        }
    }

    /// Waits until the text of `css` satisfies `ok`; returns it.
    pub(crate) async fn wait_text(
        &self,
        css: &str,
        what: &str,
        ok: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + WAIT;
        let mut last = String::new();
        loop {
            let read = self
                .attempt(
                    Target::Css(css),
                    "reading the text of",
                    deadline,
                    &async |e| e.text().await,
                )
                .await;
            // Missing or replaced: look again, as when the text is not there yet.
            if let Ok(t) = read {
                if ok(&t) {
                    return t;
                }
                last = t;
            }
            assert!(
                Instant::now() < deadline,
                "{css}: {what} within {WAIT:?}; last text {last:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits until `css` matches exactly `n` elements.
    pub(crate) async fn wait_count(&self, css: &str, n: usize) {
        let deadline = Instant::now() + WAIT;
        loop {
            let found = bounded(
                &format!("finding {css}"),
                self.client.find_all(Locator::Css(css)),
            )
            .await
            .len();
            if found == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{css}: expected {n} elements within {WAIT:?}, found {found}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    pub(crate) async fn exists(&self, css: &str) -> bool {
        !bounded(
            &format!("finding {css}"),
            self.client.find_all(Locator::Css(css)),
        )
        .await
        .is_empty()
    }

    /// Runs `script` once, with `arguments[0]` the element the next helper looks up,
    /// between that lookup and the helper's action: how a test forces a re-render at
    /// the worst moment (`browser/rerender.rs`).
    pub(crate) fn after_next_lookup(&self, script: &str) {
        *self.after_lookup.lock().expect("the hook's lock") = Some(script.to_owned());
    }

    async fn run_after_lookup(&self, element: &Element, what: &str, css: &str, deadline: Instant) {
        let script = self.after_lookup.lock().expect("the hook's lock").take();
        if let Some(script) = script {
            let arg = serde_json::to_value(element).expect("an element reference as JSON");
            answer(what, css, deadline, self.client.execute(&script, vec![arg]))
                .await
                .unwrap_or_else(|e| panic!("{what} {css}: the after-lookup script: {e}"));
        }
    }

    /// Finds `target` and runs `act` on it, in one step retried until it succeeds or
    /// [`WAIT`] has passed: while nothing matches (not rendered yet), and when the
    /// element found was replaced before `act` reached it (a live re-render). Any
    /// other error panics at once.
    async fn on_element<T>(
        &self,
        target: Target<'_>,
        what: &str,
        act: impl AsyncFn(Element) -> Result<T, CmdError>,
    ) -> T {
        let deadline = Instant::now() + WAIT;
        let mut retries = Retries::default();
        loop {
            match self.attempt(target, what, deadline, &act).await {
                Ok(value) => return value,
                Err(Again::Missing) => retries.missing(),
                Err(Again::Replaced(e)) => retries.replaced(what, &target.to_string(), e),
            }
            retries.pause(what, &target.to_string(), deadline).await;
        }
    }

    /// One lookup of `target` and `act` on what it found.
    async fn attempt<T>(
        &self,
        target: Target<'_>,
        what: &str,
        deadline: Instant,
        act: &impl AsyncFn(Element) -> Result<T, CmdError>,
    ) -> Result<T, Again> {
        let css = target.to_string();
        let Some(element) = self.lookup(target, what, deadline).await else {
            return Err(Again::Missing);
        };
        self.run_after_lookup(&element, what, &css, deadline).await;
        match answer(what, &css, deadline, act(element.clone())).await {
            Ok(value) => Ok(value),
            Err(e) if e.is_stale_element_reference() => Err(Again::Replaced(e)),
            // A node replaced half-way through the command may also give "no such
            // element" (a reference the page no longer knows, or a `<select>`'s
            // option looked up in the old node), "not interactable" (a detached node
            // has no size) or an inspector error. Only a re-render excuses them: the
            // target is now another element, or none. A `<select>` without that
            // option, or a hidden button, fails at once.
            Err(e)
                if e.is_no_such_element() || e.is_element_not_interactable() || is_detached(&e) =>
            {
                match self.lookup(target, what, deadline).await {
                    Some(now) if now.element_id() == element.element_id() => {
                        panic!("{what} {css}: {e}")
                    }
                    _ => Err(Again::Replaced(e)),
                }
            }
            Err(e) => panic!("{what} {css}: {e}"),
        }
    }

    /// The element `target` is now, or `None` when nothing matches.
    async fn lookup(&self, target: Target<'_>, what: &str, deadline: Instant) -> Option<Element> {
        let css = target.to_string();
        let found = match target {
            Target::Css(css) => {
                answer(what, css, deadline, self.client.find(Locator::Css(css))).await
            }
            Target::Focused => answer(what, &css, deadline, self.client.active_element()).await,
        };
        match found {
            Ok(element) => Some(element),
            Err(e) if e.is_no_such_element() => None,
            Err(e) => panic!("{what} {css}: looking it up: {e}"),
        }
    }

    /// Opens the console through a one-time login link minted with the operator
    /// token, as the desktop app does; returns the link's path.
    pub(crate) async fn open_logged_in(&self, server: &TestServer, read_only: bool) -> String {
        self.open_logged_in_as(server, &server.operator_token, read_only)
            .await
    }

    /// Like [`Browser::open_logged_in`], with another operator's token (another
    /// tenant's).
    pub(crate) async fn open_logged_in_as(
        &self,
        server: &TestServer,
        token: &str,
        read_only: bool,
    ) -> String {
        let link: serde_json::Value = reqwest::Client::new()
            .post(format!("{}/api/v1/ops/login-links", server.url))
            .bearer_auth(token)
            .json(&json!({ "read_only": read_only }))
            .send()
            .await
            .expect("mint")
            .json()
            .await
            .expect("json");
        let path = link["path"].as_str().expect("path").to_owned();
        self.open_console(&format!("{}{path}", server.url)).await;
        path
    }

    pub(crate) async fn screenshot(&self, name: &str) {
        let png = bounded("taking a screenshot", self.client.screenshot()).await;
        let path = target_dir().join(name);
        let _ = std::fs::write(&path, &png);
        let _ = std::io::Write::write_all(
            &mut std::io::stderr(),
            format!("browser screenshot: {}\n", path.display()).as_bytes(),
        );
    }
}

/// What a helper looks up: the element a selector matches, or the focused one.
#[derive(Clone, Copy)]
enum Target<'a> {
    Css(&'a str),
    Focused,
}

impl std::fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Css(css) => f.write_str(css),
            Self::Focused => f.write_str("the focused element"),
        }
    }
}

/// Why one attempt did not finish, where a later one may.
enum Again {
    /// Nothing matches (yet).
    Missing,
    /// The element found was replaced (or removed) before the action reached it.
    Replaced(CmdError),
}

/// How long a helper waits before looking an element up again.
const RETRY_PAUSE: Duration = Duration::from_millis(50);

/// The attempts of one helper call that did not finish, for its timeout message.
#[derive(Default)]
struct Retries {
    replaced: usize,
    last: Option<String>,
}

impl Retries {
    fn missing(&mut self) {
        self.last = Some("nothing matches it".to_owned());
    }

    fn replaced(&mut self, what: &str, target: &str, error: CmdError) {
        self.replaced += 1;
        let error = error.to_string();
        // Captured by libtest: shown with a failure, or with `--nocapture`.
        eprintln!(
            "browser: {what} {target}: replaced by a re-render, looking it up again ({})",
            error.lines().next().unwrap_or_default()
        );
        self.last = Some(format!("it was replaced under the action: {error}"));
    }

    /// Waits before the next attempt; panics once `deadline` has passed.
    async fn pause(&self, what: &str, target: &str, deadline: Instant) {
        assert!(
            Instant::now() < deadline,
            "{what} {target}: not done within {WAIT:?} ({} re-renders in between); last: {}",
            self.replaced,
            self.last.as_deref().unwrap_or("no attempt")
        );
        tokio::time::sleep(RETRY_PAUSE).await;
    }
}

/// A "stale element reference", or an element reference the page no longer knows:
/// the node was removed or replaced since it was found.
fn is_stale(error: &CmdError) -> bool {
    error.is_stale_element_reference() || error.is_no_such_element()
}

/// Chromium's inspector errors for a node detached while a command used it.
fn is_detached(error: &CmdError) -> bool {
    let CmdError::Standard(e) = error else {
        return false;
    };
    e.error == fantoccini::error::ErrorStatus::UnknownError
        && [
            "detached",
            "does not belong to the document",
            "No node with given id",
        ]
        .iter()
        .any(|m| e.message.contains(m))
}

/// Awaits one WebDriver command for what is left of `deadline` (at least 5 s, so the
/// last attempt gets an answer); panics if the browser does not answer.
async fn answer<T>(
    what: &str,
    target: &str,
    deadline: Instant,
    command: impl Future<Output = Result<T, CmdError>>,
) -> Result<T, CmdError> {
    let left = deadline
        .saturating_duration_since(Instant::now())
        .max(Duration::from_secs(5));
    tokio::time::timeout(left, command)
        .await
        .unwrap_or_else(|_| panic!("{what} {target}: no answer within {left:?}"))
}
