//! A TLS server for the redirect test, with its test CA and certificate.

use std::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A TLS server on 127.0.0.1 (certificate for `rebind.test`, issued by [`CA_PEM`])
/// that answers every request with a redirect to itself, counting the requests.
pub(super) async fn redirecting_server() -> (u16, Arc<AtomicUsize>) {
    let certs = CertificateDer::pem_slice_iter(LEAF_PEM.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_slice(LEAF_KEY_PEM.as_bytes()).unwrap();
    let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(AtomicUsize::new(0));
    let counter = requests.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            let counter = counter.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                if read_request(&mut tls).await.is_none() {
                    return;
                }
                counter.fetch_add(1, Ordering::SeqCst);
                let response = format!(
                    "HTTP/1.1 307 Temporary Redirect\r\nLocation: \
                     https://rebind.test:{port}/elsewhere\r\nContent-Length: 0\r\n\
                     Connection: close\r\n\r\n"
                );
                let _ = tls.write_all(response.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (port, requests)
}

/// Reads one HTTP/1.1 request with a `Content-Length` body (or none).
async fn read_request(stream: &mut (impl AsyncReadExt + Unpin)) -> Option<()> {
    let mut buf = Vec::new();
    let mut chunk = [0; 4096];
    let head_end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("content-length:"))
        .map_or(0, |value| value.trim().parse().unwrap_or(0));
    while buf.len() < head_end + length {
        let n = stream.read(&mut chunk).await.ok().filter(|&n| n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    Some(())
}

/// A test CA (P-256, valid 2000–2126) and a server certificate it issued for
/// `rebind.test`, `localhost` and 127.0.0.1, made with `openssl req`/`openssl ca`.
pub(super) const CA_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBfzCCASWgAwIBAgIBAjAKBggqhkjOPQQDAjAmMSQwIgYDVQQDDBtTd2l0Y2hi
b2FyZCB3ZWJob29rIHRlc3QgQ0EwIBcNMDAwMTAxMDAwMDAwWhgPMjEyNjAxMDEw
MDAwMDBaMCYxJDAiBgNVBAMMG1N3aXRjaGJvYXJkIHdlYmhvb2sgdGVzdCBDQTBZ
MBMGByqGSM49AgEGCCqGSM49AwEHA0IABDKvvnusLndkStZ1ROqc+0ZA64s19uWn
Ss/moDC/TpwSN4IkmuLX/6hOniZVNSWvvDH7syRx6qJB8+cr6gnGRL2jQjBAMA8G
A1UdEwEB/wQFMAMBAf8wDgYDVR0PAQH/BAQDAgEGMB0GA1UdDgQWBBQAXiPyDEe/
v4mnZp5DLsRUCMNHFjAKBggqhkjOPQQDAgNIADBFAiBzcMDbLf2iQiFEPDQVOZNd
aHDKPTqZvXKxT3AYuXUepwIhAJOlFuHvZVDdaMVgakfHdLzm+D403KXP9ffePIOy
hTYj
-----END CERTIFICATE-----
";

const LEAF_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBzTCCAXOgAwIBAgIBATAKBggqhkjOPQQDAjAmMSQwIgYDVQQDDBtTd2l0Y2hi
b2FyZCB3ZWJob29rIHRlc3QgQ0EwIBcNMDAwMTAxMDAwMDAwWhgPMjEyNjAxMDEw
MDAwMDBaMBYxFDASBgNVBAMMC3JlYmluZC50ZXN0MFkwEwYHKoZIzj0CAQYIKoZI
zj0DAQcDQgAEz6OKHGpxQprBhrt/gIfHDzn2UgWSQv/X66Vgq0oMbXSft0lxbQg4
9gp4WpPfMeOlCmv9cmuOrRAPx8gd/DKau6OBnzCBnDAMBgNVHRMBAf8EAjAAMA4G
A1UdDwEB/wQEAwIHgDATBgNVHSUEDDAKBggrBgEFBQcDATAnBgNVHREEIDAeggty
ZWJpbmQudGVzdIIJbG9jYWxob3N0hwR/AAABMB0GA1UdDgQWBBQmsW6IsxEEe0M0
0xXUaXcT0m0/CzAfBgNVHSMEGDAWgBQAXiPyDEe/v4mnZp5DLsRUCMNHFjAKBggq
hkjOPQQDAgNIADBFAiEAkMZ7PjHCWco5dAfC+aTTBFNgdBucZxqqbFjiefu0AogC
IFB1YG7uGLv66EtPEc1HwZKpAziPMasxcJLPcpuD4z+7
-----END CERTIFICATE-----
";

const LEAF_KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgQlRVoHc6uGMAN5zW
NgmSu/o3RCat5m8VliQYCyuJBMGhRANCAATPo4ocanFCmsGGu3+Ah8cPOfZSBZJC
/9frpWCrSgxtdJ+3SXFtCDj2Cnhak98x46UKa/1ya46tEA/HyB38Mpq7
-----END PRIVATE KEY-----
";
