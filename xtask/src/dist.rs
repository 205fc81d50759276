//! `cargo xtask dist`: Debian packages of the headless server (`switchboard`) and of
//! the desktop app (`switchboard-desktop`), both with the console inside, and the
//! Python package's wheel (`switchboard_agents-…-cp311-abi3-….whl`, one for every
//! CPython ≥ 3.11; built by maturin, see `python.rs`).
//!
//! The packages are assembled here and built by `dpkg-deb`, Debian's own tool, with
//! `Depends` from `dpkg-shlibdeps`: both come with `build-essential`, so packaging
//! needs nothing the build does not. (cargo-deb would be one more tool to install and
//! build; the Tauri bundler needs tauri-cli, which the build does not use.) What goes
//! into a package that is not a binary lives in `packaging/debian/`: the systemd
//! unit, the default settings, the maintainer scripts and the desktop entry.
//!
//! `cargo xtask test` packages the binaries it has already built and tests the
//! packages (`test/package.rs`); `dist` builds release binaries for them.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::{cmd, prereqs, ui};

const USAGE: &str = "\
usage: cargo xtask dist [--debug] [--out DIR]

Builds target/dist/switchboard_<version>_<arch>.deb (the headless server, its
systemd unit and default settings) and switchboard-desktop_<version>_<arch>.deb
(the desktop console), each with the console inside, and the Python package's
wheel, switchboard_agents-<version>-cp311-abi3-<platform>.whl (pip install it).
  --debug    package debug builds (quick, large; for trying the packaging)
  --out DIR  write the packages to DIR instead of target/dist";

/// The packages' version: the workspace's, with Debian revision 1.
pub(crate) fn version() -> String {
    format!("{}-1", env!("CARGO_PKG_VERSION"))
}

/// `cargo xtask dist [--debug] [--out DIR]`.
pub(crate) fn dist(args: &[String]) -> Result<()> {
    let mut debug = false;
    let mut out = cmd::target_dir().join("dist");
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--debug" => debug = true,
            "--out" => {
                out = PathBuf::from(args.next().context("--out needs a directory")?);
            }
            "-h" | "--help" => {
                eprintln!("{USAGE}");
                return Ok(());
            }
            other => bail!("unknown argument `{other}`\n\n{USAGE}"),
        }
    }
    let tools = prereqs::ensure()?;
    let dist = ui::build(&tools)?;
    let mut build = cmd::cargo();
    build.args([
        "build",
        "--locked",
        "-p",
        "switchboard-cli",
        "-p",
        "switchboard-desktop",
    ]);
    if !debug {
        build.arg("--release");
    }
    // The console the UI step just built goes inside both binaries.
    cmd::run(build.env("SWITCHBOARD_UI_DIST", &dist))?;
    let bin = cmd::target_dir().join(if debug { "debug" } else { "release" });
    fs::create_dir_all(&out).with_context(|| format!("creating {}", out.display()))?;
    let server = server_deb(&bin.join("switchboard"), &out)?;
    let desktop = desktop_deb(&bin.join("switchboard-desktop"), &out)?;
    let wheel = python_wheel(debug, &out)?;
    for artifact in [&server, &desktop, &wheel] {
        let size = fs::metadata(artifact)?.len();
        eprintln!("dist: {} ({} KiB)", artifact.display(), size / 1024);
    }
    eprintln!(
        "dist: install with `sudo apt install {}` (README: Install the server package)",
        server.display()
    );
    Ok(())
}

/// The Python package's wheel, built in the target dir and copied into `out`
/// (a wheel of an earlier version there is replaced).
fn python_wheel(debug: bool, out: &Path) -> Result<PathBuf> {
    let venv = crate::python::Venv::ensure()?;
    let built = venv.build_wheel(
        if debug { "dev" } else { "release" },
        &cmd::target_dir().join("python-wheel-dist"),
    )?;
    let name = built.file_name().context("the wheel's file name")?;
    for old in fs::read_dir(out)?.filter_map(|e| e.ok().map(|e| e.path())) {
        let stale = old
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("switchboard_agents-") && n.ends_with(".whl"));
        if stale {
            fs::remove_file(&old)?;
        }
    }
    let wheel = out.join(name);
    fs::copy(&built, &wheel)
        .with_context(|| format!("copying {} to {}", built.display(), wheel.display()))?;
    Ok(wheel)
}

