//! This machine's checks: the operator token file, free disk space where the data
//! lives, the console and the listen address (and its TLS).

use super::{Finding, Listening, Thresholds};
use crate::config::Config;
use crate::store::sqlite::file_of as sqlite_file;
use std::path::{Path, PathBuf};

/// The directory whose file system holds the data: the SQLite file's, else the
/// operator token file's.
pub(super) fn data_dir(config: &Config) -> PathBuf {
    let file = match sqlite_file(&config.database_url) {
        Some(file) => PathBuf::from(file),
        None => config
            .operator_token_file
            .clone()
            .unwrap_or_else(Config::default_operator_token_file),
    };
    // The nearest directory that exists (the server creates the rest).
    file.ancestors()
        .skip(1)
        .find(|d| d.is_dir())
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from("."))
}

pub(super) fn token_file(config: &Config) -> Finding {
    let path = config
        .operator_token_file
        .clone()
        .unwrap_or_else(Config::default_operator_token_file);
    let shown = path.display();
    match std::fs::metadata(&path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Finding::ok(
            "token_file",
            format!("{shown} does not exist yet: `serve` writes it (mode 0600)"),
        ),
        Err(e) => Finding::error(
            "token_file",
            format!("cannot read {shown}: {e}"),
            "check the path and its directory's permissions",
        ),
        Ok(meta) if !meta.is_file() => Finding::error(
            "token_file",
            format!("{shown} is not a file"),
            "point --operator-token-file at a file",
        ),
        Ok(meta) => {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode() & 0o777;
            if mode & 0o077 != 0 {
                Finding::error(
                    "token_file",
                    format!("{shown} has mode {mode:o}: other users can read the operator token"),
                    format!("chmod 600 {shown}, then rotate the token (it may have been read)"),
                )
            } else {
                Finding::ok("token_file", format!("{shown} has mode {mode:o}"))
            }
        }
    }
}

pub(super) fn disk(dir: &Path, t: &Thresholds) -> Finding {
    let shown = dir.display();
    let stat = match rustix::fs::statvfs(dir) {
        Ok(s) => s,
        Err(e) => {
            return Finding::error(
                "disk_space",
                format!("cannot read the free space of {shown}: {e}"),
                "check that the data directory exists and is readable",
            );
        }
    };
    let free = stat.f_bavail.saturating_mul(stat.f_frsize);
    let message = format!("{} MiB free on {shown}", free >> 20);
    let fix = "free space on that file system or move the data: with a full disk writes \
               answer 507 storage_full until space returns";
    if free < t.error_free_bytes {
        Finding::error("disk_space", message, fix)
    } else if free < t.warn_free_bytes {
        Finding::warning("disk_space", message, fix)
    } else {
        Finding::ok("disk_space", message)
    }
}

/// The archive retention writes first (`--archive-dir`): writable, or retention is
/// held back; its free space, as the archive grows with every pass.
pub(super) fn archive(config: &Config, t: &Thresholds) -> Vec<Finding> {
    let Some(dir) = &config.archive_dir else {
        return vec![Finding::ok(
            "archive",
            "no --archive-dir: retention removes old terminal events without an archive",
        )];
    };
    if !dir.exists() {
        return vec![Finding::warning(
            "archive",
            format!("{} does not exist yet", dir.display()),
            "create it, or let `serve` create it at start (its parent must be writable)",
        )];
    }
    match crate::archive::ArchiveDir::open(dir) {
        Ok(_) => {
            let mut space = disk(dir, t);
            space.check = "archive_disk_space";
            vec![
                Finding::ok("archive", format!("{} takes writes", dir.display())),
                space,
            ]
        }
        Err(e) => vec![Finding::error(
            "archive",
            format!("{} cannot be written: {e}", dir.display()),
            "create the directory and give the server's user write access to it: until \
             then `serve` refuses to start, and a running server holds retention back",
        )],
    }
}

/// How long the tables that only grow keep their rows, and how long a login lives
/// (settings, shown so an operator sees what is kept).
pub(super) fn horizons(config: &Config) -> Finding {
    let days = |d: std::time::Duration| d.as_secs() / 86_400;
    let h = &config.horizons;
    let l = &config.refresh_lifetimes;
    Finding::ok(
        "horizons",
        format!(
            "kept: audit log {} days, lease audit {} days, fencing rejections {} days, \
             revoked credentials and old fencing-token records {} days, idempotency keys \
             {} h, terminal events {} h; a login lives {} days, {} days unused",
            days(h.audit_log),
            days(h.lease_audit),
            days(h.fencing_rejections),
            days(h.credentials),
            config.idempotency_ttl.as_secs() / 3600,
            config.retention.as_secs() / 3600,
            l.absolute_ms / 86_400_000,
            l.idle_ms / 86_400_000,
        ),
    )
}

pub(super) fn console(config: &Config) -> Finding {
    match &config.ui_dir {
        Some(dir) if dir.join("index.html").is_file() => {
            Finding::ok("console", format!("served from {}", dir.display()))
        }
        Some(dir) => Finding::error(
            "console",
            format!("{} has no index.html", dir.display()),
            "build the console with `cargo xtask ui` (it writes ui/dist), or drop --ui-dir to \
             serve the console inside the binary",
        ),
        None if crate::http::console_embedded() => {
            Finding::ok("console", "served from inside this binary")
        }
        None => Finding::warning(
            "console",
            "this binary has no console inside (a debug build) and no --ui-dir",
            "install a release build (`cargo install --path crates/cli`), or pass --ui-dir",
        ),
    }
}

pub(super) fn listener(listen: &Listening) -> Vec<Finding> {
    let addr = listen.addr;
    let mut found = vec![match std::net::TcpListener::bind(addr) {
        Ok(_) => Finding::ok("listen", format!("{addr} is free")),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Finding::warning(
            "listen",
            format!("{addr} is in use"),
            "another process listens there (a switchboard already running?): stop it or \
             pass another --listen",
        ),
        Err(e) => Finding::error(
            "listen",
            format!("cannot listen on {addr}: {e}"),
            "use an address of this machine (127.0.0.1:7700 for local use)",
        ),
    }];
    match &listen.tls {
        Some((cert, key)) => found.push(match crate::tls::Tls::load(cert, key) {
            Ok(_) => Finding::ok(
                "tls",
                format!("HTTPS (TLS 1.3) with {} and its key", cert.display()),
            ),
            Err(e) => Finding::error(
                "tls",
                e,
                "give a PEM certificate chain (leaf first) and the PEM private key that \
                 belongs to it",
            ),
        }),
        None if addr.ip().is_loopback() => {}
        None if listen.allow_plain_http => found.push(Finding::ok(
            "tls",
            format!("plain HTTP on {addr}, for a proxy that terminates TLS (--allow-plain-http)"),
        )),
        None => found.push(Finding::error(
            "tls",
            format!("{addr} is reachable from other machines over plain HTTP, which serve refuses"),
            "give --tls-cert and --tls-key, or --allow-plain-http behind a TLS-terminating \
             proxy, or listen on 127.0.0.1",
        )),
    }
    found
}
