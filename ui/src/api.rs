//! Calls to the server's HTTP API from the browser (`window.fetch`).

use switchboard_proto::Capabilities;
use wasm_bindgen::{JsCast, JsValue};
use wasm_bindgen_futures::JsFuture;
use web_sys::Response;

/// `GET /api/v1/capabilities` (public). Errors are human-readable text for the page.
pub(crate) async fn capabilities() -> Result<Capabilities, String> {
    const PATH: &str = "/api/v1/capabilities";
    let window = web_sys::window().ok_or("no browser window")?;
    let response: Response = JsFuture::from(window.fetch_with_str(PATH))
        .await
        .map_err(|e| format!("GET {PATH}: {}", describe(&e)))?
        .dyn_into()
        .map_err(|e| format!("GET {PATH}: not a Response: {}", describe(&e)))?;
    if !response.ok() {
        return Err(format!(
            "GET {PATH}: HTTP {} {}",
            response.status(),
            response.status_text()
        ));
    }
    let body = JsFuture::from(response.text().map_err(|e| describe(&e))?)
        .await
        .map_err(|e| format!("GET {PATH}: reading the body: {}", describe(&e)))?
        .as_string()
        .ok_or_else(|| format!("GET {PATH}: the body is not text"))?;
    serde_json::from_str(&body).map_err(|e| format!("GET {PATH}: unexpected document: {e}"))
}

fn describe(value: &JsValue) -> String {
    value.as_string().unwrap_or_else(|| format!("{value:?}"))
}
