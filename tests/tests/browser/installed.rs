//! The console inside an installed binary: `switchboard serve` with no `--ui-dir`
//! serves a working console, compressed, with ETags, and the wasm and JS on hashed,
//! immutable routes (issue 18).
//!
//! `cargo xtask test` installs the binary as a user would, `cargo install --path
//! crates/cli` (with `--debug`, to reuse the test build, and `SWITCHBOARD_EMBED_UI=1`,
//! which makes the build script build and embed the console as it does in a release
//! build), and names it in `SWITCHBOARD_INSTALLED_BIN`. Without that variable the test
//! says so and passes.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use reqwest::StatusCode;
use reqwest::header::{
    ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, ETAG, IF_NONE_MATCH,
};

use crate::driver::Browser;
use crate::support::{CHROMEDRIVER, CHROMIUM, bounded, server_line};

/// The installed `switchboard`, from `SWITCHBOARD_INSTALLED_BIN`.
fn installed() -> Option<PathBuf> {
    let Some(bin) = std::env::var_os("SWITCHBOARD_INSTALLED_BIN").map(PathBuf::from) else {
        eprintln!(
            "installed-binary test skipped: SWITCHBOARD_INSTALLED_BIN is not set \
             (`cargo xtask test` installs the binary and sets it)"
        );
        return None;
    };
    assert!(
        bin.is_file(),
        "SWITCHBOARD_INSTALLED_BIN={} is no file",
        bin.display()
    );
    require_browser();
    Some(bin)
}

/// Chromium and chromedriver: a test of something `cargo xtask test` built must not
/// skip its browser part.
pub(crate) fn require_browser() {
    for tool in [CHROMIUM, CHROMEDRIVER] {
        assert!(
            std::path::Path::new(tool).is_file(),
            "{tool} is missing (`cargo xtask test` installs it)"
        );
    }
}