/// `packaging/debian/` in the workspace.
fn packaging() -> PathBuf {
    cmd::root().join("packaging").join("debian")
}

/// The Debian architecture of this machine (`amd64`, `arm64`, …).
fn architecture() -> Result<String> {
    let arch = cmd::stdout(Command::new("dpkg").arg("--print-architecture"))
        .context("`dpkg --print-architecture` failed: packaging needs Debian's dpkg")?;
    Ok(arch.trim().to_owned())
}

/// The headless server: `/usr/bin/switchboard`, its hardened systemd unit, the
/// default settings in `/etc/switchboard` (a conffile), a system user and
/// `/var/lib/switchboard` (made by the postinst).
pub(crate) fn server_deb(binary: &Path, out: &Path) -> Result<PathBuf> {
    let pkg = packaging();
    let stage = Stage::new(out, "switchboard")?;
    stage.binary(binary, "usr/bin/switchboard")?;
    stage.file(
        &pkg.join("switchboard.service"),
        "usr/lib/systemd/system/switchboard.service",
        0o644,
    )?;
    // 0640 and group switchboard once the postinst made the group.
    stage.file(
        &pkg.join("switchboard.toml"),
        "etc/switchboard/switchboard.toml",
        0o640,
    )?;
    stage.docs()?;
    for script in ["postinst", "prerm", "postrm"] {
        stage.file(
            &pkg.join("server").join(script),
            &format!("DEBIAN/{script}"),
            0o755,
        )?;
    }
    stage.write(
        "DEBIAN/conffiles",
        "/etc/switchboard/switchboard.toml\n",
        0o644,
    )?;
    stage.control(&Control {
        section: "net",
        depends: &["adduser"],
        binaries: &["usr/bin/switchboard"],
        summary: "self-hosted coordination server for AI agents",
        description: "Durable transactional inboxes for AI agents: events committed with \
                      the change that causes them, SSE wake-ups, claims under fenced \
                      visibility leases, a dead-letter quarantine, signed webhooks and \
                      the operations console in the browser. Runs as the systemd service \
                      switchboard on SQLite by default; several instances share \
                      PostgreSQL or MariaDB.",
    })?;
    stage.build()
}

/// The desktop app: `/usr/bin/switchboard-desktop` (the server and the console
/// inside, a window and a tray icon), its menu entry and icon.
pub(crate) fn desktop_deb(binary: &Path, out: &Path) -> Result<PathBuf> {
    // A debug build without the console would open a window onto nothing.
    let help = cmd::stdout(Command::new(binary).arg("--help")).unwrap_or_default();
    if !help.contains("Console: built into this binary.") {
        bail!(
            "{} carries no console: build it with SWITCHBOARD_UI_DIST=<ui/dist> or \
             --release (`cargo xtask dist` does)",
            binary.display()
        );
    }
    let stage = Stage::new(out, "switchboard-desktop")?;
    stage.binary(binary, "usr/bin/switchboard-desktop")?;
    stage.file(
        &packaging()
            .join("desktop")
            .join("switchboard-desktop.desktop"),
        "usr/share/applications/switchboard-desktop.desktop",
        0o644,
    )?;
    stage.file(
        &cmd::root().join("src-tauri").join("icons").join("icon.png"),
        "usr/share/icons/hicolor/128x128/apps/switchboard-desktop.png",
        0o644,
    )?;
    stage.docs()?;
    stage.control(&Control {
        section: "devel",
        // The tray icon's library is loaded at run time, so shlibdeps cannot see it.
        depends: &["libayatana-appindicator3-1"],
        binaries: &["usr/bin/switchboard-desktop"],
        summary: "desktop operations console for Switchboard agent inboxes",
        description: "A window onto an embedded Switchboard server: live inbox depth, \
                      leases, fencing rejections, the dead-letter quarantine and webhook \
                      registrations; replay, release or purge work; a tray icon that \
                      tells of quarantined work.",
    })?;
    stage.build()
}

