//! Server configuration. Every field has a default; the CLI layers flags, env and a
//! TOML file on top (see `switchboard serve --help`).

use crate::clock::{Clock, SystemClock};
use crate::hooks::Hooks;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

#[derive(Clone)]
pub struct Config {
    /// `sqlite://path/to/file.db` (created if missing), `sqlite::memory:`,
    /// `postgres://user:password@host/db` or `mysql://user:password@host/db`
    /// (MariaDB, MySQL; several instances may share either).
    pub database_url: String,
    /// PostgreSQL, MariaDB / MySQL: the connection pool's size in this instance.
    pub database_max_connections: u32,
    /// Where the operator token is kept (mode 0600). Reused across restarts while it
    /// is valid. `None`: a fresh token each start, held in memory only.
    pub operator_token_file: Option<PathBuf>,
    /// Built console files served at `/`. `None` serves a page saying how to build them.
    pub ui_dir: Option<PathBuf>,
    /// The region this server is in (`EU`), which a request's `X-Region-Constraint`
    /// must name (`http/region.rs`); `None`: no region, so a constrained request is
    /// refused.
    pub region: Option<String>,
    /// `host[:port]` the clients address this server by, when a proxy in front of
    /// it changes `Host` (`--public-url`): the `@authority` signed agent requests
    /// are verified against (`http/signatures.rs`). `None`: the request's `Host`.
    pub public_authority: Option<String>,
    /// SSE heartbeat interval.
    pub heartbeat: Duration,
    /// How often background workers run (scavenger, expiry, retention).
    pub worker_interval: Duration,
    /// How often the overview's history takes a sample (depth, counters).
    pub sample_interval: Duration,
    /// How many samples the history keeps (720 × 5 s = one hour).
    pub history_samples: usize,
    /// Terminal events (completed, expired, purged) older than this are removed.
    pub retention: Duration,
    /// Retention writes what it removes here first (`archive.rs`); `None`: removed
    /// without an archive.
    pub archive_dir: Option<PathBuf>,
    /// How long idempotency records are kept (at least 24 h).
    pub idempotency_ttl: Duration,
    /// Largest accepted request body.
    pub max_body_bytes: usize,
    /// Each credential's token bucket (bearer token or console session), checked
    /// before any database work. [`RateLimit::OFF`] turns it off.
    pub rate_limit: RateLimit,
    /// Each tenant's token bucket, shared by all of its credentials.
    pub tenant_rate_limit: RateLimit,
    /// Each client address's bucket for credential lookups the cache cannot answer
    /// (an unknown or new token, a console session, a token endpoint's secret):
    /// [`RateLimit::OFF`] turns it off.
    pub address_rate_limit: RateLimit,
    /// Proxies (or load balancers) whose `X-Forwarded-For` names the client
    /// (`--trusted-proxy`); empty: the TCP peer is the client.
    pub trusted_proxies: Vec<ipnet::IpNet>,
    /// SQLite `synchronous` pragma: `full` or `normal` (WAL makes `normal` safe
    /// against corruption; `full` also survives power loss without losing commits).
    pub sqlite_synchronous: String,
    /// SQLite: write transactions that queue for the single writer while a commit is
    /// in flight share the next commit (`store/sqlite/group.rs`). On by default; off
    /// only to compare (the bench).
    pub sqlite_group_commit: bool,
    /// Webhook callbacks: targets, the key that seals their secrets, retries.
    pub webhooks: WebhookConfig,
    /// The listener serves HTTPS itself (`--tls-cert`): session cookies are always
    /// `Secure`. Behind a proxy, `X-Forwarded-Proto: https` does that per request.
    pub https: bool,
    /// Access tokens (JWTs from the token endpoint, `oauth/`): how long one lives,
    /// at most [`crate::oauth::MAX_ACCESS_TOKEN_TTL`] (30 min).
    pub access_token_ttl: Duration,
    /// How long a signing key signs before the next one takes over; the old one
    /// stays in the JWKS until every token it signed has expired.
    pub signing_key_rotation: Duration,
    /// How long a login (device login, app sign-in) lives: from its start, and
    /// without a refresh.
    pub refresh_lifetimes: crate::store::RefreshLifetimes,
    /// How long the tables that only grow keep their rows.
    pub horizons: Horizons,
    pub clock: Arc<dyn Clock>,
    /// Test seams; empty in production.
    pub hooks: Hooks,
}

