//! The MariaDB server the MySQL backend's tests run against.
//!
//! `SWITCHBOARD_TEST_MYSQL` (an admin URL) picks a server you run yourself (MariaDB
//! or MySQL). Otherwise Debian's MariaDB is used: found on 127.0.0.1:3306, or, as
//! root, started in the background (a container has no systemd) with binary logging
//! on in ROW format, the setting the store checks at start. A `switchboard` user
//! (password `switchboard`) may create and drop the `sb_t_…` databases each test
//! makes; the ones a previous run left are dropped.
//!
//! Locally a MariaDB that cannot be had is a skip; in CI (`CI` set) it is a failure.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use crate::cmd;
use crate::prereqs::is_root;

pub(crate) const URL_ENV: &str = "SWITCHBOARD_TEST_MYSQL";
const USER: &str = "switchboard";
const PORT: &str = "3306";
const SERVER: &str = "/usr/sbin/mariadbd";
const DATADIR: &str = "/var/lib/mysql";
const RUN_DIR: &str = "/run/mysqld";
const SOCKET: &str = "/run/mysqld/mysqld.sock";
/// How long a server that was just started may take to answer.
const START_TIMEOUT: Duration = Duration::from_secs(60);

/// The server the tests use.
pub(crate) struct MariaDb {
    /// An admin URL: its user may create and drop `sb_t_…` databases. Tests replace
    /// the database after the last `/`.
    pub(crate) url: String,
    /// The command that stops, starts and restarts it (`…/xtask mariadb`, followed by
    /// the action), when it is the server this machine runs for the tests.
    pub(crate) ctl: Option<String>,
}

/// Whether this runs in CI, where a missing database is a failure, not a skip.
pub(crate) fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "false" && v != "0")
}

