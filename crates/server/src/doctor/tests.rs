//! Each check, caused: on real SQLite files here, and on the test PostgreSQL and
//! MariaDB with `--include-ignored` (`cargo xtask test` runs them there).

#[cfg(feature = "mysql")]
use super::database::mysql;
use super::database::{connections, skew};
use super::*;
use crate::clock::ManualClock;
use crate::hooks::Hooks;
use crate::store::Store;
use crate::store::sqlite::SqliteStore;
use sqlx::Connection;
use std::sync::Arc;

/// A loopback address nobody listens on (port 0: any free port).
fn local() -> SocketAddr {
    "127.0.0.1:0".parse().unwrap()
}

struct Scratch {
    dir: tempfile::TempDir,
    config: Config,
}

/// A configuration on a SQLite file in a scratch directory, with a built console
/// directory so that only what a test causes is a problem.
fn scratch() -> Scratch {
    let dir = tempfile::tempdir().unwrap();
    let ui = dir.path().join("ui");
    std::fs::create_dir_all(&ui).unwrap();
    std::fs::write(ui.join("index.html"), "<!doctype html>").unwrap();
    let config = Config {
        database_url: format!("sqlite://{}", dir.path().join("sb.db").display()),
        operator_token_file: Some(dir.path().join("operator-token")),
        ui_dir: Some(ui),
        ..Config::default()
    };
    Scratch { dir, config }
}

impl Scratch {
    fn db(&self) -> PathBuf {
        self.dir.path().join("sb.db")
    }

    async fn serve_once(&self) {
        let store = SqliteStore::open(&self.config.database_url, "full", Hooks::default().store())
            .await
            .unwrap();
        store.close().await;
    }

    async fn raw(&self) -> sqlx::SqliteConnection {
        sqlx::SqliteConnection::connect(&self.config.database_url)
            .await
            .unwrap()
    }

    async fn report(&self) -> Report {
        diagnose(&self.config, local(), &Thresholds::low_disk_ok()).await
    }
}

impl Thresholds {
    /// The defaults, but no disk-space finding on a nearly full test machine.
    fn low_disk_ok() -> Self {
        Self {
            warn_free_bytes: 0,
            error_free_bytes: 0,
            ..Self::default()
        }
    }
}

fn status(report: &Report, check: &str) -> Status {
    report
        .get(check)
        .unwrap_or_else(|| panic!("no {check} finding in {report:#?}"))
        .status
}

#[tokio::test]
async fn a_served_sqlite_file_is_healthy() {
    let s = scratch();
    s.serve_once().await;
    let report = s.report().await;
    assert_eq!(report.status, Status::Ok, "{report:#?}");
    assert_eq!(report.status.exit_code(), 0);
    for check in [
        "database",
        "migrations",
        "sqlite_journal",
        "sqlite_synchronous",
        "sqlite_lock",
        "token_file",
        "disk_space",
        "console",
        "listen",
    ] {
        assert_eq!(status(&report, check), Status::Ok, "{check}: {report:#?}");
    }
    assert!(report.get("tls").is_none(), "loopback needs no TLS");
}

#[tokio::test]
async fn a_missing_file_is_a_warning_and_stays_missing() {
    let s = scratch();
    let report = s.report().await;
    assert_eq!(status(&report, "database"), Status::Warning);
    assert_eq!(report.status.exit_code(), 1);
    assert!(!s.db().exists(), "the doctor creates nothing");
}

#[tokio::test]
async fn the_lock_tells_a_running_server() {
    let s = scratch();
    let store = SqliteStore::open(&s.config.database_url, "full", Hooks::default().store())
        .await
        .unwrap();
    let report = s.report().await;
    let lock = report.get("sqlite_lock").unwrap();
    assert_eq!(lock.status, Status::Ok);
    assert!(lock.message.contains("a server is running"), "{lock:?}");
    store.close().await;
    // The lock goes with the store (a process that exits drops it too).
    drop(store);
    let lock = s.report().await.get("sqlite_lock").unwrap().clone();
    assert!(lock.message.contains("no server"), "{lock:?}");
}