/// How long the tables that only grow keep their rows: the maintenance pass trims
/// each by age, in batches (`switchboard doctor` shows them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Horizons {
    /// The operators' audit log (a job's row only once the job ended). A year:
    /// what audits of access commonly ask for.
    pub audit_log: Duration,
    /// The lease audit trail (a line per renewal). 90 days.
    pub lease_audit: Duration,
    /// Fencing rejections (the console's table of refused zombie writes). 30 days.
    pub fencing_rejections: Duration,
    /// Revoked credentials (after their revocation), refresh tokens (after their
    /// login's absolute lifetime, when none can be used any more) and the record
    /// of fencing tokens no live lease carries. 90 days.
    pub credentials: Duration,
}

impl Default for Horizons {
    fn default() -> Self {
        const DAY: u64 = 24 * 3600;
        Self {
            audit_log: Duration::from_secs(365 * DAY),
            lease_audit: Duration::from_secs(90 * DAY),
            fencing_rejections: Duration::from_secs(30 * DAY),
            credentials: Duration::from_secs(90 * DAY),
        }
    }
}

/// How the server registers and delivers to webhook callbacks.
#[derive(Debug, Clone)]
pub struct WebhookConfig {
    /// The 32-byte key that seals callback secrets at rest (base64 in a file of mode
    /// 0600, created if missing). Several instances on one database must share it.
    /// `None`: a fresh key held in memory (callbacks do not survive a restart).
    pub key_file: Option<PathBuf>,
    /// Development: loopback targets (127.0.0.0/8, ::1, `localhost`) are allowed.
    /// Refused at start unless the server listens on a loopback address.
    pub allow_loopback: bool,
    /// PEM trust roots added to the system's, for an endpoint with its own CA.
    pub ca_file: Option<PathBuf>,
    /// The delay after the n-th failure in a row; the last one repeats.
    pub retry_schedule: Vec<Duration>,
    /// A callback that has failed for this long is disabled.
    pub disable_after: Duration,
    /// Deliveries in flight at once in this instance (one per callback at a time).
    pub concurrency: usize,
    /// Whether the delivery worker runs by itself (tests on a manual clock turn it
    /// off and run its passes by hand, as with [`Config::worker_interval`]).
    pub deliver_in_background: bool,
}

impl Default for WebhookConfig {
    fn default() -> Self {
        Self {
            key_file: None,
            allow_loopback: false,
            ca_file: None,
            // Svix's schedule after the first attempt.
            retry_schedule: [5, 300, 1_800, 7_200, 18_000, 36_000, 36_000]
                .into_iter()
                .map(Duration::from_secs)
                .collect(),
            disable_after: Duration::from_secs(5 * 24 * 3600),
            concurrency: 16,
            deliver_in_background: true,
        }
    }
}

impl WebhookConfig {
    /// `<data dir>/webhook-key`.
    pub fn default_key_file() -> PathBuf {
        Config::data_dir().join("webhook-key")
    }
}