/// A started `switchboard serve`, from its two stdout lines; killed on drop.
pub(crate) struct Served {
    child: Child,
    pub(crate) url: String,
    pub(crate) login_url: String,
    _scratch: Option<tempfile::TempDir>,
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Served {
    /// Spawns `command` (a `serve` that prints its JSON ready and login lines) and
    /// reads both lines; `scratch` lives as long as the server.
    pub(crate) fn start(mut command: Command, scratch: Option<tempfile::TempDir>) -> Self {
        let mut child = command
            // Nothing but the binary itself may supply the console, and only the
            // command's own flags and files configure it.
            .env_remove("SWITCHBOARD_UI_DIR")
            .env_remove("SWITCHBOARD_CONFIG")
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {:?}: {e}", command.get_program()));
        let mut lines = BufReader::new(child.stdout.take().expect("stdout")).lines();
        let mut next = || -> serde_json::Value {
            let line = lines
                .next()
                .expect("the server printed a line")
                .expect("reading stdout");
            serde_json::from_str(&line).expect("a JSON line")
        };
        let ready = next();
        let login = next();
        Served {
            child,
            url: ready["url"].as_str().expect("url").to_owned(),
            login_url: login["login_url"].as_str().expect("login_url").to_owned(),
            _scratch: scratch,
        }
    }
}

/// `switchboard serve` on a free port, in a scratch data directory.
fn serve(bin: &PathBuf) -> Served {
    let scratch = tempfile::tempdir().expect("scratch dir");
    let mut command = Command::new(bin);
    command
        .arg("serve")
        .args(["--listen", "127.0.0.1:0"])
        .arg("--database-url")
        .arg(format!(
            "sqlite://{}",
            scratch.path().join("switchboard.db").display()
        ))
        .arg("--operator-token-file")
        .arg(scratch.path().join("operator-token"));
    Served::start(command, Some(scratch))
}

pub(crate) async fn get(
    url: &str,
    headers: &[(reqwest::header::HeaderName, &str)],
) -> reqwest::Response {
    let mut request = reqwest::Client::new().get(url);
    for (name, value) in headers {
        request = request.header(name, *value);
    }
    bounded(&format!("GET {url}"), request.send()).await
}

async fn body(response: reqwest::Response) -> Vec<u8> {
    bounded("reading a body", response.bytes()).await.to_vec()
}

/// The route `index.html` loads `name` from: `/<stem>.<16 hex>.<ext>`.
fn hashed_route(index: &str, stem: &str, ext: &str) -> String {
    let start = index
        .find(&format!("\"/{stem}."))
        .unwrap_or_else(|| panic!("index.html loads no /{stem}.…: {index}"))
        + 1;
    let end = start + index[start..].find('"').expect("closing quote");
    let route = &index[start..end];
    let hash = route
        .strip_prefix(&format!("/{stem}."))
        .and_then(|r| r.strip_suffix(&format!(".{ext}")))
        .unwrap_or_else(|| panic!("{route} is not /{stem}.<hash>.{ext}"));
    assert!(
        hash.len() == 16 && hash.bytes().all(|b| b.is_ascii_hexdigit()),
        "{route}: the route carries a content hash"
    );
    route.to_owned()
}

#[tokio::test]
async fn an_installed_binary_serves_its_console() {
    let Some(bin) = installed() else {
        return;
    };
    let server = serve(&bin);

    // The page: always revalidated, by its ETag.
    let page = get(&format!("{}/", server.url), &[]).await;
    assert_eq!(page.status(), StatusCode::OK);
    assert_eq!(page.headers()[CACHE_CONTROL], "no-cache");
    let page_etag = page.headers()[ETAG].to_str().unwrap().to_owned();
    let index = String::from_utf8(body(page).await).unwrap();
    let again = get(
        &format!("{}/", server.url),
        &[(IF_NONE_MATCH, page_etag.as_str())],
    )
    .await;
    assert_eq!(again.status(), StatusCode::NOT_MODIFIED);
    // A client-side route gets the same page.
    let route = get(&format!("{}/agents/somebody", server.url), &[]).await;
    assert_eq!(route.status(), StatusCode::OK);
    assert_eq!(String::from_utf8(body(route).await).unwrap(), index);

    // The wasm and its loader: on hashed routes, kept for a year, compressed.
    let js = hashed_route(&index, "switchboard_ui", "js");
    let wasm = hashed_route(&index, "switchboard_ui_bg", "wasm");
    for (route, content_type) in [(&js, "text/javascript"), (&wasm, "application/wasm")] {
        let url = format!("{}{route}", server.url);
        let plain = get(&url, &[]).await;
        assert_eq!(plain.status(), StatusCode::OK, "{route}");
        assert_eq!(plain.headers()[CONTENT_TYPE], content_type, "{route}");
        let cache = plain.headers()[CACHE_CONTROL].to_str().unwrap().to_owned();
        assert!(
            cache.contains("max-age=31536000") && cache.contains("immutable"),
            "{route}: {cache}"
        );
        assert!(plain.headers().get(CONTENT_ENCODING).is_none());
        let etag = plain.headers()[ETAG].to_str().unwrap().to_owned();
        let plain = body(plain).await;
        assert!(plain.len() > 1000, "{route}: {} bytes", plain.len());

        let br = get(&url, &[(ACCEPT_ENCODING, "br, gzip")]).await;
        assert_eq!(br.headers()[CONTENT_ENCODING], "br", "{route}");
        let br = body(br).await;
        assert!(br.len() < plain.len(), "{route}: brotli made it smaller");
        let mut unbrotli = Vec::new();
        brotli::BrotliDecompress(&mut &br[..], &mut unbrotli).expect("valid brotli");
        assert_eq!(unbrotli, plain, "{route}: brotli decodes to the file");

        let gz = get(&url, &[(ACCEPT_ENCODING, "gzip")]).await;
        assert_eq!(gz.headers()[CONTENT_ENCODING], "gzip", "{route}");
        let mut ungzip = Vec::new();
        flate2::read::GzDecoder::new(&body(gz).await[..])
            .read_to_end(&mut ungzip)
            .expect("valid gzip");
        assert_eq!(ungzip, plain, "{route}: gzip decodes to the file");

        let cached = get(&url, &[(IF_NONE_MATCH, etag.as_str())]).await;
        assert_eq!(cached.status(), StatusCode::NOT_MODIFIED, "{route}");
    }

    signed_in_console(&server, "browser-installed-console.png").await;
}

/// The console works: it renders in a browser, signed in by the login link the
/// server printed, and shows what the server reports.
pub(crate) async fn signed_in_console(server: &Served, screenshot: &str) {
    let browser = Browser::start().await;
    browser.open_console(&server.login_url).await;
    let line = browser.text("#server-info").await;
    assert_eq!(line, server_line("sqlite"));
    // Signed in: the overview's live tiles.
    browser.find("#overview-tiles").await;
    browser.screenshot(screenshot).await;
}
