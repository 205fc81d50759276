//! The settings of `switchboard serve`: flags, then `SWITCHBOARD_*` environment
//! variables, then an optional TOML file (`--config`), then defaults, each checked
//! with a message that names the setting.

use anyhow::{Context, bail};
use clap::{Args, ValueEnum};
use serde::Deserialize;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;
use switchboard_server::Config;

#[derive(Clone, Copy, Debug, Deserialize, ValueEnum, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub(crate) enum LogFormat {
    Text,
    Json,
}

#[derive(Args, Debug, Default)]
pub(crate) struct ServeArgs {
    /// TOML file with any of the settings below (snake_case keys).
    #[arg(long, env = "SWITCHBOARD_CONFIG")]
    config: Option<PathBuf>,
    /// Address to listen on [default: 127.0.0.1:7700]; port 0 picks a free port.
    #[arg(long, env = "SWITCHBOARD_LISTEN")]
    listen: Option<SocketAddr>,
    /// sqlite://PATH [default: a file in the XDG data dir], or
    /// postgres://USER:PASSWORD@HOST/DB or mysql://USER:PASSWORD@HOST/DB (MariaDB,
    /// MySQL) for several instances on one database.
    #[arg(long, env = "SWITCHBOARD_DATABASE_URL")]
    database_url: Option<String>,
    /// PostgreSQL, MariaDB: connections in this instance's pool [default: 16].
    #[arg(long, env = "SWITCHBOARD_DATABASE_MAX_CONNECTIONS")]
    database_max_connections: Option<u32>,
    /// Where the operator token is written (mode 0600) [default: in the data dir].
    #[arg(long, env = "SWITCHBOARD_OPERATOR_TOKEN_FILE")]
    operator_token_file: Option<PathBuf>,
    /// Directory of the built console (ui/dist).
    #[arg(long, env = "SWITCHBOARD_UI_DIR")]
    ui_dir: Option<PathBuf>,
    /// The region this server is in (`EU`): a request whose X-Region-Constraint
    /// does not name it is refused with 421 region_mismatch [default: none, so any
    /// constrained request is refused].
    #[arg(long, env = "SWITCHBOARD_REGION")]
    region: Option<String>,
    /// The URL clients reach this server at, when a proxy in front of it rewrites
    /// Host (`https://switchboard.example.com`): signed agent requests are verified
    /// against its host[:port] [default: each request's Host].
    #[arg(long, env = "SWITCHBOARD_PUBLIC_URL")]
    public_url: Option<String>,
    /// SSE heartbeat interval in seconds [default: 30].
    #[arg(long, env = "SWITCHBOARD_HEARTBEAT_SECONDS")]
    heartbeat_seconds: Option<f64>,
    /// Background worker interval in milliseconds [default: 1000].
    #[arg(long, env = "SWITCHBOARD_WORKER_INTERVAL_MS")]
    worker_interval_ms: Option<u64>,
    /// How often the overview's history samples depth and counters, in seconds
    /// [default: 5].
    #[arg(long, env = "SWITCHBOARD_SAMPLE_INTERVAL_SECONDS")]
    sample_interval_seconds: Option<f64>,
    /// How many history samples are kept in memory [default: 720, an hour at 5 s].
    #[arg(long, env = "SWITCHBOARD_HISTORY_SAMPLES")]
    history_samples: Option<usize>,
    /// Keep completed/expired/purged events this long, in seconds [default: 86400].
    #[arg(long, env = "SWITCHBOARD_RETENTION_SECONDS")]
    retention_seconds: Option<u64>,
    /// Write what retention removes to this directory first, as gzip JSON lines per
    /// tenant and day (`switchboard archive list|restore` read it back); while it
    /// cannot be written, retention removes nothing [default: no archive].
    #[arg(long, env = "SWITCHBOARD_ARCHIVE_DIR")]
    archive_dir: Option<PathBuf>,
    /// Keep idempotency keys this long, in seconds (at least 86400) [default: 86400].
    #[arg(long, env = "SWITCHBOARD_IDEMPOTENCY_TTL_SECONDS")]
    idempotency_ttl_seconds: Option<u64>,
    /// How long an access token from the token endpoint (`/oauth/token`) lives, in
    /// seconds, 60 to 1800 [default: 900].
    #[arg(long, env = "SWITCHBOARD_ACCESS_TOKEN_TTL_SECONDS")]
    access_token_ttl_seconds: Option<u64>,
    /// How long a key signs access tokens before the next one takes over, in seconds
    /// (at least 3600); the old key stays in the JWKS until its tokens expired
    /// [default: 604800, a week].
    #[arg(long, env = "SWITCHBOARD_SIGNING_KEY_ROTATION_SECONDS")]
    signing_key_rotation_seconds: Option<u64>,
    /// Largest request body in bytes [default: 5242880].
    #[arg(long, env = "SWITCHBOARD_MAX_BODY_BYTES")]
    max_body_bytes: Option<usize>,
    /// Requests per second each credential (token or console session) may sustain,
    /// fractions allowed; 0 turns the limit off [default: 1000].
    #[arg(long, env = "SWITCHBOARD_RATE_LIMIT_PER_SECOND")]
    rate_limit_per_second: Option<f64>,
    /// Requests a credential may send at once on a full bucket [default: 2000].
    #[arg(long, env = "SWITCHBOARD_RATE_LIMIT_BURST")]
    rate_limit_burst: Option<u32>,
    /// Requests per second all credentials of one tenant may sustain together; 0
    /// turns the limit off [default: 10000].
    #[arg(long, env = "SWITCHBOARD_TENANT_RATE_LIMIT_PER_SECOND")]
    tenant_rate_limit_per_second: Option<f64>,
    /// A tenant's burst [default: 20000].
    #[arg(long, env = "SWITCHBOARD_TENANT_RATE_LIMIT_BURST")]
    tenant_rate_limit_burst: Option<u32>,
    /// Credential lookups per second each client address may cause (a token the
    /// cache does not know, a console session, a token endpoint's secret); 0 turns
    /// the limit off [default: 500].
    #[arg(long, env = "SWITCHBOARD_ADDRESS_RATE_LIMIT_PER_SECOND")]
    address_rate_limit_per_second: Option<f64>,
    /// An address's burst [default: 2000].
    #[arg(long, env = "SWITCHBOARD_ADDRESS_RATE_LIMIT_BURST")]
    address_rate_limit_burst: Option<u32>,
    /// A proxy or load balancer (address or CIDR, repeatable, comma separated in
    /// the environment) whose `X-Forwarded-For` names the client for the address
    /// limit; without it, the TCP peer is the client [default: none].
    #[arg(
        long = "trusted-proxy",
        env = "SWITCHBOARD_TRUSTED_PROXIES",
        value_delimiter = ','
    )]
    trusted_proxies: Vec<String>,
    /// How long a login (device login, app sign-in) lives from its start, in
    /// seconds [default: 2592000, 30 days].
    #[arg(long, env = "SWITCHBOARD_LOGIN_LIFETIME_SECONDS")]
    login_lifetime_seconds: Option<u64>,
    /// A login ends when unused (no refresh) this long, in seconds [default:
    /// 604800, 7 days].
    #[arg(long, env = "SWITCHBOARD_LOGIN_IDLE_SECONDS")]
    login_idle_seconds: Option<u64>,
    /// Keep the operators' audit log this long, in days [default: 365].
    #[arg(long, env = "SWITCHBOARD_AUDIT_LOG_DAYS")]
    audit_log_days: Option<u64>,
    /// Keep the lease audit trail this long, in days [default: 90].
    #[arg(long, env = "SWITCHBOARD_LEASE_AUDIT_DAYS")]
    lease_audit_days: Option<u64>,
    /// Keep fencing rejections this long, in days [default: 30].
    #[arg(long, env = "SWITCHBOARD_FENCING_REJECTIONS_DAYS")]
    fencing_rejections_days: Option<u64>,
    /// Keep revoked credentials and the record of old fencing tokens this long, in
    /// days [default: 90].
    #[arg(long, env = "SWITCHBOARD_CREDENTIALS_DAYS")]
    credentials_days: Option<u64>,
    /// SQLite synchronous pragma: full or normal [default: full].
    #[arg(long, env = "SWITCHBOARD_SQLITE_SYNCHRONOUS")]
    sqlite_synchronous: Option<String>,
    /// Log format on stderr [default: text].
    #[arg(long, env = "SWITCHBOARD_LOG_FORMAT", value_enum)]
    log_format: Option<LogFormat>,
    /// The key that seals webhook secrets at rest (created, mode 0600, if missing);
    /// every instance on one database needs the same file [default: `webhook-key`
    /// beside the operator token file].
    #[arg(long, env = "SWITCHBOARD_WEBHOOK_KEY_FILE")]
    webhook_key_file: Option<PathBuf>,
    /// Development: allow loopback webhook targets (127.0.0.0/8, ::1, localhost).
    /// Refused unless the server listens on a loopback address.
    #[arg(long, env = "SWITCHBOARD_WEBHOOK_ALLOW_LOOPBACK", action = clap::ArgAction::SetTrue)]
    webhook_allow_loopback: bool,
    /// PEM file of extra trust roots for webhook endpoints (a receiver with its own CA).
    #[arg(long, env = "SWITCHBOARD_WEBHOOK_CA_FILE")]
    webhook_ca_file: Option<PathBuf>,
    /// Seconds to wait after the 1st, 2nd, … failed delivery in a row, comma
    /// separated; the last repeats [default: 5,300,1800,7200,18000,36000,36000].
    #[arg(long, env = "SWITCHBOARD_WEBHOOK_RETRY_SCHEDULE")]
    webhook_retry_schedule: Option<String>,
    /// Disable a callback whose deliveries have all failed for this long, in seconds
    /// [default: 432000, 5 days].
    #[arg(long, env = "SWITCHBOARD_WEBHOOK_DISABLE_AFTER_SECONDS")]
    webhook_disable_after_seconds: Option<u64>,
    /// PEM certificate chain (leaf first) to serve HTTPS with (TLS 1.3); reloaded,
    /// with the key, on SIGHUP. Needs --tls-key.
    #[arg(long, env = "SWITCHBOARD_TLS_CERT", requires = "tls_key")]
    tls_cert: Option<PathBuf>,
    /// PEM private key of --tls-cert.
    #[arg(long, env = "SWITCHBOARD_TLS_KEY", requires = "tls_cert")]
    tls_key: Option<PathBuf>,
    /// Serve plain HTTP on a non-loopback address: only behind a proxy that
    /// terminates TLS (its `X-Forwarded-Proto: https` makes session cookies Secure).
    #[arg(long, env = "SWITCHBOARD_ALLOW_PLAIN_HTTP", action = clap::ArgAction::SetTrue)]
    allow_plain_http: bool,
}