impl Default for Config {
    fn default() -> Self {
        Self {
            database_url: Self::default_database_url(),
            database_max_connections: 16,
            operator_token_file: None,
            ui_dir: None,
            region: None,
            public_authority: None,
            heartbeat: Duration::from_secs(30),
            worker_interval: Duration::from_secs(1),
            sample_interval: Duration::from_secs(5),
            history_samples: 720,
            retention: Duration::from_secs(24 * 3600),
            archive_dir: None,
            idempotency_ttl: Duration::from_secs(24 * 3600),
            max_body_bytes: 5 * 1024 * 1024,
            // A client that behaves never meets these; a runaway loop (a retry
            // without backoff, a poll without a wait) does, on any build.
            rate_limit: RateLimit {
                per_second: 1000.0,
                burst: 2000,
            },
            tenant_rate_limit: RateLimit {
                per_second: 10_000.0,
                burst: 20_000,
            },
            // A cache miss per token every 2 s: a thousand agents behind one NAT
            // stay well inside it; a spray of made-up tokens does not.
            address_rate_limit: RateLimit {
                per_second: 500.0,
                burst: 2_000,
            },
            trusted_proxies: Vec::new(),
            sqlite_synchronous: "full".to_owned(),
            sqlite_group_commit: true,
            webhooks: WebhookConfig::default(),
            https: false,
            access_token_ttl: Duration::from_secs(15 * 60),
            signing_key_rotation: Duration::from_secs(7 * 24 * 3600),
            refresh_lifetimes: crate::store::RefreshLifetimes::DEFAULT,
            horizons: Horizons::default(),
            clock: Arc::new(SystemClock),
            hooks: Hooks::default(),
        }
    }
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("database_url", &redact_url(&self.database_url))
            .field("database_max_connections", &self.database_max_connections)
            .field("operator_token_file", &self.operator_token_file)
            .field("ui_dir", &self.ui_dir)
            .field("region", &self.region)
            .field("public_authority", &self.public_authority)
            .field("heartbeat", &self.heartbeat)
            .field("worker_interval", &self.worker_interval)
            .field("sample_interval", &self.sample_interval)
            .field("history_samples", &self.history_samples)
            .field("retention", &self.retention)
            .field("archive_dir", &self.archive_dir)
            .field("idempotency_ttl", &self.idempotency_ttl)
            .field("max_body_bytes", &self.max_body_bytes)
            .field("rate_limit", &self.rate_limit)
            .field("tenant_rate_limit", &self.tenant_rate_limit)
            .field("address_rate_limit", &self.address_rate_limit)
            .field("trusted_proxies", &self.trusted_proxies)
            .field("https", &self.https)
            .field("access_token_ttl", &self.access_token_ttl)
            .field("signing_key_rotation", &self.signing_key_rotation)
            .field("sqlite_synchronous", &self.sqlite_synchronous)
            .field("sqlite_group_commit", &self.sqlite_group_commit)
            .field("webhooks", &self.webhooks)
            .finish_non_exhaustive()
    }
}

impl Config {
    /// The XDG data directory of Switchboard (`~/.local/share/switchboard`).
    pub fn data_dir() -> PathBuf {
        if let Some(dir) = std::env::var_os("XDG_DATA_HOME").filter(|d| !d.is_empty()) {
            return PathBuf::from(dir).join("switchboard");
        }
        match std::env::var_os("HOME").filter(|d| !d.is_empty()) {
            Some(home) => PathBuf::from(home).join(".local/share/switchboard"),
            None => PathBuf::from(".switchboard"),
        }
    }

    /// `sqlite://<data dir>/switchboard.db`.
    pub fn default_database_url() -> String {
        format!(
            "sqlite://{}",
            Self::data_dir().join("switchboard.db").display()
        )
    }

    pub fn default_operator_token_file() -> PathBuf {
        Self::data_dir().join("operator-token")
    }
}

/// Writes `contents` to `path` (its directory created), readable by its owner only,
/// whole or not at all: through a temporary file renamed into place (`replace`), or
/// linked into place, which fails if `path` exists (`!replace`: two instances
/// creating the same file keep the first one's).
pub(crate) fn write_private(path: &Path, contents: &[u8], replace: bool) -> std::io::Result<()> {
    use std::io::Write;
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    let tmp = path.with_extension(format!("tmp{}", std::process::id()));
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(0o600);
    }
    let mut f = opts.open(&tmp)?;
    f.write_all(contents)?;
    f.sync_all()?;
    if replace {
        std::fs::rename(&tmp, path)
    } else {
        let linked = std::fs::hard_link(&tmp, path);
        let _ = std::fs::remove_file(&tmp);
        linked
    }
}