#[tokio::test]
async fn schema_problems_are_found() {
    let s = scratch();
    s.serve_once().await;
    let mut conn = s.raw().await;
    let latest: i64 = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&mut conn)
        .await
        .unwrap();

    // A pending migration: the last one not applied yet.
    let row: (String, Vec<u8>) =
        sqlx::query_as("SELECT description, checksum FROM _sqlx_migrations WHERE version = ?")
            .bind(latest)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    sqlx::query("DELETE FROM _sqlx_migrations WHERE version = ?")
        .bind(latest)
        .execute(&mut conn)
        .await
        .unwrap();
    let found = s.report().await.get("migrations").unwrap().clone();
    assert_eq!(found.status, Status::Warning, "{found:?}");
    assert!(found.message.contains(&latest.to_string()), "{found:?}");

    // A failed one.
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (?, ?, 0, ?, 0)",
    )
    .bind(latest)
    .bind(&row.0)
    .bind(&row.1)
    .execute(&mut conn)
    .await
    .unwrap();
    let found = s.report().await.get("migrations").unwrap().clone();
    assert_eq!(found.status, Status::Error, "{found:?}");
    assert!(found.message.contains("failed part way"), "{found:?}");

    // One from a newer binary.
    sqlx::query("UPDATE _sqlx_migrations SET success = 1 WHERE version = ?")
        .bind(latest)
        .execute(&mut conn)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
         VALUES (?, 'from the future', 1, x'00', 0)",
    )
    .bind(latest + 1_000_000)
    .execute(&mut conn)
    .await
    .unwrap();
    let found = s.report().await.get("migrations").unwrap().clone();
    assert_eq!(found.status, Status::Error, "{found:?}");
    assert!(found.message.contains("newer switchboard"), "{found:?}");
}

#[tokio::test]
async fn a_file_out_of_wal_mode_is_a_warning() {
    let s = scratch();
    s.serve_once().await;
    let mut conn = s.raw().await;
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode = DELETE")
        .fetch_one(&mut conn)
        .await
        .unwrap();
    assert_eq!(mode, "delete");
    conn.close().await.unwrap();
    assert_eq!(status(&s.report().await, "sqlite_journal"), Status::Warning);
}

#[tokio::test]
async fn synchronous_below_full_is_found() {
    let mut s = scratch();
    s.serve_once().await;
    s.config.sqlite_synchronous = "normal".into();
    assert_eq!(
        status(&s.report().await, "sqlite_synchronous"),
        Status::Warning
    );
    s.config.sqlite_synchronous = "off".into();
    let report = s.report().await;
    assert_eq!(status(&report, "sqlite_synchronous"), Status::Error);
    assert_eq!(report.status.exit_code(), 2);
}

#[tokio::test]
async fn a_token_file_others_can_read_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let s = scratch();
    s.serve_once().await;
    let token = s.config.operator_token_file.clone().unwrap();
    std::fs::write(&token, "sb_op_secret").unwrap();
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert_eq!(status(&s.report().await, "token_file"), Status::Ok);
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let found = s.report().await.get("token_file").unwrap().clone();
    assert_eq!(found.status, Status::Error);
    assert!(found.fix.unwrap().contains("chmod 600"));
    assert!(
        !found.message.contains("sb_op_secret"),
        "never the token itself"
    );
}

#[tokio::test]
async fn low_disk_space_is_found() {
    let s = scratch();
    s.serve_once().await;
    let warn = Thresholds {
        warn_free_bytes: u64::MAX,
        error_free_bytes: 0,
        ..Thresholds::default()
    };
    let report = diagnose(&s.config, local(), &warn).await;
    assert_eq!(status(&report, "disk_space"), Status::Warning);
    let error = Thresholds {
        warn_free_bytes: u64::MAX,
        error_free_bytes: u64::MAX,
        ..Thresholds::default()
    };
    let report = diagnose(&s.config, local(), &error).await;
    assert_eq!(status(&report, "disk_space"), Status::Error);
}

