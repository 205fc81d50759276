//! The helpers of `driver.rs` against live re-renders (issue 36, item 12): the
//! console replaces a table's rows (and their buttons) when an SSE event makes it
//! fetch again, so an element a helper found may be gone when the helper acts on it.
//!
//! A small page, served by a local axum server, stands in for the console: its
//! clicks are handled on `document` (as Leptos delegates them), so an identical clone
//! of a button still works. Each helper is called with a script hooked between its
//! lookup and its action ([`Browser::after_next_lookup`]) that swaps the element for
//! an identical clone: the worst moment for a re-render, every time. The helper must
//! look the element up again and finish; an error other than a replaced element must
//! still fail at once.

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::time::Instant;

use axum::Router;
use axum::response::Html;
use axum::routing::get;
use futures::FutureExt;
use tokio::net::TcpListener;

use crate::driver::Browser;
use crate::support::{WAIT, bounded, skip};

const PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>re-render</title></head><body>
<table id="agents"><tbody>
  <tr data-agent="dave"><td data-col="name" data-state="live">dave</td>
    <td><button type="button" data-delete="dave">Delete…</button></td></tr>
  <tr data-agent="erin"><td data-col="name" data-state="live">erin</td>
    <td><button type="button" data-delete="erin">Delete…</button></td></tr>
</tbody></table>
<input id="name" type="text" value="">
<select id="mode"><option value="live">live</option><option value="paused">paused</option></select>
<button type="button" id="hidden" style="display:none">Hidden</button>
<p id="log"></p>
<script>
  // Delegated, as Leptos does: a clone of a button is handled like the original.
  document.addEventListener('click', (ev) => {
    const b = ev.target.closest('button[data-delete]');
    if (b) document.getElementById('log').textContent += 'delete ' + b.dataset.delete + ';';
  });
  document.body.dataset.ready = 'true';
</script>
</body></html>"#;

/// Replaces `arguments[0]` with an identical clone, as a re-render replaces a row's
/// nodes with new ones: a field's clone keeps its value, a focused element's clone
/// takes the focus.
const SWAP: &str = "const old = arguments[0]; const focused = document.activeElement === old; \
    const copy = old.cloneNode(true); if ('value' in old) copy.value = old.value; \
    old.replaceWith(copy); if (focused) copy.focus();";

/// Serves [`PAGE`] on `127.0.0.1:0`; returns its URL. The server lives as long as the
/// test's runtime.
async fn serve_page() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let app = Router::new().route("/", get(|| async { Html(PAGE) }));
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/")
}

/// The browser on [`PAGE`], or `None` when browser tests are skipped (no chromium).
async fn open_page() -> Option<Browser> {
    for tool in [crate::support::CHROMIUM, crate::support::CHROMEDRIVER] {
        if !std::path::Path::new(tool).is_file() {
            return skip(&format!("{tool} is missing"));
        }
    }
    let url = serve_page().await;
    let browser = Browser::start().await;
    bounded("loading the page", browser.client.goto(&url)).await;
    browser.find("body[data-ready='true']").await;
    Some(browser)
}

/// Evaluates `expression` in the page.
async fn eval(browser: &Browser, expression: &str) -> serde_json::Value {
    bounded(
        &format!("evaluating {expression}"),
        browser
            .client
            .execute(&format!("return {expression};"), vec![]),
    )
    .await
}

/// Whether the node `css` matches now is not the one it matched before `marked`:
/// the hook really replaced it.
async fn was_replaced(browser: &Browser, css: &str) -> bool {
    eval(
        browser,
        &format!("document.querySelector({css:?}).dataset.marked !== 'before'"),
    )
    .await
        == serde_json::Value::Bool(true)
}

/// Marks the node `css` matches, so [`was_replaced`] can tell a clone from it; then
/// hooks [`SWAP`] between the next helper's lookup and its action.
async fn replace_after_lookup(browser: &Browser, css: &str) {
    eval(
        browser,
        &format!("document.querySelector({css:?}).dataset.marked = 'before'"),
    )
    .await;
    browser.after_next_lookup(&format!("delete arguments[0].dataset.marked; {SWAP}"));
}