/// `url` without its passwords (I11): `postgres://user:***@host/db`, and the value
/// of every query parameter whose name holds `password` (`?password=…`,
/// `sslpassword=…`) as `***`. The user information ends at the last `@` before the
/// query, so a password holding `/`, `@` or `?`-free text of any kind is redacted
/// whole (libpq and sqlx read it so).
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let (main, query) = match rest.split_once('?') {
        Some((main, query)) => (main, Some(query)),
        None => (rest, None),
    };
    let main = match main.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:***@{host}"),
            None => main.to_owned(),
        },
        None => main.to_owned(),
    };
    let query = query.map(|q| {
        q.split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _)) if key.to_ascii_lowercase().contains("password") => {
                    format!("{key}=***")
                }
                _ => pair.to_owned(),
            })
            .collect::<Vec<_>>()
            .join("&")
    });
    match query {
        Some(q) => format!("{scheme}://{main}?{q}"),
        None => format!("{scheme}://{main}"),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_url;

    #[test]
    fn a_database_password_is_redacted() {
        assert_eq!(
            redact_url("postgres://sb:s3cret@db.example:5432/switchboard?sslmode=require"),
            "postgres://sb:***@db.example:5432/switchboard?sslmode=require"
        );
        assert_eq!(redact_url("postgres://sb@db/x"), "postgres://sb@db/x");
        assert_eq!(redact_url("sqlite:///tmp/a.db"), "sqlite:///tmp/a.db");
    }

    #[test]
    fn a_password_in_the_query_or_holding_a_slash_is_redacted() {
        assert_eq!(
            redact_url("postgres://sb@db/x?sslmode=require&password=s3cret&sslpassword=k3y"),
            "postgres://sb@db/x?sslmode=require&password=***&sslpassword=***"
        );
        assert_eq!(
            redact_url("mysql://sb:pa/ss@word@db:3306/x"),
            "mysql://sb:***@db:3306/x"
        );
        assert_eq!(
            redact_url("postgres://sb:a/b@h1:5432,h2:5432/x?target_session_attrs=read-write"),
            "postgres://sb:***@h1:5432,h2:5432/x?target_session_attrs=read-write"
        );
        for url in [
            "postgres://sb@db/x?password=s3cret",
            "mysql://sb:pa/ss@word@db:3306/x",
        ] {
            let config = super::Config {
                database_url: url.to_owned(),
                ..super::Config::default()
            };
            let debug = format!("{config:?}");
            assert!(
                !debug.contains("s3cret") && !debug.contains("ss@word"),
                "{debug}"
            );
        }
    }
}

/// One token bucket's shape: `per_second` tokens flow in, up to `burst`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RateLimit {
    /// Sustained requests per second (fractions allowed: 0.5 is one per 2 s); 0
    /// turns the limit off.
    pub per_second: f64,
    /// Requests allowed at once on a full bucket (at least 1).
    pub burst: u32,
}

impl RateLimit {
    /// No limit.
    pub const OFF: Self = Self {
        per_second: 0.0,
        burst: 0,
    };

    /// Whether this limit is enforced.
    pub fn is_on(&self) -> bool {
        self.per_second > 0.0 && self.burst > 0
    }

    /// Checks the bounds of a configured limit; the message says how to fix it.
    pub fn check(&self, what: &str) -> Result<(), String> {
        if !self.per_second.is_finite() || self.per_second < 0.0 || self.per_second > 1e6 {
            return Err(format!(
                "{what}_per_second must be between 0 (off) and 1000000, got {}",
                self.per_second
            ));
        }
        if self.per_second > 0.0 && !(1..=1_000_000).contains(&self.burst) {
            return Err(format!(
                "{what}_burst must be between 1 and 1000000, got {}",
                self.burst
            ));
        }
        Ok(())
    }
}
