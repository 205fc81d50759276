//! A tiny stand-in HTTP server on `127.0.0.1:0` for black-box client tests.
//!
//! It is not Switchboard: each test mounts the few canned routes it needs, and every
//! request that reaches it is recorded (method, URI, headers) so a test can check
//! what the client put on the wire. The server shuts down when the fixture drops.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use switchboard_sdk::proto::{PROBLEM_JSON, Problem};
use tokio::sync::oneshot;

pub const TOKEN: &str = "sb_test_token_3f9a";

/// One request as the server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
}

pub type Log = Arc<Mutex<Vec<Seen>>>;

pub struct TestServer {
    pub addr: SocketAddr,
    pub log: Log,
    shutdown: Option<oneshot::Sender<()>>,
}

impl TestServer {
    /// Serves `routes` (paths as the real server has them) under `prefix`.
    pub async fn start_at(prefix: &str, routes: Router) -> Self {
        let log = Log::default();
        let app = if prefix.is_empty() {
            routes
        } else {
            Router::new().nest(prefix, routes)
        };
        let app = app.layer(middleware::from_fn_with_state(log.clone(), record));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local addr");
        let (shutdown, stop) = oneshot::channel();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async {
                    let _ = stop.await;
                })
                .await
                .expect("test server");
        });
        Self {
            addr,
            log,
            shutdown: Some(shutdown),
        }
    }

    pub async fn start(routes: Router) -> Self {
        Self::start_at("", routes).await
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn client(&self) -> switchboard_sdk::Client {
        switchboard_sdk::Client::new(&self.url(), TOKEN).expect("client")
    }

    /// A client with a non-default retry policy.
    pub fn client_with(&self, retry: switchboard_sdk::RetryPolicy) -> switchboard_sdk::Client {
        switchboard_sdk::Client::builder()
            .retry(retry)
            .build(&self.url(), TOKEN)
            .expect("client")
    }

    /// The requests seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        self.log.lock().expect("log").clone()
    }

    /// The only request seen.
    pub fn one(&self) -> Seen {
        let seen = self.seen();
        assert_eq!(seen.len(), 1, "exactly one request expected: {seen:?}");
        seen.into_iter().next().expect("one")
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
    }
}

async fn record(State(log): State<Log>, request: Request, next: Next) -> Response {
    log.lock().expect("log").push(Seen {
        method: request.method().clone(),
        uri: request.uri().clone(),
        headers: request.headers().clone(),
    });
    next.run(request).await
}

/// A problem+json response, as Switchboard sends errors.
pub fn problem(problem: Problem) -> Response {
    let status = StatusCode::from_u16(problem.status).expect("status");
    let body = serde_json::to_vec(&problem).expect("json");
    (status, [(header::CONTENT_TYPE, PROBLEM_JSON)], body).into_response()
}

/// The value of a header, as text.
pub fn header<'a>(seen: &'a Seen, name: &str) -> Option<&'a str> {
    seen.headers
        .get(name)
        .map(|v| v.to_str().expect("ascii header"))
}
