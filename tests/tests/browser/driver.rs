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

    /// The text of the element `css` matches, waiting for it: a page renders after
    /// its own fetch, so an element read right after navigating may not exist yet.
    pub(crate) async fn text(&self, css: &str) -> String {
        let element = self.find(css).await;
        bounded(&format!("reading the text of {css}"), element.text()).await
    }

    /// An attribute of the element `css` matches, waiting for it (as [`Self::text`]).
    pub(crate) async fn attr(&self, css: &str, name: &str) -> Option<String> {
        let element = self.find(css).await;
        bounded(&format!("reading {name} of {css}"), element.attr(name)).await
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
impl Browser {
    /// The element `css` matches, waiting for it.
    pub(crate) async fn find(&self, css: &str) -> Element {
        bounded(
            &format!("waiting for {css}"),
            self.client
                .wait()
                .at_most(WAIT)
                .for_element(Locator::Css(css)),
        )
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
        let e = self.find(css).await;
        bounded(&format!("clicking {css}"), e.click()).await;
    }

    pub(crate) async fn type_into(&self, css: &str, text: &str) {
        let e = self.find(css).await;
        bounded(&format!("typing into {css}"), e.send_keys(text)).await;
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
            if let Ok(Ok(e)) =
                tokio::time::timeout(Duration::from_secs(5), self.client.find(Locator::Css(css)))
                    .await
                && let Ok(Ok(t)) = tokio::time::timeout(Duration::from_secs(5), e.text()).await
            {
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