#[tokio::test(flavor = "current_thread")]
async fn helpers_retry_when_the_element_is_replaced_between_lookup_and_action() {
    let Some(browser) = open_page().await else {
        return;
    };

    // The flake of issue 36: the row's button replaced between lookup and click.
    let delete = r#"#agents button[data-delete="dave"]"#;
    replace_after_lookup(&browser, delete).await;
    browser.click(delete).await;
    assert!(was_replaced(&browser, delete).await, "the hook ran");
    assert_eq!(
        eval(&browser, "document.getElementById('log').textContent").await,
        "delete dave;",
        "one click, on the new button"
    );

    let cell = r#"#agents tr[data-agent="erin"] td[data-col="name"]"#;
    replace_after_lookup(&browser, cell).await;
    assert_eq!(browser.text(cell).await, "erin");
    assert!(was_replaced(&browser, cell).await);

    replace_after_lookup(&browser, cell).await;
    assert_eq!(
        browser.attr(cell, "data-state").await.as_deref(),
        Some("live")
    );
    assert!(was_replaced(&browser, cell).await);

    replace_after_lookup(&browser, cell).await;
    assert_eq!(
        browser.wait_text(cell, "erin", |t| t == "erin").await,
        "erin"
    );
    assert!(was_replaced(&browser, cell).await);

    replace_after_lookup(&browser, "#name").await;
    browser.type_into("#name", "dave").await;
    assert!(was_replaced(&browser, "#name").await);
    assert_eq!(
        eval(&browser, "document.getElementById('name').value").await,
        "dave",
        "typed once, into the new field"
    );

    replace_after_lookup(&browser, "#name").await;
    browser.clear("#name").await;
    assert!(was_replaced(&browser, "#name").await);
    assert_eq!(
        eval(&browser, "document.getElementById('name').value").await,
        ""
    );

    replace_after_lookup(&browser, "#mode").await;
    browser.select("#mode", "paused").await;
    assert!(was_replaced(&browser, "#mode").await);
    assert_eq!(
        eval(&browser, "document.getElementById('mode').value").await,
        "paused"
    );

    // The focused element replaced between reading which one it is and typing.
    bounded(
        "focusing the field",
        browser
            .client
            .execute("document.getElementById('name').focus()", vec![]),
    )
    .await;
    replace_after_lookup(&browser, "#name").await;
    browser.press("x").await;
    assert!(was_replaced(&browser, "#name").await);
    assert_eq!(
        eval(&browser, "document.getElementById('name').value").await,
        "x"
    );

    // Every cell read again when one of them was replaced mid-read.
    let names = "#agents td[data-col='name']";
    replace_after_lookup(&browser, names).await;
    assert_eq!(browser.texts(names).await, ["dave", "erin"]);
    assert!(was_replaced(&browser, names).await);
}

/// Runs `step` and returns its panic message; fails if it does not panic.
async fn panic_of(step: impl Future<Output = ()>) -> String {
    let Err(payload) = AssertUnwindSafe(step).catch_unwind().await else {
        panic!("the step should have failed");
    };
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| (*s).to_owned()))
        .unwrap_or_default()
}

#[tokio::test(flavor = "current_thread")]
async fn helpers_fail_fast_on_errors_other_than_a_replaced_element() {
    let Some(browser) = open_page().await else {
        return;
    };
    let fast = WAIT / 3;

    // A hidden button is not interactable, and no re-render will change that.
    let started = Instant::now();
    let message = panic_of(browser.click("#hidden")).await;
    assert!(
        message.starts_with("clicking #hidden: ") && message.contains("not interactable"),
        "{message}"
    );
    assert!(started.elapsed() < fast, "{:?}", started.elapsed());

    let started = Instant::now();
    let message = panic_of(async {
        browser.text("tr[[bad").await;
    })
    .await;
    assert!(
        message.starts_with("reading the text of tr[[bad: looking it up: "),
        "{message}"
    );
    assert!(started.elapsed() < fast, "{:?}", started.elapsed());

    // A `<select>` without that option: no re-render will add it.
    let started = Instant::now();
    let message = panic_of(browser.select("#mode", "gone")).await;
    assert!(
        message.starts_with("choosing an option of #mode: ") && message.contains("no such element"),
        "{message}"
    );
    assert!(started.elapsed() < fast, "{:?}", started.elapsed());

    // Still usable afterwards, and nothing was clicked.
    assert_eq!(
        eval(&browser, "document.getElementById('log').textContent").await,
        ""
    );
}
