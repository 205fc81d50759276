//! TLS for the listener: `--tls-cert` and `--tls-key` (PEM), TLS 1.3 only (rustls,
//! the aws-lc-rs provider reqwest uses too), the certificate reloaded on demand
//! (`switchboard serve` does it on SIGHUP) without dropping a connection.
//!
//! Handshakes run in tasks of their own, so a client that stalls in one never holds
//! up the next connection; a handshake has [`HANDSHAKE_TIMEOUT`] to finish.

use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::rustls::server::{ClientHello, ResolvesServerCert};
use tokio_rustls::rustls::sign::CertifiedKey;
use tokio_rustls::server::TlsStream;

/// How long a client has to complete its handshake.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate and key files, and what was last loaded from them.
#[derive(Debug)]
pub struct Tls {
    cert: PathBuf,
    key: PathBuf,
    resolver: Arc<Current>,
    provider: Arc<rustls::crypto::CryptoProvider>,
}

#[derive(Debug)]
struct Current(RwLock<Arc<CertifiedKey>>);

impl ResolvesServerCert for Current {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.read().unwrap_or_else(|e| e.into_inner()).clone())
    }
}

impl Tls {
    /// Loads `cert` (a PEM chain, leaf first) and `key` (a PEM private key).
    pub fn load(cert: &Path, key: &Path) -> Result<Arc<Self>, String> {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let loaded = certified_key(cert, key, &provider)?;
        Ok(Arc::new(Self {
            cert: cert.to_owned(),
            key: key.to_owned(),
            resolver: Arc::new(Current(RwLock::new(Arc::new(loaded)))),
            provider,
        }))
    }

    /// Reads the files again; new handshakes use what they hold. On an error the
    /// certificate in use stays, and the error says why.
    pub fn reload(&self) -> Result<(), String> {
        let loaded = certified_key(&self.cert, &self.key, &self.provider)?;
        *self.resolver.0.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(loaded);
        Ok(())
    }

    fn acceptor(&self) -> Result<TlsAcceptor, String> {
        let mut config = rustls::ServerConfig::builder_with_provider(self.provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13])
            .map_err(|e| format!("TLS 1.3 with this provider: {e}"))?
            .with_no_client_auth()
            .with_cert_resolver(self.resolver.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// Wraps `listener`: what it accepts comes out after a completed handshake.
    pub fn listen(&self, listener: TcpListener) -> Result<TlsListener, String> {
        let local = listener
            .local_addr()
            .map_err(|e| format!("the listener's address: {e}"))?;
        let acceptor = self.acceptor()?;
        let (tx, rx) = mpsc::channel(64);
        let task = tokio::spawn(accept_loop(listener, acceptor, tx));
        Ok(TlsListener {
            rx,
            local,
            task: task.abort_handle(),
        })
    }
}

fn certified_key(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<CertifiedKey, String> {
    let chain: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("reading the certificate {}: {e}", cert.display()))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("the certificate {} is not PEM: {e}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "{} holds no certificate (expected PEM `BEGIN CERTIFICATE` blocks)",
            cert.display()
        ));
    }
    let key_der = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| format!("reading the private key {}: {e}", key.display()))?;
    let signing = provider
        .key_provider
        .load_private_key(key_der)
        .map_err(|e| format!("the private key {} cannot sign: {e}", key.display()))?;
    let certified = CertifiedKey::new(chain, signing);
    certified.keys_match().map_err(|e| {
        format!(
            "the key {} does not belong to the certificate {}: {e}",
            key.display(),
            cert.display()
        )
    })?;
    Ok(certified)
}

async fn accept_loop(
    listener: TcpListener,
    acceptor: TlsAcceptor,
    tx: mpsc::Sender<(TlsStream<TcpStream>, SocketAddr)>,
) {
    loop {
        let (tcp, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: as axum::serve does, wait.
                tracing::warn!(error = %e, "accepting a connection failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        let (acceptor, tx) = (acceptor.clone(), tx.clone());
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => {
                    let _ = tx.send((tls, peer)).await;
                }
                // A failed handshake is the client's business (a scanner, a plain
                // HTTP request): debug, not warn.
                Ok(Err(e)) => tracing::debug!(%peer, error = %e, "TLS handshake failed"),
                Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
            }
        });
    }
}

/// A listener whose connections have completed a TLS handshake; for `axum::serve`.
#[derive(Debug)]
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
    task: tokio::task::AbortHandle,
}

impl Drop for TlsListener {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(accepted) => accepted,
            // The accept loop only ends when aborted, with the listener.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}