/// The fields of `DEBIAN/control` that differ between the packages.
struct Control<'a> {
    section: &'a str,
    /// Beyond the shared libraries the binaries link.
    depends: &'a [&'a str],
    /// Staged binaries whose libraries `dpkg-shlibdeps` turns into `Depends`.
    binaries: &'a [&'a str],
    summary: &'a str,
    description: &'a str,
}

/// A package's file tree, under `<out>/<package>.stage`.
struct Stage {
    package: &'static str,
    arch: String,
    root: PathBuf,
    out: PathBuf,
}

impl Stage {
    fn new(out: &Path, package: &'static str) -> Result<Self> {
        let root = out.join(format!("{package}.stage"));
        if root.exists() {
            fs::remove_dir_all(&root).with_context(|| format!("clearing {}", root.display()))?;
        }
        fs::create_dir_all(root.join("DEBIAN"))?;
        Ok(Self {
            package,
            arch: architecture()?,
            root,
            out: out.to_path_buf(),
        })
    }

    fn path(&self, dest: &str) -> Result<PathBuf> {
        let path = self.root.join(dest);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        }
        Ok(path)
    }

    fn file(&self, src: &Path, dest: &str, mode: u32) -> Result<()> {
        let path = self.path(dest)?;
        fs::copy(src, &path)
            .with_context(|| format!("copying {} to {}", src.display(), path.display()))?;
        set_mode(&path, mode)
    }

    fn write(&self, dest: &str, text: &str, mode: u32) -> Result<()> {
        let path = self.path(dest)?;
        fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        set_mode(&path, mode)
    }

    /// A binary, without its debug information (as `dh_strip` leaves it).
    fn binary(&self, src: &Path, dest: &str) -> Result<()> {
        if !src.is_file() {
            bail!("{} is missing: build it first", src.display());
        }
        self.file(src, dest, 0o755)?;
        cmd::run(
            Command::new("strip")
                .arg("--strip-debug")
                .arg(self.root.join(dest)),
        )
    }

    /// `/usr/share/doc/<package>`: the README and the copyright file Debian asks for.
    fn docs(&self) -> Result<()> {
        let doc = format!("usr/share/doc/{}", self.package);
        self.file(
            &cmd::root().join("README.md"),
            &format!("{doc}/README.md"),
            0o644,
        )?;
        self.write(
            &format!("{doc}/copyright"),
            &format!(
                "Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/\n\
                 Upstream-Name: switchboard\n\n\
                 Files: *\n\
                 Copyright: the Switchboard developers\n\
                 License: {}\n \
                 On Debian systems, the full text of the Apache License 2.0 is in\n \
                 /usr/share/common-licenses/Apache-2.0.\n",
                env!("CARGO_PKG_LICENSE")
            ),
            0o644,
        )
    }

    /// `DEBIAN/control`, with `Depends` from `dpkg-shlibdeps` and the installed size.
    fn control(&self, control: &Control) -> Result<()> {
        let mut depends = shlibdeps(&self.root, self.package, control.binaries)?;
        depends.extend(control.depends.iter().map(|d| d.to_string()));
        let installed_kib = disk_usage(&self.root)? / 1024 + 1;
        let description: String = wrap(control.description, 76)
            .iter()
            .map(|line| format!(" {line}\n"))
            .collect();
        self.write(
            "DEBIAN/control",
            &format!(
                "Package: {package}\n\
                 Version: {version}\n\
                 Architecture: {arch}\n\
                 Maintainer: Switchboard developers <switchboard@localhost>\n\
                 Installed-Size: {installed_kib}\n\
                 Depends: {depends}\n\
                 Section: {section}\n\
                 Priority: optional\n\
                 Description: {summary}\n{description}",
                package = self.package,
                version = version(),
                arch = self.arch,
                depends = depends.join(", "),
                section = control.section,
                summary = control.summary,
            ),
            0o644,
        )
    }

    /// `dpkg-deb --build`, files owned by root, into Debian's file name
    /// `<package>_<version>_<arch>.deb`; returns its path.
    fn build(self) -> Result<PathBuf> {
        let deb = self
            .out
            .join(format!("{}_{}_{}.deb", self.package, version(), self.arch));
        cmd::run(
            Command::new("dpkg-deb")
                .args(["--root-owner-group", "-Zxz", "--build"])
                .arg(&self.root)
                .arg(&deb),
        )?;
        fs::remove_dir_all(&self.root)?;
        Ok(deb)
    }
}

