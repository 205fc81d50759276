//! The console's files, from one of three places:
//!
//! 1. `--ui-dir` (development; `cargo xtask run|test` pass `ui/dist`): served from
//!    disk as they are;
//! 2. else the console built into this binary (release builds, see `build.rs`):
//!    from memory, brotli or gzip as the browser accepts, each with an ETag. The wasm
//!    and JS are also served on hashed routes (`/switchboard_ui.<hash>.js`) with
//!    `Cache-Control: max-age=31536000, immutable`, and `index.html`, rewritten at
//!    start to load them from there, is `no-cache`: a browser revalidates one small
//!    page and never fetches an unchanged asset twice, nor runs a stale one;
//! 3. else a page that says how to get a console.
//!
//! Client-side routes (`/agents/x`) get `index.html` too in every case.

use super::AppState;
use crate::config::Config;
use axum::Router;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
#[cfg(not(switchboard_console))]
use axum::response::Html;
use axum::response::{IntoResponse, Response};
use tower_http::services::{ServeDir, ServeFile};

/// Whether this binary carries the console (a release build, or one built with
/// `SWITCHBOARD_UI_DIST` or `SWITCHBOARD_EMBED_UI=1`).
pub fn embedded() -> bool {
    cfg!(switchboard_console)
}

#[cfg(not(switchboard_console))]
const NOT_BUILT: &str = "<!doctype html><meta charset=utf-8><title>Switchboard</title>\
<h1>Switchboard</h1><p>This server was built without the console (a debug build). Use a \
release build (<code>cargo install --path crates/cli</code>), run <code>cargo xtask run</code>, \
or build the console with <code>cargo xtask ui</code> and start the server with \
<code>--ui-dir ui/dist</code>.</p>\
<p>The API is at <a href=/api/v1/openapi.json>/api/v1/openapi.json</a>.</p>";

/// The console's router (a fallback service: it sees what no API route took).
pub(super) fn router(config: &Config) -> Router<AppState> {
    if let Some(dir) = config
        .ui_dir
        .as_ref()
        .filter(|d| d.join("index.html").is_file())
    {
        return Router::new()
            .fallback_service(ServeDir::new(dir).fallback(ServeFile::new(dir.join("index.html"))));
    }
    built_in()
}

#[cfg(switchboard_console)]
fn built_in() -> Router<AppState> {
    inside::router()
}

#[cfg(not(switchboard_console))]
fn built_in() -> Router<AppState> {
    Router::new().fallback(|| async { Html(NOT_BUILT) })
}

#[cfg(switchboard_console)]
mod inside {
    use super::{AppState, Index};
    use axum::Router;
    use axum::http::HeaderMap;
    use memory_serve::{Asset, CacheControl, MemoryServe};
    use std::sync::OnceLock;

    static ASSETS: &[Asset] = include!(env!("SWITCHBOARD_CONSOLE_ASSETS"));
    static INDEX_HTML: &str = include_str!(env!("SWITCHBOARD_CONSOLE_INDEX"));

    /// Built once per process (memory-serve leaks what it decompresses, by design:
    /// it lives as long as the process), shared by every server the process runs.
    pub(super) fn router() -> Router<AppState> {
        static ROUTER: OnceLock<Router<AppState>> = OnceLock::new();
        ROUTER
            .get_or_init(|| {
                let assets = MemoryServe::new(ASSETS)
                    .index_file(None)
                    .enable_gzip(true)
                    .enable_brotli(true)
                    .enable_hashed_routes(true)
                    // The plain routes may change with the next version: revalidate.
                    .cache_control(CacheControl::NoCache);
                let manifest = assets.manifest();
                let index: &'static Index = Box::leak(Box::new(Index::new(
                    INDEX_HTML,
                    manifest.iter().map(|(r, s)| (r.to_owned(), s.to_owned())),
                )));
                assets.into_router().fallback(axum::routing::get(
                    move |headers: HeaderMap| async move { index.respond(&headers) },
                ))
            })
            .clone()
    }
}

/// `index.html` with every asset reference pointed at the asset's hashed route.
#[derive(Debug)]
#[cfg_attr(not(switchboard_console), allow(dead_code))]
struct Index {
    html: String,
    etag: HeaderValue,
}