/// A trusted proxy: an address (one host) or a CIDR range.
fn trusted_proxy(text: &str) -> anyhow::Result<ipnet::IpNet> {
    let text = text.trim();
    text.parse::<ipnet::IpNet>()
        .or_else(|_| text.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
        .map_err(|_| {
            anyhow::anyhow!(
                "trusted proxy {text:?} is neither an address nor a CIDR range (e.g. 10.0.0.5                  or 10.0.0.0/8)"
            )
        })
}

/// The TOML file: the same settings, all optional; unknown keys are an error.
#[derive(Deserialize, Debug, Default)]
#[serde(deny_unknown_fields)]
struct FileConfig {
    listen: Option<SocketAddr>,
    database_url: Option<String>,
    database_max_connections: Option<u32>,
    operator_token_file: Option<PathBuf>,
    ui_dir: Option<PathBuf>,
    region: Option<String>,
    public_url: Option<String>,
    heartbeat_seconds: Option<f64>,
    worker_interval_ms: Option<u64>,
    sample_interval_seconds: Option<f64>,
    history_samples: Option<usize>,
    retention_seconds: Option<u64>,
    archive_dir: Option<PathBuf>,
    idempotency_ttl_seconds: Option<u64>,
    access_token_ttl_seconds: Option<u64>,
    signing_key_rotation_seconds: Option<u64>,
    max_body_bytes: Option<usize>,
    rate_limit_per_second: Option<f64>,
    rate_limit_burst: Option<u32>,
    tenant_rate_limit_per_second: Option<f64>,
    tenant_rate_limit_burst: Option<u32>,
    address_rate_limit_per_second: Option<f64>,
    address_rate_limit_burst: Option<u32>,
    trusted_proxies: Option<Vec<String>>,
    login_lifetime_seconds: Option<u64>,
    login_idle_seconds: Option<u64>,
    audit_log_days: Option<u64>,
    lease_audit_days: Option<u64>,
    fencing_rejections_days: Option<u64>,
    credentials_days: Option<u64>,
    sqlite_synchronous: Option<String>,
    log_format: Option<LogFormat>,
    webhook_key_file: Option<PathBuf>,
    webhook_allow_loopback: Option<bool>,
    webhook_ca_file: Option<PathBuf>,
    webhook_retry_schedule: Option<String>,
    webhook_disable_after_seconds: Option<u64>,
    tls_cert: Option<PathBuf>,
    tls_key: Option<PathBuf>,
    allow_plain_http: Option<bool>,
}

/// Resolved settings.
pub(crate) struct Settings {
    pub(crate) listen: SocketAddr,
    /// The certificate and key files, when serving HTTPS.
    pub(crate) tls: Option<(PathBuf, PathBuf)>,
    pub(crate) allow_plain_http: bool,
    pub(crate) log_format: LogFormat,
    pub(crate) config: Config,
}

pub(crate) fn resolve(args: ServeArgs) -> anyhow::Result<Settings> {
    let file: FileConfig = match &args.config {
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading {}", path.display()))?;
            toml::from_str(&text).with_context(|| format!("parsing {}", path.display()))?
        }
        None => FileConfig::default(),
    };
    let mut config = Config::default();
    if let Some(url) = args.database_url.or(file.database_url) {
        config.database_url = url;
    }
    if let Some(n) = args
        .database_max_connections
        .or(file.database_max_connections)
    {
        if !(2..=1000).contains(&n) {
            bail!("database_max_connections must be between 2 and 1000, got {n}");
        }
        config.database_max_connections = n;
    }
    config.operator_token_file = Some(
        args.operator_token_file
            .or(file.operator_token_file)
            .unwrap_or_else(Config::default_operator_token_file),
    );
    config.ui_dir = args.ui_dir.or(file.ui_dir);
    if let Some(dir) = &config.ui_dir
        && !dir.join("index.html").is_file()
    {
        bail!(
            "ui_dir {} has no index.html; build the console with `cargo xtask ui` (it writes \
             ui/dist), or leave ui_dir out to serve the console built into this binary",
            dir.display()
        );
    }
    config.region = args.region.or(file.region);
    if let Some(region) = &config.region
        && !switchboard_server::http::region::valid_region(region)
    {
        bail!(
            "region must be 1 to 32 ASCII letters, digits, '-' or '_' (like \"EU\"), got \
             {region:?}"
        );
    }
    if let Some(url) = args.public_url.or(file.public_url) {
        config.public_authority = Some(public_authority(&url)?);
    }
    if let Some(s) = args.heartbeat_seconds.or(file.heartbeat_seconds) {
        if !(0.05..=3600.0).contains(&s) {
            bail!("heartbeat_seconds must be between 0.05 and 3600, got {s}");
        }
        config.heartbeat = Duration::from_secs_f64(s);
    }
    if let Some(ms) = args.worker_interval_ms.or(file.worker_interval_ms) {
        if !(10..=3_600_000).contains(&ms) {
            bail!("worker_interval_ms must be between 10 and 3600000, got {ms}");
        }
        config.worker_interval = Duration::from_millis(ms);
    }
    if let Some(s) = args
        .sample_interval_seconds
        .or(file.sample_interval_seconds)
    {
        if !(0.1..=3600.0).contains(&s) {
            bail!("sample_interval_seconds must be between 0.1 and 3600, got {s}");
        }
        config.sample_interval = Duration::from_secs_f64(s);
    }
    if let Some(n) = args.history_samples.or(file.history_samples) {
        if !(2..=100_000).contains(&n) {
            bail!("history_samples must be between 2 and 100000, got {n}");
        }
        config.history_samples = n;
    }
    if let Some(s) = args.retention_seconds.or(file.retention_seconds) {
        config.retention = Duration::from_secs(s);
    }
    config.archive_dir = args.archive_dir.or(file.archive_dir);
    if let Some(s) = args
        .idempotency_ttl_seconds
        .or(file.idempotency_ttl_seconds)
    {
        if s < 86_400 {
            bail!(
                "idempotency_ttl_seconds must be at least 86400 (keys are kept at least 24 h), got {s}"
            );
        }
        config.idempotency_ttl = Duration::from_secs(s);
    }
    if let Some(s) = args
        .access_token_ttl_seconds
        .or(file.access_token_ttl_seconds)
    {
        if !(60..=1800).contains(&s) {
            bail!(
                "access_token_ttl_seconds must be between 60 and 1800 (access tokens live at \
                 most 30 min), got {s}"
            );
        }
        config.access_token_ttl = Duration::from_secs(s);
    }
    if let Some(s) = args
        .signing_key_rotation_seconds
        .or(file.signing_key_rotation_seconds)
    {
        if s < 3600 {
            bail!("signing_key_rotation_seconds must be at least 3600, got {s}");
        }
        config.signing_key_rotation = Duration::from_secs(s);
    }
    if let Some(b) = args.max_body_bytes.or(file.max_body_bytes) {
        if !(1024..=64 * 1024 * 1024).contains(&b) {
            bail!("max_body_bytes must be between 1024 and 67108864, got {b}");
        }
        config.max_body_bytes = b;
    }
    for (limit, what, per_second, burst) in [
        (
            &mut config.rate_limit,
            "rate_limit",
            args.rate_limit_per_second.or(file.rate_limit_per_second),
            args.rate_limit_burst.or(file.rate_limit_burst),
        ),
        (
            &mut config.tenant_rate_limit,
            "tenant_rate_limit",
            args.tenant_rate_limit_per_second
                .or(file.tenant_rate_limit_per_second),
            args.tenant_rate_limit_burst
                .or(file.tenant_rate_limit_burst),
        ),
        (
            &mut config.address_rate_limit,
            "address_rate_limit",
            args.address_rate_limit_per_second
                .or(file.address_rate_limit_per_second),
            args.address_rate_limit_burst
                .or(file.address_rate_limit_burst),
        ),
    ] {
        if let Some(r) = per_second {
            limit.per_second = r;
        }
        if let Some(b) = burst {
            limit.burst = b;
        }
        limit.check(what).map_err(anyhow::Error::msg)?;
    }
    let proxies = match args.trusted_proxies.is_empty() {
        true => file.trusted_proxies.unwrap_or_default(),
        false => args.trusted_proxies,
    };
    config.trusted_proxies = proxies
        .iter()
        .map(|p| trusted_proxy(p))
        .collect::<anyhow::Result<_>>()?;
    let lifetimes = &mut config.refresh_lifetimes;
    if let Some(s) = args.login_lifetime_seconds.or(file.login_lifetime_seconds) {
        if !(3600..=366 * 86_400).contains(&s) {
            bail!("login_lifetime_seconds must be between 3600 and 31622400 (366 days), got {s}");
        }
        lifetimes.absolute_ms = s as i64 * 1000;
    }
    if let Some(s) = args.login_idle_seconds.or(file.login_idle_seconds) {
        if !(600..=366 * 86_400).contains(&s) {
            bail!("login_idle_seconds must be between 600 and 31622400 (366 days), got {s}");
        }
        lifetimes.idle_ms = s as i64 * 1000;
    }
    if lifetimes.idle_ms > lifetimes.absolute_ms {
        bail!(
            "login_idle_seconds ({}) must not be longer than login_lifetime_seconds ({})",
            lifetimes.idle_ms / 1000,
            lifetimes.absolute_ms / 1000
        );
    }
    let horizons = &mut config.horizons;
    for (horizon, what, days) in [
        (
            &mut horizons.audit_log,
            "audit_log_days",
            args.audit_log_days.or(file.audit_log_days),
        ),
        (
            &mut horizons.lease_audit,
            "lease_audit_days",
            args.lease_audit_days.or(file.lease_audit_days),
        ),
        (
            &mut horizons.fencing_rejections,
            "fencing_rejections_days",
            args.fencing_rejections_days
                .or(file.fencing_rejections_days),
        ),
        (
            &mut horizons.credentials,
            "credentials_days",
            args.credentials_days.or(file.credentials_days),
        ),
    ] {
        if let Some(d) = days {
            if !(1..=3650).contains(&d) {
                bail!("{what} must be between 1 and 3650, got {d}");
            }
            *horizon = Duration::from_secs(d * 86_400);
        }
    }
    if let Some(s) = args.sqlite_synchronous.or(file.sqlite_synchronous) {
        config.sqlite_synchronous = s;
    }
    let webhooks = &mut config.webhooks;
    webhooks.key_file = Some(
        args.webhook_key_file
            .or(file.webhook_key_file)
            .unwrap_or_else(|| {
                config.operator_token_file.as_deref().map_or_else(
                    switchboard_server::config::WebhookConfig::default_key_file,
                    |t| t.with_file_name("webhook-key"),
                )
            }),
    );
    webhooks.allow_loopback =
        args.webhook_allow_loopback || file.webhook_allow_loopback.unwrap_or(false);
    webhooks.ca_file = args.webhook_ca_file.or(file.webhook_ca_file);
    if let Some(s) = args.webhook_retry_schedule.or(file.webhook_retry_schedule) {
        webhooks.retry_schedule = retry_schedule(&s)?;
    }
    if let Some(s) = args
        .webhook_disable_after_seconds
        .or(file.webhook_disable_after_seconds)
    {
        if !(60..=90 * 86_400).contains(&s) {
            bail!(
                "webhook_disable_after_seconds must be between 60 and 7776000 (90 days), got {s}"
            );
        }
        webhooks.disable_after = Duration::from_secs(s);
    }
    let listen = args
        .listen
        .or(file.listen)
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 7700)));
    let tls = match (
        args.tls_cert.or(file.tls_cert),
        args.tls_key.or(file.tls_key),
    ) {
        (Some(cert), Some(key)) => Some((cert, key)),
        (None, None) => None,
        _ => bail!("tls_cert and tls_key go together: give both, or neither"),
    };
    let allow_plain_http = args.allow_plain_http || file.allow_plain_http.unwrap_or(false);
    if tls.is_none() && !allow_plain_http && !listen.ip().is_loopback() {
        bail!(
            "refusing to serve plain HTTP on {listen}, which other machines reach: tokens \
             and session cookies would cross the network in clear. Give --tls-cert and \
             --tls-key, or --allow-plain-http when a proxy in front terminates TLS, or \
             listen on 127.0.0.1"
        );
    }
    config.https = tls.is_some();
    Ok(Settings {
        listen,
        tls,
        allow_plain_http,
        log_format: args
            .log_format
            .or(file.log_format)
            .unwrap_or(LogFormat::Text),
        config,
    })
}

