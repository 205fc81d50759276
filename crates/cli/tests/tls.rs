//! `switchboard serve` over TLS as a user runs it: `--tls-cert`/`--tls-key`, TLS 1.3
//! only, a certificate renewed in place and reloaded on SIGHUP (a broken one leaves
//! the old in use), the refusal of plain HTTP on a non-loopback listener, and the
//! CLI's `--ca-file` for a server a private CA signed.

mod common;

use common::{Serve, signal, sqlite_url};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio_rustls::rustls;

/// A CA, and the PEM of a certificate (and key) it issued for 127.0.0.1.
struct Ca {
    pem: String,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let key = KeyPair::generate().unwrap();
        let pem = params.self_signed(&key).unwrap().pem();
        Self {
            pem,
            issuer: Issuer::new(params, key),
        }
    }

    /// Writes a leaf for localhost and 127.0.0.1 to `dir/cert.pem` and `dir/key.pem`.
    fn issue_into(&self, dir: &Path) {
        let leaf = CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
        let key = KeyPair::generate().unwrap();
        let cert = leaf.signed_by(&key, &self.issuer).unwrap();
        // Written beside, then renamed: a reload never reads half a file.
        for (name, text) in [("cert.pem", cert.pem()), ("key.pem", key.serialize_pem())] {
            let tmp = dir.join(format!("{name}.tmp"));
            std::fs::write(&tmp, text).unwrap();
            std::fs::rename(&tmp, dir.join(name)).unwrap();
        }
    }
}

fn serve_tls(dir: &Path) -> Serve {
    Serve::start(
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
            .arg(sqlite_url(dir))
            .arg("--operator-token-file")
            .arg(dir.join("operator-token"))
            .arg("--tls-cert")
            .arg(dir.join("cert.pem"))
            .arg("--tls-key")
            .arg(dir.join("key.pem"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    )
}

/// A handshake with 127.0.0.1 at `url`'s port, trusting `ca` only, offering
/// `versions`: the negotiated version, or the error.
async fn handshake(
    url: &str,
    ca: &str,
    versions: &[&'static rustls::SupportedProtocolVersion],
) -> Result<rustls::ProtocolVersion, String> {
    let port = url.rsplit(':').next().unwrap().parse::<u16>().unwrap();
    let mut roots = rustls::RootCertStore::empty();
    use rustls::pki_types::pem::PemObject;
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(ca.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::aws_lc_rs::default_provider(),
    ))
    .with_protocol_versions(versions)
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .map_err(|e| e.to_string())?;
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").unwrap();
    let tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .map_err(|e| e.to_string())?;
    Ok(tls.get_ref().1.protocol_version().unwrap())
}

const TLS13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

#[tokio::test]
async fn serves_tls13_and_reloads_the_certificate_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let first = Ca::new("first CA");
    first.issue_into(dir.path());
    let server = serve_tls(dir.path());
    assert!(
        server.url.starts_with("https://127.0.0.1:"),
        "{}",
        server.url
    );

    // TLS 1.3, and nothing older.
    assert_eq!(
        handshake(&server.url, &first.pem, TLS13).await,
        Ok(rustls::ProtocolVersion::TLSv1_3)
    );
    let tls12 = handshake(&server.url, &first.pem, &[&rustls::version::TLS12]).await;
    assert!(tls12.is_err(), "TLS 1.2 is refused: {tls12:?}");

    // The API over HTTPS, for a client that trusts the CA.
    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(first.pem.as_bytes()).unwrap())
        .build()
        .unwrap();
    let ready = client
        .get(format!("{}/readyz", server.url))
        .send()
        .await
        .unwrap();
    assert_eq!(ready.status(), 200);

    // A renewed certificate (another CA, to tell them apart), then SIGHUP.
    let second = Ca::new("second CA");
    second.issue_into(dir.path());
    assert!(
        handshake(&server.url, &second.pem, TLS13).await.is_err(),
        "no reload before the signal"
    );
    signal(server.child.id(), "-HUP");
    let deadline = Instant::now() + Duration::from_secs(10);
    while handshake(&server.url, &second.pem, TLS13).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the new certificate never served"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(handshake(&server.url, &first.pem, TLS13).await.is_err());

    // A broken key: the reload fails and the certificate in use stays.
    std::fs::write(dir.path().join("key.pem"), "not a key").unwrap();
    signal(server.child.id(), "-HUP");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        handshake(&server.url, &second.pem, TLS13).await,
        Ok(rustls::ProtocolVersion::TLSv1_3)
    );
}

