//! `cargo xtask run`: the desktop app when a display is available, else the headless
//! server (`switchboard serve`), both serving the freshly built console UI.

use std::os::unix::process::CommandExt;

use anyhow::{Result, bail};

use crate::{cmd, prereqs, ui};

pub(crate) fn run(args: &[String]) -> Result<()> {
    let tools = prereqs::ensure()?;
    let dist = ui::build(&tools)?;

    let mut cargo = cmd::cargo();
    cargo.env("SWITCHBOARD_UI_DIR", &dist);
    if cmd::has_display() {
        cargo
            .args(["run", "-p", "switchboard-desktop", "--"])
            .args(args);
    } else {
        eprintln!(
            "run: no display found (DISPLAY and WAYLAND_DISPLAY are unset), so starting the \
             headless server instead of the desktop app; open the console_url it prints"
        );
        cargo
            .args([
                "run",
                "-p",
                "switchboard-cli",
                "--bin",
                "switchboard",
                "--",
                "serve",
            ])
            .arg("--ui-dir")
            .arg(&dist)
            .args(args);
    }
    eprintln!("$ {}", cmd::render(&cargo));
    // Replace xtask so Ctrl-C and the exit status belong to the app itself.
    let error = cargo.exec();
    bail!("could not start cargo: {error}")
}
