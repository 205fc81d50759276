//! `switchboard names import FILE.csv` against a running `switchboard serve`: the
//! dry run reports and changes nothing, the import registers canonical names (the
//! oldest keeps a contested one, the rest get a `-N` suffix, invalid names are
//! listed with why), and running it again finds everything already registered.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

fn import(dir: &std::path::Path, url: &str, extra: &[&str]) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["names", "import"])
        .arg(dir.join("legacy.csv"))
        .args(["--server", url, "--token-file"])
        .arg(dir.join("operator-token"))
        .args(extra)
        .env_remove("SWITCHBOARD_TOKEN")
        .output()
        .expect("run names import");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

#[test]
fn names_import_dry_run_then_import_then_nothing_left_to_do() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::write(
        dir.path().join("legacy.csv"),
        "name,created_at,team\n\
         PayPal,2024-03-01T00:00:00Z,a\n\
         paypal,2023-01-01T00:00:00Z,b\n\
         two words,2020-01-01T00:00:00Z,c\n\
         Build-Bot,2019-06-01T12:00:00Z,d\n",
    )
    .expect("csv");
    let mut server = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(["serve", "--listen", "127.0.0.1:0", "--database-url"])
        .arg(format!(
            "sqlite://{}",
            dir.path().join("db.sqlite").display()
        ))
        .arg("--operator-token-file")
        .arg(dir.path().join("operator-token"))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve");
    let mut line = String::new();
    BufReader::new(server.stdout.as_mut().expect("stdout"))
        .read_line(&mut line)
        .expect("ready line");
    let ready: serde_json::Value = serde_json::from_str(&line).expect("JSON");
    let url = ready["url"].as_str().expect("url").to_owned();

    let (ok, dry) = import(dir.path(), &url, &["--dry-run"]);
    assert!(ok, "{dry}");
    assert!(dry.contains("kept      paypal"), "{dry}");
    assert!(
        dry.contains("renamed   \"PayPal\" -> paypal-2 (paypal is older)"),
        "{dry}"
    );
    assert!(
        dry.contains("kept      build-bot (from \"Build-Bot\")"),
        "{dry}"
    );
    assert!(dry.contains("rejected  \"two words\""), "{dry}");
    assert!(
        dry.contains(
            "dry run, nothing changed: 3 registered (1 renamed), 0 already registered, 1 rejected"
        ),
        "{dry}"
    );

    let (ok, real) = import(dir.path(), &url, &[]);
    assert!(ok, "{real}");
    assert!(
        real.ends_with("3 registered (1 renamed), 0 already registered, 1 rejected\n"),
        "the dry run changed nothing, so the import does it all: {real}"
    );
    let (ok, again) = import(dir.path(), &url, &["--json"]);
    assert!(ok, "{again}");
    let report: serde_json::Value = serde_json::from_str(&again).expect("--json prints the report");
    let names: Vec<(&str, bool)> = report["registered"]
        .as_array()
        .expect("registered")
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap(),
                r["already_registered"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [("paypal-2", true), ("paypal", true), ("build-bot", true)],
        "a second run finds everything in place"
    );

    // A bad file is a clear error, not a partial import.
    std::fs::write(dir.path().join("legacy.csv"), "name,created\nx,2020\n").expect("csv");
    let (ok, bad) = import(dir.path(), &url, &[]);
    assert!(!ok);
    assert!(
        bad.contains("needs a header row with the columns name and created_at"),
        "{bad}"
    );
    let _ = server.kill();
    let _ = server.wait();
}