#[test]
fn plain_http_on_a_public_address_is_refused_unless_a_proxy_terminates_tls() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "0.0.0.0:0", "--database-url"])
        .arg(sqlite_url(dir.path()))
        .arg("--operator-token-file")
        .arg(dir.path().join("operator-token"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(out.stdout.is_empty(), "no ready line");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to serve plain HTTP"), "{stderr}");
    assert!(stderr.contains("--allow-plain-http"), "{stderr}");

    let proxied = Serve::start(
        Command::new(env!("CARGO_BIN_EXE_switchboard"))
            .args(["serve", "--listen", "0.0.0.0:0", "--allow-plain-http"])
            .arg("--database-url")
            .arg(sqlite_url(dir.path()))
            .arg("--operator-token-file")
            .arg(dir.path().join("operator-token"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null()),
    );
    assert!(
        proxied.url.starts_with("http://0.0.0.0:"),
        "{}",
        proxied.url
    );
}

#[tokio::test]
async fn the_cli_trusts_a_private_ca_with_ca_file() {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new("private CA");
    ca.issue_into(dir.path());
    std::fs::write(dir.path().join("ca.pem"), &ca.pem).unwrap();
    let server = serve_tls(dir.path());
    let operator = std::fs::read_to_string(dir.path().join("operator-token")).unwrap();

    // An agent, made through the SDK with the CA.
    let sdk = switchboard_sdk::Client::builder()
        .ca_pem(ca.pem.as_bytes())
        .unwrap()
        .build(&server.url, operator.trim())
        .unwrap();
    let agent = sdk
        .create_agent(&switchboard_sdk::proto::CreateAgent {
            name: "tls-agent".into(),
        })
        .await
        .unwrap();

    let ca = dir.path().join("ca.pem");
    let mut callbacks = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    callbacks
        .args(["agent", "callback", "list", "--name", "tls-agent"])
        .env("SWITCHBOARD_SERVER", &server.url)
        .env("SWITCHBOARD_TOKEN", &agent.token)
        .env("SWITCHBOARD_STATE", dir.path().join("agent.db"));
    trusts_only_with(&mut callbacks, &ca);

    // `names import` (an operator's command) takes it too.
    let csv = dir.path().join("names.csv");
    std::fs::write(&csv, "name,created_at\nlegacy-one,2024-01-01T00:00:00Z\n").unwrap();
    let mut import = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    import
        .args(["names", "import", "--dry-run", "--server", &server.url])
        .arg("--token-file")
        .arg(dir.path().join("operator-token"))
        .arg(&csv)
        .env_remove("SWITCHBOARD_TOKEN");
    trusts_only_with(&mut import, &ca);
}

/// `command` fails on the server's unknown CA, saying so, and succeeds with
/// `--ca-file ca`.
fn trusts_only_with(command: &mut Command, ca: &Path) {
    command.env_remove("SWITCHBOARD_CA_FILE");
    let without = command.output().unwrap();
    assert!(!without.status.success(), "an unknown CA is not trusted");
    let said = String::from_utf8_lossy(&without.stderr);
    assert!(said.to_lowercase().contains("certificate"), "{said}");
    let with = command.arg("--ca-file").arg(ca).output().unwrap();
    assert!(
        with.status.success(),
        "{}",
        String::from_utf8_lossy(&with.stderr)
    );
}