/// `5,300,1800`: 1 to 20 delays in seconds, each 1 s to 7 days.
fn retry_schedule(text: &str) -> anyhow::Result<Vec<Duration>> {
    let delays = text
        .split(',')
        .map(|d| {
            let d = d.trim();
            match d.parse::<u64>() {
                Ok(s) if (1..=7 * 86_400).contains(&s) => Ok(Duration::from_secs(s)),
                _ => bail!(
                    "webhook_retry_schedule: {d:?} is not a delay in seconds from 1 to 604800; \
                     write the delays comma separated, e.g. 5,300,1800"
                ),
            }
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    if delays.len() > 20 {
        bail!(
            "webhook_retry_schedule: at most 20 delays, got {}",
            delays.len()
        );
    }
    Ok(delays)
}

#[cfg(test)]
mod tests;

/// The `host[:port]` of `--public-url` as RFC 9421 `@authority` wants it: lowercase,
/// without the scheme's default port.
fn public_authority(url: &str) -> anyhow::Result<String> {
    let parsed = url::Url::parse(url).map_err(|e| {
        anyhow::anyhow!("public_url must be an absolute http(s) URL like https://switchboard.example.com, got {url:?} ({e})")
    })?;
    let host = match (parsed.scheme(), parsed.host_str()) {
        ("http" | "https", Some(host)) => host.to_ascii_lowercase(),
        _ => bail!("public_url must be an http(s) URL with a host, got {url:?}"),
    };
    Ok(match parsed.port() {
        Some(port) => format!("{host}:{port}"),
        None => host,
    })
}