#[cfg_attr(not(switchboard_console), allow(dead_code))]
impl Index {
    /// Replaces each `"<route>"` of `html` by `"<served route>"`.
    fn new(html: &str, routes: impl IntoIterator<Item = (String, String)>) -> Self {
        let mut html = html.to_owned();
        for (route, served) in routes {
            html = html.replace(&format!("\"{route}\""), &format!("\"{served}\""));
        }
        use sha2::Digest;
        let digest = sha2::Sha256::digest(html.as_bytes());
        let tag: String = digest[..12].iter().map(|b| format!("{b:02x}")).collect();
        let etag = HeaderValue::from_str(&format!("\"{tag}\"")).expect("hex is a valid header");
        Self { html, etag }
    }

    fn respond(&self, request: &HeaderMap) -> Response {
        let cache = (header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
        let etag = (header::ETAG, self.etag.clone());
        if if_none_match(request, &self.etag) {
            return (StatusCode::NOT_MODIFIED, [cache, etag]).into_response();
        }
        (
            [
                cache,
                etag,
                (
                    header::CONTENT_TYPE,
                    HeaderValue::from_static("text/html; charset=utf-8"),
                ),
            ],
            self.html.clone(),
        )
            .into_response()
    }
}

/// Whether `If-None-Match` names `etag` (weak comparison, RFC 9110 §13.1.2).
#[cfg_attr(not(switchboard_console), allow(dead_code))]
fn if_none_match(request: &HeaderMap, etag: &HeaderValue) -> bool {
    let Ok(ours) = etag.to_str() else {
        return false;
    };
    request
        .get_all(header::IF_NONE_MATCH)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|t| t.trim())
        .any(|t| t == "*" || t.strip_prefix("W/").unwrap_or(t) == ours)
}

#[cfg(test)]
mod tests {
    use super::*;

    const PAGE: &str = r#"<script type="module">import init from "/switchboard_ui.js";
init({ module_or_path: "/switchboard_ui_bg.wasm" });</script>"#;

    fn index() -> Index {
        Index::new(
            PAGE,
            [
                ("/switchboard_ui.js", "/switchboard_ui.0123456789abcdef.js"),
                (
                    "/switchboard_ui_bg.wasm",
                    "/switchboard_ui_bg.fedcba9876543210.wasm",
                ),
                // Not referenced by the page: nothing to replace.
                ("/snippets/a.js", "/snippets/a.1111111111111111.js"),
            ]
            .map(|(a, b)| (a.to_owned(), b.to_owned())),
        )
    }

    #[test]
    fn the_index_loads_the_hashed_routes() {
        let index = index();
        assert!(
            index
                .html
                .contains(r#"import init from "/switchboard_ui.0123456789abcdef.js";"#),
            "{}",
            index.html
        );
        assert!(
            index
                .html
                .contains(r#"module_or_path: "/switchboard_ui_bg.fedcba9876543210.wasm""#),
            "{}",
            index.html
        );
        assert!(!index.html.contains("\"/switchboard_ui.js\""));
    }

    #[test]
    fn the_index_is_revalidated_by_its_etag() {
        let index = index();
        let first = index.respond(&HeaderMap::new());
        assert_eq!(first.status(), StatusCode::OK);
        assert_eq!(first.headers()[header::CACHE_CONTROL], "no-cache");
        let etag = first.headers()[header::ETAG].clone();
        assert_eq!(etag, index.etag);

        for value in [
            etag.to_str().unwrap().to_owned(),
            format!("W/{}", etag.to_str().unwrap()),
            format!("\"other\", {}", etag.to_str().unwrap()),
            "*".to_owned(),
        ] {
            let mut request = HeaderMap::new();
            request.insert(header::IF_NONE_MATCH, value.parse().unwrap());
            let again = index.respond(&request);
            assert_eq!(again.status(), StatusCode::NOT_MODIFIED, "{value}");
            assert_eq!(again.headers()[header::ETAG], etag);
        }
        let mut stale = HeaderMap::new();
        stale.insert(header::IF_NONE_MATCH, "\"older\"".parse().unwrap());
        assert_eq!(index.respond(&stale).status(), StatusCode::OK);
    }
}