#[tokio::test]
async fn the_archive_is_checked() {
    let mut s = scratch();
    s.serve_once().await;
    assert_eq!(status(&s.report().await, "archive"), Status::Ok);
    let archive = s.dir.path().join("archive");
    s.config.archive_dir = Some(archive.clone());
    assert_eq!(status(&s.report().await, "archive"), Status::Warning);
    assert!(!archive.exists(), "doctor creates nothing");
    std::fs::create_dir(&archive).unwrap();
    let report = s.report().await;
    assert_eq!(status(&report, "archive"), Status::Ok);
    assert_eq!(status(&report, "archive_disk_space"), Status::Ok);
    // A file where the directory should be: what a read-only or full disk does to
    // the server's user (the tests run as root, whom permissions do not stop).
    let file = s.dir.path().join("a-file");
    std::fs::write(&file, b"").unwrap();
    s.config.archive_dir = Some(file.join("archive"));
    assert_eq!(status(&s.report().await, "archive"), Status::Warning);
    s.config.archive_dir = Some(file);
    assert_eq!(status(&s.report().await, "archive"), Status::Error);
}

#[tokio::test]
async fn the_console_is_checked() {
    let mut s = scratch();
    s.serve_once().await;
    s.config.ui_dir = Some(s.dir.path().join("nothing-built"));
    assert_eq!(status(&s.report().await, "console"), Status::Error);
    s.config.ui_dir = None;
    let expected = if crate::http::console_embedded() {
        Status::Ok
    } else {
        Status::Warning
    };
    assert_eq!(status(&s.report().await, "console"), expected);
}

#[tokio::test]
async fn the_listen_address_is_checked() {
    let s = scratch();
    s.serve_once().await;
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let report = diagnose(
        &s.config,
        taken.local_addr().unwrap(),
        &Thresholds::low_disk_ok(),
    )
    .await;
    assert_eq!(status(&report, "listen"), Status::Warning);
    let open: SocketAddr = "0.0.0.0:0".parse().unwrap();
    let plain = diagnose(&s.config, open, &Thresholds::low_disk_ok()).await;
    assert_eq!(status(&plain, "listen"), Status::Ok);
    assert_eq!(status(&plain, "tls"), Status::Error);
    let proxied = Listening {
        allow_plain_http: true,
        ..open.into()
    };
    let behind = diagnose(&s.config, proxied, &Thresholds::low_disk_ok()).await;
    assert_eq!(status(&behind, "tls"), Status::Ok);
}

#[tokio::test]
async fn tls_files_are_checked() {
    let s = scratch();
    s.serve_once().await;
    let dir = s.dir.path();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let other = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    std::fs::write(dir.join("other-key.pem"), other.signing_key.serialize_pem()).unwrap();
    let with = |key: &str| Listening {
        tls: Some((dir.join("cert.pem"), dir.join(key))),
        ..SocketAddr::from(([0, 0, 0, 0], 0)).into()
    };
    let good = diagnose(&s.config, with("key.pem"), &Thresholds::low_disk_ok()).await;
    assert_eq!(status(&good, "tls"), Status::Ok, "{good:#?}");
    let mismatched = diagnose(&s.config, with("other-key.pem"), &Thresholds::low_disk_ok()).await;
    let found = mismatched.get("tls").unwrap();
    assert_eq!(found.status, Status::Error, "{found:?}");
    assert!(found.message.contains("does not belong"), "{found:?}");
}

