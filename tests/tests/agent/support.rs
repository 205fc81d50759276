use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::State;
use axum::response::IntoResponse;
use switchboard_tests::sdk::reqwest;
use tokio::sync::oneshot;

use switchboard_tests::key;
use switchboard_tests::sdk::proto::SendMessage;
use switchboard_tests::sdk::{Client, LocalDb};

/// A local state file in its own temp dir (kept alive by the returned guard).
pub(crate) async fn local_db() -> (LocalDb, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = LocalDb::open(dir.path().join("agent.db"))
        .await
        .expect("local db");
    (db, dir)
}

/// Sends `n` messages `{ "n": i }` to `agent`, i = `from`..`from + n`.
pub(crate) async fn send_numbered(sender: &Client, agent: &str, from: u64, n: u64) {
    for i in from..from + n {
        let message = SendMessage {
            payload: serde_json::json!({ "n": i }),
            ..SendMessage::default()
        };
        sender
            .send_message(agent, &message, &key())
            .await
            .expect("send");
    }
}

/// Polls `check` every 20 ms until it returns true, for at most `limit`.
pub(crate) async fn eventually<F, Fut>(limit: Duration, what: &str, mut check: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + limit;
    while !check().await {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A reverse proxy in front of a server that can lose answers. With
/// [`LossyProxy::lose_next_post`] armed, the next POST is forwarded, the server
/// finishes it (and commits), and the client never hears back: what a connection
/// dropped after the server's commit looks like to the agent.
pub(crate) struct LossyProxy {
    pub(crate) url: String,
    lose: Arc<AtomicBool>,
    _shutdown: oneshot::Sender<()>,
}

struct Upstream {
    base: String,
    http: reqwest::Client,
    lose: Arc<AtomicBool>,
}

impl LossyProxy {
    pub(crate) async fn start(upstream: &str) -> Self {
        let lose = Arc::new(AtomicBool::new(false));
        let state = Arc::new(Upstream {
            base: upstream.trim_end_matches('/').to_owned(),
            http: reqwest::Client::new(),
            lose: lose.clone(),
        });
        let app = axum::Router::new().fallback(forward).with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let url = format!("http://{}", listener.local_addr().expect("addr"));
        let (shutdown, stop) = oneshot::channel::<()>();
        tokio::spawn(async move {
            let _ = axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stop.await;
                })
                .await;
        });
        Self {
            url,
            lose,
            _shutdown: shutdown,
        }
    }

    /// The next POST reaches the server, but its answer does not reach the client.
    pub(crate) fn lose_next_post(&self) {
        self.lose.store(true, Ordering::SeqCst);
    }
}

async fn forward(
    State(upstream): State<Arc<Upstream>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX)
        .await
        .expect("request body");
    let path = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    let mut outgoing = upstream
        .http
        .request(parts.method.clone(), format!("{}{path}", upstream.base))
        .body(body);
    for (name, value) in &parts.headers {
        if name != axum::http::header::HOST {
            outgoing = outgoing.header(name, value);
        }
    }
    let lose =
        parts.method == axum::http::Method::POST && upstream.lose.swap(false, Ordering::SeqCst);
    // Spawned: the server's side completes even when the client gives up waiting.
    let answer = tokio::spawn(async move {
        let response = outgoing.send().await?;
        let status = response.status();
        let headers = response.headers().clone();
        let body = response.bytes().await?;
        Ok::<_, reqwest::Error>((status, headers, body))
    })
    .await
    .expect("forward task");
    if lose {
        std::future::pending::<()>().await;
    }
    match answer {
        Ok((status, headers, body)) => {
            let mut response = axum::response::Response::new(axum::body::Body::from(body));
            *response.status_mut() = status;
            for (name, value) in &headers {
                // Hop-by-hop: the proxy's own connection frames the body.
                if !matches!(
                    name.as_str(),
                    "transfer-encoding" | "connection" | "content-length"
                ) {
                    response.headers_mut().append(name, value.clone());
                }
            }
            response
        }
        Err(_) => axum::http::StatusCode::BAD_GATEWAY.into_response(),
    }
}
