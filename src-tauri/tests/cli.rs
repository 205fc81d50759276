//! The desktop binary outside a graphical session: it must explain itself and exit,
//! never panic inside GTK. (The window itself is covered by `--smoke-test`, which
//! `cargo xtask test` runs under Xvfb.)

use std::process::{Command, Output};

fn desktop(args: &[&str], display: Option<&str>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_switchboard-desktop"));
    cmd.args(args).env_remove("WAYLAND_DISPLAY");
    match display {
        Some(value) => cmd.env("DISPLAY", value),
        None => cmd.env_remove("DISPLAY"),
    };
    cmd.output().expect("the desktop binary runs")
}

#[test]
fn without_a_display_it_points_to_the_headless_server_and_exits_2() {
    for display in [None, Some("")] {
        let out = desktop(&[], display);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "DISPLAY={display:?}, stderr: {stderr}"
        );
        assert!(
            stderr.contains("no display") && stderr.contains("switchboard serve"),
            "the message should say what to run instead: {stderr}"
        );
        assert!(!stderr.contains("panicked"), "no panic: {stderr}");
    }
}

#[test]
fn help_exits_0_and_unknown_arguments_fail() {
    let help = desktop(&["--help"], None);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--smoke-test"));

    let bogus = desktop(&["--bogus"], None);
    assert_eq!(bogus.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&bogus.stderr).contains("--bogus"));
}