#[tokio::test]
async fn an_unreachable_server_is_an_error() {
    let s = scratch();
    // Port 1: nothing listens there.
    for url in [
        "postgres://u:secret-pw@127.0.0.1:1/db",
        "mysql://u:secret-pw@127.0.0.1:1/db",
        // A password in the query, and one holding a `/` (issue 36).
        "postgres://u@127.0.0.1:1/db?password=secret-pw",
        "mysql://u:secret/pw@127.0.0.1:1/db",
    ] {
        let config = Config {
            database_url: url.into(),
            ..s.config.clone()
        };
        let report = diagnose(&config, local(), &Thresholds::low_disk_ok()).await;
        let found = report.get("database").unwrap();
        assert_eq!(found.status, Status::Error, "{found:?}");
        assert!(
            !found.message.contains("secret-pw") && !found.message.contains("secret/pw"),
            "no password: {found:?}"
        );
    }
}

#[tokio::test]
async fn the_horizons_are_shown() {
    let mut s = scratch();
    s.config.horizons.lease_audit = std::time::Duration::from_secs(12 * 86_400);
    let found = s.report().await.get("horizons").cloned().expect("horizons");
    assert_eq!(found.status, Status::Ok);
    assert!(
        found.message.contains("audit log 365 days")
            && found.message.contains("lease audit 12 days"),
        "{found:?}"
    );
}

#[test]
fn skew_allows_for_the_round_trip() {
    let t = Thresholds::default();
    // 400 ms round trip, the database read in the middle: no skew.
    assert_eq!(skew("c", 1_000, 1_200, 1_400, &t).status, Status::Ok);
    assert_eq!(skew("c", 1_000, 2_000, 1_010, &t).status, Status::Warning);
    assert_eq!(skew("c", 1_000, -9_000, 1_010, &t).status, Status::Error);
}

#[test]
fn connections_leave_room_for_a_second_instance() {
    assert_eq!(connections(100, 3, 16).status, Status::Ok);
    assert_eq!(connections(100, 3, 60).status, Status::Warning);
    assert_eq!(connections(100, 3, 1000).status, Status::Error);
}

/// What both servers share: healthy after `open`, then a pool too big and a clock
/// 30 s off.
#[cfg(any(feature = "postgres", feature = "mysql"))]
async fn server_checks(url: &str, open: impl AsyncFnOnce()) {
    let s = scratch();
    let config = Config {
        database_url: url.into(),
        ..s.config.clone()
    };
    let report = diagnose(&config, local(), &Thresholds::low_disk_ok()).await;
    assert_eq!(
        status(&report, "migrations"),
        Status::Warning,
        "{report:#?}"
    );
    open().await;
    let report = diagnose(&config, local(), &Thresholds::low_disk_ok()).await;
    assert_eq!(report.status, Status::Ok, "{report:#?}");

    let big = Config {
        database_max_connections: 1000,
        ..config.clone()
    };
    let report = diagnose(&big, local(), &Thresholds::low_disk_ok()).await;
    assert_eq!(status(&report, "connections"), Status::Error, "{report:#?}");

    let clock = ManualClock::new();
    clock.advance_secs(30);
    let skewed = Config {
        clock: Arc::new(clock),
        ..config.clone()
    };
    let report = diagnose(&skewed, local(), &Thresholds::low_disk_ok()).await;
    let found = report.get("clock_skew").unwrap();
    assert_eq!(found.status, Status::Error, "{found:?}");
    assert!(found.message.contains("ahead of"), "{found:?}");
}