/// Finds or starts MariaDB. `None`: there is none here and this is not CI (the
/// caller reports the skip).
pub(crate) fn ensure() -> Result<Option<MariaDb>> {
    match find_or_start() {
        Ok(db) => Ok(Some(db)),
        Err(e) if !in_ci() => {
            eprintln!("mariadb: SKIPPED, {e:#} (in CI this fails)");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}

fn find_or_start() -> Result<MariaDb> {
    if let Ok(url) = std::env::var(URL_ENV)
        && !url.is_empty()
    {
        eprintln!("mariadb: using {URL_ENV}");
        let client = Client::from_url(&url)?;
        client
            .sql("SELECT 1")
            .context("cannot log in with SWITCHBOARD_TEST_MYSQL")?;
        drop_test_databases(&url)?;
        return Ok(MariaDb { url, ctl: None });
    }
    if cmd::stdout(Command::new("mariadb").arg("--version")).is_none() {
        bail!(
            "no MariaDB: install the Debian packages `mariadb-server mariadb-client` (cargo \
             xtask test does, as root), or set {URL_ENV} to an admin URL of a server you run"
        );
    }
    if !alive() {
        start_server()?;
    }
    let url = format!("mysql://{USER}:{USER}@127.0.0.1:{PORT}/information_schema");
    let client = Client::from_url(&url)?;
    if client.sql("SELECT 1").is_err() {
        if !is_root() {
            bail!(
                "cannot log in to MariaDB as {USER}; create the user (as root) with\n  sudo \
                 mariadb -e \"{}\"\nor set {URL_ENV}",
                create_user_sql().replace('`', "\\`")
            );
        }
        eprintln!("mariadb: creating the {USER} user");
        root()
            .sql(&create_user_sql())
            .context("creating the test user as root (through the server's socket)")?;
        client
            .sql("SELECT 1")
            .context("logging in as the new test user")?;
    }
    drop_test_databases(&url)?;
    let version = client.sql("SELECT VERSION()")?;
    let binlog = client.sql("SELECT @@log_bin, @@binlog_format")?;
    eprintln!(
        "mariadb: {} on port {PORT} (log_bin, binlog_format: {})",
        version.trim(),
        binlog.trim().replace('\t', ", ")
    );
    let ctl = is_root()
        .then(std::env::current_exe)
        .and_then(Result::ok)
        .map(|exe| format!("{} mariadb", exe.display()));
    Ok(MariaDb { url, ctl })
}

/// The test user on both ways a local client comes in, with every right on the
/// `sb_t_…` databases (and so to create and drop them), and the right to switch its
/// own session's binlog format (the store's binlog check is tested that way).
fn create_user_sql() -> String {
    let users = format!("'{USER}'@'localhost', '{USER}'@'127.0.0.1'");
    format!(
        "CREATE USER IF NOT EXISTS '{USER}'@'localhost' IDENTIFIED BY '{USER}'; \
         CREATE USER IF NOT EXISTS '{USER}'@'127.0.0.1' IDENTIFIED BY '{USER}'; \
         GRANT ALL PRIVILEGES ON `sb\\_t\\_%`.* TO {users}; \
         GRANT BINLOG ADMIN ON *.* TO {users};"
    )
}

/// Whether a server answers on the test port (`mariadb-admin ping` succeeds even
/// when it refuses the login).
fn alive() -> bool {
    Command::new("mariadb-admin")
        .args(["--protocol=tcp", "-h", "127.0.0.1", "-P", PORT, "ping"])
        .args(["--connect-timeout=2"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Starts Debian's MariaDB in the background: binary logging on, ROW format,
/// listening on 127.0.0.1 only. It outlives this process (its own process group),
/// as the PostgreSQL cluster does.
fn start_server() -> Result<()> {
    if !is_root() {
        bail!("MariaDB is not running on port {PORT}, and starting it needs root");
    }
    if !PathBuf::from(SERVER).is_file() {
        bail!("{SERVER} is missing: install the Debian package mariadb-server");
    }
    if !PathBuf::from(DATADIR).join("mysql").is_dir() {
        eprintln!("mariadb: initialising {DATADIR}");
        cmd::run(Command::new("mariadb-install-db").args([
            "--user=mysql",
            &format!("--datadir={DATADIR}"),
            "--auth-root-authentication-method=socket",
            "--skip-test-db",
        ]))?;
    }
    // /run is a tmpfs: the socket's directory is gone after a reboot.
    std::fs::create_dir_all(RUN_DIR).with_context(|| format!("creating {RUN_DIR}"))?;
    cmd::run(Command::new("chown").args(["mysql:", RUN_DIR]))?;
    let log_path = cmd::target_dir().join("mariadb.log");
    std::fs::create_dir_all(cmd::target_dir())?;
    let log = std::fs::File::create(&log_path)
        .with_context(|| format!("creating {}", log_path.display()))?;
    eprintln!("mariadb: starting {SERVER} (log: {})", log_path.display());
    let mut server = Command::new(SERVER);
    server
        .args(server_args())
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    std::os::unix::process::CommandExt::process_group(&mut server, 0);
    let mut child = server
        .spawn()
        .with_context(|| format!("could not start {SERVER}"))?;
    let started = Instant::now();
    while !alive() {
        if let Some(status) = child.try_wait()? {
            bail!(
                "{SERVER} exited ({status}) before it answered:\n{}",
                tail(&log_path)
            );
        }
        if started.elapsed() > START_TIMEOUT {
            bail!(
                "MariaDB did not answer within {} s:\n{}",
                START_TIMEOUT.as_secs(),
                tail(&log_path)
            );
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    eprintln!(
        "mariadb: answering after {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// `cargo xtask mariadb stop|start|restart`: each returns when done (stopped, or
/// answering), as `pg_ctlcluster` does.
pub(crate) fn control(action: &str) -> Result<()> {
    match action {
        "stop" => stop_server(),
        "start" => start_server(),
        "restart" => stop_server().and_then(|()| start_server()),
        other => bail!("unknown action `{other}`: use stop, start or restart"),
    }
}

/// Stops the server that wrote the pid file (SIGTERM: InnoDB shuts down cleanly),
/// and waits until it is gone.
fn stop_server() -> Result<()> {
    let pid_file = PathBuf::from(RUN_DIR).join("mysqld.pid");
    let Ok(pid) = std::fs::read_to_string(&pid_file) else {
        return Ok(());
    };
    let pid = pid.trim().to_owned();
    cmd::run(Command::new("kill").args(["-TERM", &pid]))?;
    let started = Instant::now();
    // Gone, or a zombie nobody reaped yet (a container's init may never).
    let running = |pid: &str| {
        std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
            stat.rsplit(") ")
                .next()
                .is_some_and(|rest| !rest.starts_with('Z'))
        })
    };
    while running(&pid) {
        if started.elapsed() > START_TIMEOUT {
            bail!(
                "MariaDB (pid {pid}) did not stop within {} s",
                START_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}

/// The server's command line. Debian's `/etc/mysql` configuration is read first;
/// these win over it.
fn server_args() -> Vec<String> {
    [
        "--user=mysql".to_owned(),
        format!("--datadir={DATADIR}"),
        format!("--socket={SOCKET}"),
        format!("--pid-file={RUN_DIR}/mysqld.pid"),
        format!("--port={PORT}"),
        "--bind-address=127.0.0.1".to_owned(),
        // Binary logging on, so the store's check of the format runs for real.
        "--log-bin=mariadb-bin".to_owned(),
        "--binlog-format=ROW".to_owned(),
        "--expire-logs-days=1".to_owned(),
        // As the suite's SQLite and PostgreSQL run: durability across a crash of
        // the machine is not under test, and a flush per commit only slows it.
        "--innodb-flush-log-at-trx-commit=2".to_owned(),
        // Each test opens pools of its own.
        "--max-connections=500".to_owned(),
    ]
    .into()
}

fn tail(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Drops the databases tests made (`sb_t_…`); run before and after the suites.
pub(crate) fn drop_test_databases(url: &str) -> Result<()> {
    let client = Client::from_url(url)?;
    let list = client.sql(
        "SELECT schema_name FROM information_schema.schemata \
         WHERE schema_name LIKE 'sb\\_t\\_%'",
    )?;
    let names: Vec<&str> = list
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    for db in &names {
        client.sql(&format!("DROP DATABASE IF EXISTS `{db}`"))?;
    }
    if !names.is_empty() {
        eprintln!(
            "mariadb: dropped {} databases of an earlier run",
            names.len()
        );
    }
    Ok(())
}

/// How the `mariadb` command-line client logs in.
#[derive(Debug, PartialEq, Eq)]
struct Client {
    args: Vec<String>,
    password: Option<String>,
}

/// Root through the server's socket (Debian's root logs in by `unix_socket`).
fn root() -> Client {
    Client {
        args: vec![
            "--protocol=socket".into(),
            format!("--socket={SOCKET}"),
            "-uroot".into(),
        ],
        password: None,
    }
}

impl Client {
    /// From `mysql://user:password@host:port/database` (no percent-escapes).
    fn from_url(url: &str) -> Result<Self> {
        let rest = url
            .strip_prefix("mysql://")
            .or_else(|| url.strip_prefix("mariadb://"))
            .with_context(|| format!("{URL_ENV} must start with mysql://"))?;
        let (auth, place) = rest.rsplit_once('@').unwrap_or(("", rest));
        let (user, password) = match auth.split_once(':') {
            Some((u, p)) => (u, Some(p.to_owned())),
            None => (auth, None),
        };
        let host_port = place.split(['/', '?']).next().unwrap_or_default();
        let (host, port) = host_port.rsplit_once(':').unwrap_or((host_port, "3306"));
        let mut args = vec![
            "--protocol=tcp".to_owned(),
            format!("-h{}", if host.is_empty() { "127.0.0.1" } else { host }),
            format!("-P{port}"),
        ];
        if !user.is_empty() {
            args.push(format!("-u{user}"));
        }
        Ok(Self { args, password })
    }

    /// Runs `sql` and returns its rows, tab-separated, without a header.
    fn sql(&self, sql: &str) -> Result<String> {
        let mut client = Command::new("mariadb");
        client.args(&self.args).args([
            "--batch",
            "--skip-column-names",
            "--connect-timeout=5",
            "-e",
            sql,
        ]);
        if let Some(p) = &self.password {
            // Not on the command line, where `ps` would show it.
            client.env("MYSQL_PWD", p);
        }
        let out = client.output().context("running the mariadb client")?;
        if !out.status.success() {
            bail!(
                "mariadb failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_client_logs_in_as_the_url_says() {
        let c = Client::from_url("mysql://switchboard:pw@127.0.0.1:3307/information_schema")
            .expect("parses");
        assert_eq!(
            c.args,
            ["--protocol=tcp", "-h127.0.0.1", "-P3307", "-uswitchboard"]
        );
        assert_eq!(c.password.as_deref(), Some("pw"));
        let c = Client::from_url("mariadb://root@db.test/x?ssl-mode=disabled").expect("parses");
        assert_eq!(c.args, ["--protocol=tcp", "-hdb.test", "-P3306", "-uroot"]);
        assert_eq!(c.password, None);
        assert!(Client::from_url("postgres://x@y/z").is_err());
    }

    #[test]
    fn the_started_server_logs_rows() {
        let args = server_args();
        assert!(args.contains(&"--binlog-format=ROW".to_owned()));
        assert!(args.iter().any(|a| a.starts_with("--log-bin")));
        assert!(create_user_sql().contains("`sb\\_t\\_%`.*"));
    }
}