/// The `shlibs:Depends` of `binaries` (paths in `root`), from `dpkg-shlibdeps`. It
/// reads `debian/control`, so it runs beside a minimal one.
fn shlibdeps(root: &Path, package: &str, binaries: &[&str]) -> Result<Vec<String>> {
    let work = root.with_extension("shlibdeps");
    fs::create_dir_all(work.join("debian"))?;
    fs::write(
        work.join("debian").join("control"),
        format!("Source: {package}\n\nPackage: {package}\nArchitecture: any\n"),
    )?;
    let mut command = Command::new("dpkg-shlibdeps");
    command.arg("-O").current_dir(&work);
    for binary in binaries {
        command.arg(format!("-e{}", root.join(binary).display()));
    }
    let output = command
        .output()
        .context("could not run dpkg-shlibdeps (Debian package dpkg-dev)")?;
    let _ = fs::remove_dir_all(&work);
    if !output.status.success() {
        bail!(
            "dpkg-shlibdeps failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let depends = stdout
        .lines()
        .find_map(|line| line.strip_prefix("shlibs:Depends="))
        .context("dpkg-shlibdeps printed no shlibs:Depends")?;
    Ok(depends.split(", ").map(str::to_owned).collect())
}

/// Bytes of the files under `root`, `DEBIAN/` excluded.
fn disk_usage(root: &Path) -> Result<u64> {
    let mut total = 0;
    let mut dirs = vec![root.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir)? {
            let entry = entry?;
            let meta = entry.metadata()?;
            if meta.is_dir() {
                if entry.file_name() != "DEBIAN" {
                    dirs.push(entry.path());
                }
            } else {
                total += meta.len();
            }
        }
    }
    Ok(total)
}

/// `text` in lines of at most `width` characters, at spaces.
fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().expect("one line at least");
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_owned());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}

fn set_mode(path: &Path, mode: u32) -> Result<()> {
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("setting the mode of {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::{architecture, server_deb, version, wrap};
    use std::process::Command;

    fn dpkg_deb(args: &[&str], deb: &std::path::Path) -> String {
        let out = Command::new("dpkg-deb")
            .args(args)
            .arg(deb)
            .output()
            .unwrap();
        assert!(out.status.success(), "dpkg-deb {args:?}");
        String::from_utf8(out.stdout).unwrap()
    }

    /// The server package around a stand-in binary: Debian's file name, every file
    /// in its place, `Depends` from shlibdeps plus adduser, no stage left behind.
    #[test]
    fn a_server_package_carries_its_files_and_fields() {
        let out = std::env::temp_dir().join(format!("xtask-dist-{}", std::process::id()));
        std::fs::create_dir_all(&out).unwrap();
        let deb = server_deb(std::path::Path::new("/bin/true"), &out).unwrap();
        let name = format!("switchboard_{}_{}.deb", version(), architecture().unwrap());
        assert_eq!(deb, out.join(name));
        let contents = dpkg_deb(&["--contents"], &deb);
        for path in [
            "./usr/bin/switchboard",
            "./usr/lib/systemd/system/switchboard.service",
            "./etc/switchboard/switchboard.toml",
            "./usr/share/doc/switchboard/copyright",
        ] {
            assert!(contents.contains(path), "{path} in {contents}");
        }
        let depends = dpkg_deb(&["--field"], &deb);
        assert!(depends.contains("Depends: libc6"), "{depends}");
        assert!(depends.contains(", adduser\n"), "{depends}");
        assert!(!out.join("switchboard.stage").exists());
        std::fs::remove_dir_all(&out).unwrap();
    }

    #[test]
    fn descriptions_wrap_at_spaces() {
        assert_eq!(
            wrap("one two three four", 9),
            vec!["one two", "three", "four"]
        );
        assert_eq!(
            wrap("averyveryverylongword x", 5),
            vec!["averyveryverylongword", "x"]
        );
    }
}
