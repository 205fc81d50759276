//! `switchboard doctor` as a user runs it: the same flags as `serve`, a line per
//! check with a fix for each problem, `--json`, and the exit status 0/1/2. What each
//! check finds is caused in `crates/server/src/doctor/tests.rs`; here the command.

mod common;

use common::{Serve, serve_command, sqlite_url};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Command, Output};

/// `switchboard doctor` with the settings `serve_command` gives a server in `dir`.
fn doctor(dir: &Path, extra: &[&str]) -> Output {
    let ui = dir.join("ui");
    std::fs::create_dir_all(&ui).unwrap();
    std::fs::write(ui.join("index.html"), "<!doctype html>").unwrap();
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["doctor", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(sqlite_url(dir))
        .arg("--operator-token-file")
        .arg(dir.join("operator-token"))
        .arg("--ui-dir")
        .arg(&ui)
        .args(extra)
        .env_remove("SWITCHBOARD_UI_DIR")
        .output()
        .expect("run switchboard doctor")
}

fn json(output: &Output) -> serde_json::Value {
    serde_json::from_slice(&output.stdout).expect("--json prints one JSON object")
}

fn finding<'a>(report: &'a serde_json::Value, check: &str) -> &'a serde_json::Value {
    report["findings"]
        .as_array()
        .expect("findings")
        .iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no {check} in {report}"))
}

#[test]
fn a_served_database_is_ok_and_problems_set_the_exit_status() {
    let dir = tempfile::tempdir().unwrap();

    // Before the first start: the file does not exist yet (a warning, exit 1), and
    // the doctor does not create it.
    let first = doctor(dir.path(), &["--json"]);
    assert_eq!(first.status.code(), Some(1), "{first:?}");
    let report = json(&first);
    assert_eq!(report["status"], "warning");
    assert_eq!(finding(&report, "database")["status"], "warning");
    assert!(!dir.path().join("switchboard.db").exists());

    // After one start of `serve`: every check passes but, perhaps, free disk space
    // on a crowded test machine.
    drop(Serve::start(&mut serve_command(
        &sqlite_url(dir.path()),
        dir.path(),
    )));
    let served = json(&doctor(dir.path(), &["--json"]));
    for f in served["findings"].as_array().unwrap() {
        if f["check"] != "disk_space" {
            assert_eq!(f["status"], "ok", "{f}");
        }
    }

    // The token file readable by others: an error, exit 2, and the text says how to
    // fix it.
    let token = dir.path().join("operator-token");
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let bad = doctor(dir.path(), &[]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    let text = String::from_utf8(bad.stdout).unwrap();
    assert!(text.starts_with("switchboard doctor: "), "{text}");
    assert!(text.contains("error    token_file"), "{text}");
    assert!(
        text.contains(&format!("fix: chmod 600 {}", token.display())),
        "{text}"
    );
    let secret = std::fs::read_to_string(&token).unwrap();
    assert!(!text.contains(secret.trim()), "never the token itself");
}

#[test]
fn a_configuration_that_does_not_resolve_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = doctor(dir.path(), &["--json", "--database-max-connections", "1"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let report = json(&out);
    let config = finding(&report, "config");
    assert_eq!(config["status"], "error");
    assert!(
        config["message"]
            .as_str()
            .unwrap()
            .contains("database_max_connections"),
        "{config}"
    );
}
