//! A real HTTPS webhook receiver for tests: its own CA (made at start with rcgen,
//! written to a PEM file for `--webhook-ca-file`), a certificate for `localhost`
//! and 127.0.0.1, and axum over tokio-rustls. It answers challenges with the HMAC
//! of its secret (or wrongly, when told), answers deliveries as scripted, and
//! records every request as it arrived (method, authority, path, headers, body
//! bytes) for the test to verify.

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use switchboard_webhook::Secret;
use tokio_rustls::rustls;

/// How the receiver answers a delivery (or a test event).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// 204 No Content.
    Ok,
    Status(u16),
    /// The status with `Retry-After: <seconds>`.
    RetryAfter(u16, u64),
    /// Holds the request this long before answering 204.
    Hang(Duration),
}

/// How the receiver answers a challenge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChallengeAnswer {
    Right,
    /// A response computed with another secret.
    Wrong,
    Status(u16),
}

/// One request as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    pub method: String,
    /// The `Host` header.
    pub authority: String,
    pub path: String,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
    /// The body's `type`: `callback.challenge`, `inbox.event`, `callback.test`.
    pub kind: String,
    pub json: serde_json::Value,
}

#[derive(Default)]
struct Script {
    challenge: Option<ChallengeAnswer>,
    deliveries: VecDeque<Answer>,
    default: Option<Answer>,
    received: Vec<Received>,
}

#[derive(Clone)]
struct Shared {
    secret: Secret,
    script: Arc<Mutex<Script>>,
    arrived: Arc<tokio::sync::Notify>,
}