#[tokio::test]
#[ignore = "needs PostgreSQL: cargo xtask test runs it there with --include-ignored"]
#[cfg(feature = "postgres")]
async fn postgres_checks() {
    use crate::store::postgres::PgStore;
    use crate::store::testing::ServerDb;
    let db = ServerDb::<sqlx::Postgres>::create("SWITCHBOARD_TEST_POSTGRES", "doctor").await;
    server_checks(&db.url, async || {
        PgStore::open(&db.url, 4, Hooks::default().store())
            .await
            .unwrap()
            .close()
            .await
    })
    .await;

    let mut conn = sqlx::PgConnection::connect(&db.url).await.unwrap();
    sqlx::query("ALTER TABLE events SET (autovacuum_enabled = false)")
        .execute(&mut conn)
        .await
        .unwrap();
    conn.close().await.unwrap();
    let s = scratch();
    let config = Config {
        database_url: db.url.clone(),
        ..s.config.clone()
    };
    let report = diagnose(&config, local(), &Thresholds::low_disk_ok()).await;
    let found = report.get("autovacuum").unwrap();
    assert_eq!(found.status, Status::Warning, "{found:?}");
    assert!(found.message.contains("events"), "{found:?}");
    db.drop(" WITH (FORCE)").await;
}

#[tokio::test]
#[ignore = "needs MariaDB or MySQL: cargo xtask test runs it there with --include-ignored"]
#[cfg(feature = "mysql")]
async fn mysql_checks() {
    use crate::store::mysql::MySqlStore;
    use crate::store::testing::ServerDb;
    let db = ServerDb::<sqlx::MySql>::create("SWITCHBOARD_TEST_MYSQL", "doctor").await;
    server_checks(&db.url, async || {
        MySqlStore::open(&db.url, 4, Hooks::default().store())
            .await
            .unwrap()
            .close()
            .await
    })
    .await;

    // Statement-based binary logging, on the doctor's own session.
    let mut conn = sqlx::MySqlConnection::connect(&db.url).await.unwrap();
    sqlx::query("SET SESSION binlog_format = 'STATEMENT'")
        .execute(&mut conn)
        .await
        .unwrap();
    let s = scratch();
    let found = mysql(
        &mut conn,
        &s.config,
        &crate::clock::SystemClock,
        &Thresholds::low_disk_ok(),
    )
    .await;
    let binlog = found.iter().find(|f| f.check == "binlog_format").unwrap();
    assert_eq!(binlog.status, Status::Error, "{binlog:?}");
    conn.close().await.unwrap();
    db.drop("").await;
}

#[tokio::test]
async fn each_tenants_signature_policy_and_signing_agents_are_reported() {
    use crate::store::{
        AuditNote, DirectoryStore, NewRequestKey, RequestKeyStore, SignaturePolicy,
    };
    let s = scratch();
    let store = SqliteStore::open(&s.config.database_url, "full", Hooks::default().store())
        .await
        .unwrap();
    let tenant = store.ensure_tenant("default", 1).await.unwrap();
    let scopes = ["agent:{agent_id}:inbox".to_owned()];
    store
        .create_agent(tenant, "signs", &[1; 32], &scopes, None, 1)
        .await
        .unwrap();
    store
        .create_agent(tenant, "plain", &[2; 32], &scopes, None, 1)
        .await
        .unwrap();
    let key = NewRequestKey {
        jkt: "k",
        public_key: &[7; 32],
        binds_parent: true,
    };
    store
        .bind_request_key(tenant, &[1; 32], &key, None, 2)
        .await
        .unwrap();
    let report = s.report().await;
    let finding = report.get("signatures").expect("a signatures finding");
    assert_eq!(finding.status, Status::Ok, "{finding:?}");
    assert!(
        finding
            .message
            .contains("default: optional, 1 of 2 agents sign"),
        "{finding:?}"
    );

    // Off is a warning that says how to turn it back on.
    let note = AuditNote {
        actor: "operator".into(),
        target: "signatures".into(),
        detail: None,
    };
    store
        .set_signature_policy(tenant, SignaturePolicy::Off, &note, 3)
        .await
        .unwrap();
    store.close().await;
    let report = s.report().await;
    let finding = report.get("signatures").expect("a signatures finding");
    assert_eq!(finding.status, Status::Warning, "{finding:?}");
    assert!(
        finding
            .fix
            .as_deref()
            .unwrap_or_default()
            .contains("PUT /api/v1/ops/signatures"),
        "{finding:?}"
    );
}
