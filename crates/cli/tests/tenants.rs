//! `switchboard tenants create|list` against a running `switchboard serve`: the
//! admin (the token file `serve` wrote) creates a tenant and is shown its operator
//! token once; a taken name fails with the server's reason; the list shows both
//! tenants; the new tenant's own token is refused with a message that says whose
//! token the command takes.

mod common;

use common::{Serve, serve_command, sqlite_url};
use std::path::Path;
use std::process::{Command, Stdio};

fn tenants(dir: &Path, url: &str, token: Option<&str>, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard"));
    cmd.arg("tenants")
        .args(args)
        .args(["--server", url, "--token-file"])
        .arg(dir.join("operator-token"))
        .env_remove("SWITCHBOARD_TOKEN");
    if let Some(token) = token {
        cmd.env("SWITCHBOARD_TOKEN", token);
    }
    let out = cmd.output().expect("run tenants");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn tenants_create_then_list_and_only_the_admin_may() {
    let dir = tempfile::tempdir().expect("temp dir");
    let server =
        Serve::start(serve_command(&sqlite_url(dir.path()), dir.path()).stderr(Stdio::null()));
    let url = server.url.clone();

    let (ok, created) = tenants(dir.path(), &url, None, &["create", "research"]);
    assert!(ok, "{created}");
    assert!(
        created.starts_with("created tenant research ("),
        "{created}"
    );
    let token = created
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("sb_op_"))
        .unwrap_or_else(|| panic!("the token on a line of its own: {created}"))
        .to_owned();

    let (ok, taken) = tenants(dir.path(), &url, None, &["create", "research"]);
    assert!(!ok, "{taken}");
    assert!(taken.contains("already exists"), "{taken}");

    let (ok, list) = tenants(dir.path(), &url, None, &["list", "--json"]);
    assert!(ok, "{list}");
    let list: serde_json::Value = serde_json::from_str(&list).expect("JSON list");
    let names: Vec<&str> = list
        .as_array()
        .expect("array")
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["default", "research"]);
    let (ok, text) = tenants(dir.path(), &url, None, &["list"]);
    assert!(ok && text.lines().count() == 3, "{text}");

    let (ok, refused) = tenants(dir.path(), &url, Some(&token), &["list"]);
    assert!(!ok, "{refused}");
    assert!(refused.contains("switchboard serve"), "{refused}");
    assert!(
        !refused.contains(&token),
        "the token is never echoed: {refused}"
    );
}
