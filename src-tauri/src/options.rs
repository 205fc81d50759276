//! Command-line options of the desktop binary.

use std::ffi::OsString;
use std::path::PathBuf;

use anyhow::{Context as _, bail};
use tauri::Url;

use crate::Smoke;

const USAGE: &str = "\
usage: switchboard-desktop [--server-url URL] [--broker-policy FILE]
                           [--broker-socket PATH] [--smoke-test [SCREENSHOT.png]]

  --server-url URL     open the console of a remote `switchboard serve` instead of
                       starting the embedded server: sign in through your browser
                       (the server asks you to allow the app), or pass a one-time
                       link (/login?ticket=...) it printed as URL
  --broker-policy FILE run the local token broker with this policy (as
                       `switchboard agent broker --policy`); without it the broker
                       runs when $XDG_CONFIG_HOME/switchboard/broker.toml exists
  --broker-socket PATH its socket [default: $XDG_RUNTIME_DIR/switchboard/broker.sock]
  --smoke-test [PATH]  open the window, wait for the console to render, save a
                       screenshot of the X root window to PATH (if given and
                       ImageMagick's `import` exists), then quit; exit 0 on success

Environment: SWITCHBOARD_UI_DIR (the built console), RUST_LOG; for the broker
SWITCHBOARD_BROKER_POLICY, SWITCHBOARD_BROKER_SOCKET, SWITCHBOARD_PROFILE (the
policy's default profile), SWITCHBOARD_CA_FILE.
For a server without a window use `switchboard serve`.";

/// Where the console comes from; `cargo xtask dist` packages only a binary that
/// carries it.
pub(crate) fn console_line() -> &'static str {
    if switchboard_server::http::console_embedded() {
        "Console: built into this binary."
    } else {
        "Console: not built in (a debug build): SWITCHBOARD_UI_DIR, else ui/dist of \
         the source tree."
    }
}

pub(crate) struct Options {
    pub(crate) smoke: Option<Smoke>,
    /// A remote server's console (http or https); `None` embeds the server.
    pub(crate) server_url: Option<Url>,
    /// The token broker's policy and socket (`None`: the variables, the defaults).
    pub(crate) broker_policy: Option<PathBuf>,
    pub(crate) broker_socket: Option<PathBuf>,
}

impl Options {
    /// Parses the arguments; `None` means help was printed.
    pub(crate) fn parse(args: impl IntoIterator<Item = OsString>) -> anyhow::Result<Option<Self>> {
        let mut args = args.into_iter().peekable();
        let mut smoke = None;
        let mut server_url = None;
        let (mut broker_policy, mut broker_socket) = (None, None);
        while let Some(arg) = args.next() {
            match arg.to_str() {
                Some("--smoke-test") => {
                    let screenshot = args
                        .next_if(|next| !next.to_string_lossy().starts_with("--"))
                        .map(PathBuf::from);
                    smoke = Some(Smoke::new(screenshot));
                }
                Some("--server-url") => {
                    let Some(value) = args.next() else {
                        bail!("--server-url needs a URL, e.g. http://10.0.0.5:7700/\n\n{USAGE}");
                    };
                    let value = value.to_string_lossy();
                    let url = Url::parse(&value)
                        .ok()
                        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
                        .with_context(|| {
                            format!("--server-url {value:?} is not an http(s) URL, e.g. http://10.0.0.5:7700/")
                        })?;
                    server_url = Some(url);
                }
                Some(flag @ ("--broker-policy" | "--broker-socket")) => {
                    let Some(value) = args.next() else {
                        bail!("{flag} needs a path\n\n{USAGE}");
                    };
                    let slot = if flag == "--broker-policy" {
                        &mut broker_policy
                    } else {
                        &mut broker_socket
                    };
                    *slot = Some(PathBuf::from(value));
                }
                Some("-h" | "--help") => {
                    println!("{USAGE}\n\n{}", console_line());
                    return Ok(None);
                }
                _ => bail!("unexpected argument {arg:?}\n\n{USAGE}"),
            }
        }
        Ok(Some(Self {
            smoke,
            server_url,
            broker_policy,
            broker_socket,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> anyhow::Result<Option<Options>> {
        Options::parse(args.iter().map(OsString::from))
    }

    #[test]
    fn no_arguments_is_a_normal_run() {
        let options = parse(&[]).unwrap().expect("not help");
        assert!(options.smoke.is_none());
    }

    #[test]
    fn smoke_test_takes_an_optional_screenshot_path() {
        let with = parse(&["--smoke-test", "shot.png"])
            .unwrap()
            .expect("not help");
        assert_eq!(
            with.smoke.unwrap().screenshot(),
            Some(std::path::Path::new("shot.png"))
        );
        let without = parse(&["--smoke-test"]).unwrap().expect("not help");
        assert_eq!(without.smoke.unwrap().screenshot(), None);
    }

    #[test]
    fn server_url_must_be_http() {
        let remote = parse(&["--server-url", "http://10.0.0.5:7700/"])
            .unwrap()
            .expect("not help");
        assert_eq!(
            remote.server_url.map(|u| u.to_string()).as_deref(),
            Some("http://10.0.0.5:7700/")
        );
        assert!(parse(&["--server-url", "file:///etc/passwd"]).is_err());
        assert!(parse(&["--server-url", "nonsense"]).is_err());
        assert!(parse(&["--server-url"]).is_err(), "the value is required");
    }

    #[test]
    fn broker_flags_take_paths() {
        let options = parse(&["--broker-policy", "p.toml", "--broker-socket", "s.sock"])
            .unwrap()
            .expect("not help");
        assert_eq!(options.broker_policy, Some(PathBuf::from("p.toml")));
        assert_eq!(options.broker_socket, Some(PathBuf::from("s.sock")));
        assert!(
            parse(&["--broker-policy"]).is_err(),
            "the value is required"
        );
    }

    #[test]
    fn unknown_arguments_are_errors() {
        assert!(parse(&["--bogus"]).is_err());
        assert!(parse(&["--help"]).unwrap().is_none());
    }
}