pub struct Receiver {
    /// `https://localhost:<port>/hooks/agent`.
    pub url: String,
    /// The CA that issued the receiver's certificate, as a PEM file.
    pub ca_file: PathBuf,
    pub secret: Secret,
    shared: Shared,
    stop: tokio_util::sync::CancellationToken,
    _dir: tempfile::TempDir,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

impl Receiver {
    /// Starts a receiver on 127.0.0.1:0 with a fresh secret.
    pub async fn start() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let (ca_pem, leaf_der, key_der) = certificates();
        let ca_file = dir.path().join("webhook-ca.pem");
        std::fs::write(&ca_file, ca_pem).expect("write the CA file");
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .expect("TLS versions")
            .with_no_client_auth()
            .with_single_cert(vec![leaf_der], key_der)
            .expect("certificate");
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let shared = Shared {
            secret: Secret::generate(),
            script: Arc::default(),
            arrived: Arc::default(),
        };
        let app = axum::Router::new()
            .fallback(handle)
            .with_state(shared.clone());
        let stop = tokio_util::sync::CancellationToken::new();
        tokio::spawn({
            let stop = stop.clone();
            async move {
                loop {
                    let stream = tokio::select! {
                        _ = stop.cancelled() => break,
                        accepted = listener.accept() => match accepted {
                            Ok((stream, _)) => stream,
                            Err(_) => continue,
                        },
                    };
                    let (acceptor, app) = (acceptor.clone(), app.clone());
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = hyper_util::service::TowerToHyperService::new(app);
                        let _ = hyper_util::server::conn::auto::Builder::new(
                            hyper_util::rt::TokioExecutor::new(),
                        )
                        .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                        .await;
                    });
                }
            }
        });
        Self {
            url: format!("https://localhost:{port}/hooks/agent"),
            ca_file,
            secret: shared.secret.clone(),
            shared,
            stop,
            _dir: dir,
        }
    }

    /// The secret as registration sends it.
    pub fn whsec(&self) -> String {
        self.secret.to_whsec()
    }

    /// How the next challenges are answered (default: right).
    pub fn challenge(&self, answer: ChallengeAnswer) {
        self.script().challenge = Some(answer);
    }

    /// Answers the next deliveries with these, in order, then with the default.
    pub fn then(&self, answers: impl IntoIterator<Item = Answer>) {
        self.script().deliveries.extend(answers);
    }

    /// How deliveries are answered once the scripted ones are used (default 204).
    pub fn always(&self, answer: Answer) {
        self.script().default = Some(answer);
    }

    /// Every request so far, in arrival order.
    pub fn received(&self) -> Vec<Received> {
        self.script().received.clone()
    }

    /// The requests of one `type`.
    pub fn of_kind(&self, kind: &str) -> Vec<Received> {
        self.received()
            .into_iter()
            .filter(|r| r.kind == kind)
            .collect()
    }

    /// Waits (at most `timeout`) until `n` requests of `kind` arrived; returns them.
    pub async fn wait_for(&self, kind: &str, n: usize, timeout: Duration) -> Vec<Received> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let arrived = self.shared.arrived.notified();
            let got = self.of_kind(kind);
            if got.len() >= n {
                return got;
            }
            if tokio::time::timeout_at(deadline, arrived).await.is_err() {
                panic!(
                    "{} of {n} {kind} requests arrived within {timeout:?}",
                    self.of_kind(kind).len()
                );
            }
        }
    }

    fn script(&self) -> std::sync::MutexGuard<'_, Script> {
        self.shared.script.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn handle(
    State(shared): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let json: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
    let kind = json["type"].as_str().unwrap_or_default().to_owned();
    let authority = headers
        .get(axum::http::header::HOST)
        .and_then(|h| h.to_str().ok())
        .map(str::to_owned)
        .or_else(|| uri.authority().map(|a| a.to_string()))
        .unwrap_or_default();
    let received = Received {
        method: method.to_string(),
        authority,
        path: uri.path().to_owned(),
        headers,
        body: body.to_vec(),
        kind: kind.clone(),
        json: json.clone(),
    };
    let answer = {
        let mut script = shared.script.lock().unwrap_or_else(|e| e.into_inner());
        script.received.push(received);
        if kind == "callback.challenge" {
            Err(script.challenge.unwrap_or(ChallengeAnswer::Right))
        } else {
            Ok(script
                .deliveries
                .pop_front()
                .or_else(|| script.default.clone())
                .unwrap_or(Answer::Ok))
        }
    };
    shared.arrived.notify_waiters();
    match answer {
        Err(ChallengeAnswer::Right) | Err(ChallengeAnswer::Wrong) => {
            let challenge = json["challenge"].as_str().unwrap_or_default();
            let secret = if answer == Err(ChallengeAnswer::Right) {
                shared.secret.clone()
            } else {
                Secret::generate()
            };
            let response = switchboard_webhook::challenge_response(&secret, challenge);
            axum::Json(serde_json::json!({ "challenge_response": response })).into_response()
        }
        Err(ChallengeAnswer::Status(s)) => status(s).into_response(),
        Ok(Answer::Ok) => StatusCode::NO_CONTENT.into_response(),
        Ok(Answer::Status(s)) => status(s).into_response(),
        Ok(Answer::RetryAfter(s, secs)) => {
            (status(s), [("retry-after", secs.to_string())]).into_response()
        }
        Ok(Answer::Hang(d)) => {
            tokio::time::sleep(d).await;
            StatusCode::NO_CONTENT.into_response()
        }
    }
}

fn status(s: u16) -> StatusCode {
    StatusCode::from_u16(s).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR)
}

/// A CA (PEM) and a certificate it issued for `localhost` and 127.0.0.1 (DER, and
/// its key).
fn certificates() -> (
    String,
    rustls::pki_types::CertificateDer<'static>,
    rustls::pki_types::PrivateKeyDer<'static>,
) {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
    let mut ca = CertificateParams::new(Vec::<String>::new()).expect("CA params");
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "Switchboard test receiver CA");
    let ca_key = KeyPair::generate().expect("CA key");
    let ca_cert = ca.self_signed(&ca_key).expect("CA certificate");
    let issuer = Issuer::new(ca, ca_key);
    let leaf = CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()])
        .expect("leaf params");
    let leaf_key = KeyPair::generate().expect("leaf key");
    let leaf_cert = leaf
        .signed_by(&leaf_key, &issuer)
        .expect("leaf certificate");
    (
        ca_cert.pem(),
        leaf_cert.der().clone(),
        rustls::pki_types::PrivateKeyDer::try_from(leaf_key.serialize_der()).expect("leaf key DER"),
    )
}
