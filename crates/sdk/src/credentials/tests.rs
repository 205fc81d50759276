//! The token store over keyring-core's mock store and a real profiles file in a temp
//! dir; the environment through a lookup function, never the process environment.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use keyring_core::{CredentialStore, Entry, mock};

use super::env::{from_lookup, resolve_with};
use super::error::describe;
use super::*;

const SECRET: &str = "sb_ag_7Hq2mZpX9vLk3RtY8wNc4BdF";
const SERVER: &str = "http://127.0.0.1:7070";

struct Fixture {
    dir: tempfile::TempDir,
    keyring: Arc<CredentialStore>,
    store: TokenStore,
}

impl Fixture {
    fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let keyring: Arc<CredentialStore> = mock::Store::new().expect("mock store");
        let store = TokenStore::with_store(keyring.clone(), dir.path().join("cfg/profiles.toml"));
        Self {
            dir,
            keyring,
            store,
        }
    }

    fn path(&self) -> PathBuf {
        self.dir.path().join("cfg/profiles.toml")
    }

    /// The keyring entry of `profile`, looked at directly, not through the store.
    fn entry(&self, profile: &str) -> Entry {
        self.keyring.build(SERVICE, profile, None).expect("entry")
    }

    /// Makes the next call on `profile`'s entry fail with `error`.
    fn fail_next(&self, profile: &str, error: keyring_core::Error) {
        let entry = self.entry(profile);
        let cred: &mock::Cred = entry.as_any().downcast_ref().expect("a mock credential");
        cred.set_error(error);
    }
}

fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    move |name| vars.get(name).cloned()
}

/// Neither rendering of `value` may contain the secret.
fn assert_no_secret(value: &(impl std::fmt::Debug + std::fmt::Display)) {
    let (debug, display) = (format!("{value:?}"), value.to_string());
    assert!(!debug.contains(SECRET), "Debug leaks the token: {debug}");
    assert!(
        !display.contains(SECRET),
        "Display leaks the token: {display}"
    );
}

#[test]
fn save_then_load_returns_the_login() {
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap();
    let login = f.store.load("default").unwrap().expect("saved");
    assert_eq!(login.server, SERVER);
    assert_eq!(login.token.expose(), SECRET);
    assert_eq!(
        f.entry("default").get_password().unwrap(),
        SECRET,
        "the token is the keyring entry (service switchboard, user = profile)"
    );
    assert_eq!(f.store.profiles().unwrap(), ["default"]);
}

#[test]
fn saving_again_replaces_the_login() {
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from("old"))
        .unwrap();
    f.store
        .save("default", "https://sb.example", &Token::from(SECRET))
        .unwrap();
    let login = f.store.load("default").unwrap().unwrap();
    assert_eq!(
        (login.server.as_str(), login.token.expose()),
        ("https://sb.example", SECRET)
    );
}

#[test]
fn profiles_are_independent() {
    let f = Fixture::new();
    f.store.save("default", SERVER, &Token::from("a")).unwrap();
    f.store
        .save("ci", "https://ci.example", &Token::from("b"))
        .unwrap();
    assert_eq!(f.store.profiles().unwrap(), ["ci", "default"]);
    assert!(f.store.sign_out("ci").unwrap());
    assert_eq!(
        f.store.load("default").unwrap().unwrap().token.expose(),
        "a"
    );
    assert!(f.store.load("ci").unwrap().is_none());
}

#[test]
fn unknown_profile_loads_as_none() {
    let f = Fixture::new();
    assert!(
        f.store.load("default").unwrap().is_none(),
        "no profiles file yet"
    );
    f.store.save("other", SERVER, &Token::from(SECRET)).unwrap();
    assert!(f.store.load("default").unwrap().is_none());
}

#[test]
fn sign_out_purges_the_keyring_entry_and_the_profile() {
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap();
    assert!(
        f.store.sign_out("default").unwrap(),
        "something was removed"
    );
    assert!(
        matches!(
            f.entry("default").get_password(),
            Err(keyring_core::Error::NoEntry)
        ),
        "the keyring entry is gone"
    );
    let file = std::fs::read_to_string(f.path()).unwrap();
    assert!(!file.contains("default"), "the profile is gone: {file}");
    assert!(f.store.load("default").unwrap().is_none());
    assert!(
        !f.store.sign_out("default").unwrap(),
        "nothing left to remove"
    );
}

#[test]
fn sign_out_removes_a_token_without_a_profile() {
    let f = Fixture::new();
    f.entry("default").set_password(SECRET).unwrap();
    assert!(f.store.sign_out("default").unwrap());
    assert!(matches!(
        f.entry("default").get_password(),
        Err(keyring_core::Error::NoEntry)
    ));
}

#[test]
fn sign_out_deletes_every_duplicate_entry() {
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap();
    f.fail_next(
        "default",
        keyring_core::Error::Ambiguous(vec![f.entry("default")]),
    );
    assert!(f.store.sign_out("default").unwrap());
    assert!(matches!(
        f.entry("default").get_password(),
        Err(keyring_core::Error::NoEntry)
    ));
}

#[test]
fn a_refused_delete_keeps_the_profile_for_a_second_try() {
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap();
    f.fail_next(
        "default",
        keyring_core::Error::NoStorageAccess("locked".into()),
    );
    let error = f.store.sign_out("default").unwrap_err();
    assert!(
        matches!(
            error,
            CredentialError::Keyring {
                action: "delete",
                ..
            }
        ),
        "{error:?}"
    );
    assert_eq!(f.store.profiles().unwrap(), ["default"]);
    assert!(f.store.sign_out("default").unwrap());
}

#[test]
fn a_profile_whose_token_is_gone_says_so() {
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap();
    f.entry("default").delete_credential().unwrap(); // e.g. keyutils after a reboot
    let error = f.store.load("default").unwrap_err();
    assert!(
        matches!(error, CredentialError::TokenMissing { .. }),
        "{error:?}"
    );
    assert!(
        error.to_string().contains("switchboard agent login"),
        "{error}"
    );
}

#[test]
fn a_failed_keyring_write_leaves_no_profile() {
    let f = Fixture::new();
    f.fail_next(
        "default",
        keyring_core::Error::NoStorageAccess("locked".into()),
    );
    let error = f
        .store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap_err();
    assert!(
        error.to_string().contains("access denied (locked)"),
        "{error}"
    );
    assert!(
        !f.path().exists(),
        "the server is written only after the token"
    );
}

#[cfg(unix)]
#[test]
fn profiles_file_is_private_and_holds_no_token() {
    use std::os::unix::fs::PermissionsExt;
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap();
    let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&f.path()), 0o600);
    assert_eq!(mode(f.path().parent().unwrap()), 0o700);
    let text = std::fs::read_to_string(f.path()).unwrap();
    assert!(
        !text.contains(SECRET),
        "the token stays in the keyring: {text}"
    );
    assert_eq!(
        text.trim(),
        format!("[profiles.default]\nserver = \"{SERVER}\"")
    );

    // A file someone made world-readable is private again after the next save.
    std::fs::set_permissions(f.path(), std::fs::Permissions::from_mode(0o644)).unwrap();
    f.store.save("ci", SERVER, &Token::from(SECRET)).unwrap();
    assert_eq!(mode(&f.path()), 0o600);
    let leftovers: Vec<_> = std::fs::read_dir(f.path().parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        leftovers,
        ["profiles.toml"],
        "no temporary file is left behind"
    );
}

#[test]
fn unknown_members_of_the_profiles_file_survive_a_rewrite() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.path().parent().unwrap()).unwrap();
    std::fs::write(
        f.path(),
        "version = 2\n[profiles.default]\nserver = \"http://a\"\ncolor = \"blue\"\n",
    )
    .unwrap();
    f.store.save("ci", SERVER, &Token::from(SECRET)).unwrap();
    let text = std::fs::read_to_string(f.path()).unwrap();
    assert!(
        text.contains("version = 2") && text.contains("color = \"blue\""),
        "{text}"
    );
}

#[test]
fn a_broken_profiles_file_names_the_line_not_the_contents() {
    let f = Fixture::new();
    std::fs::create_dir_all(f.path().parent().unwrap()).unwrap();
    std::fs::write(
        f.path(),
        "[profiles.default]\nserver = \"unterminated_value\n",
    )
    .unwrap();
    let error = f.store.load("default").unwrap_err().to_string();
    assert!(
        error.contains("line 2") && error.contains("profiles.toml"),
        "{error}"
    );
    assert!(!error.contains("unterminated_value"), "{error}");
}

#[test]
fn bad_server_urls_are_refused_without_being_repeated() {
    let f = Fixture::new();
    for server in [
        "10.0.0.1:7070",
        "localhost:7070",
        "ftp://example.com",
        "http://user:pw@example.com",
        "file:///tmp/x",
        SECRET, // --server and --token swapped
    ] {
        let error = f
            .store
            .save("default", server, &Token::from(SECRET))
            .unwrap_err();
        assert!(
            matches!(error, CredentialError::InvalidServer { .. }),
            "{server}: {error:?}"
        );
        assert!(!error.to_string().contains(server), "{error}");
        assert_no_secret(&error);
    }
    assert!(!f.path().exists());
    assert!(matches!(
        f.entry("default").get_password(),
        Err(keyring_core::Error::NoEntry)
    ));
}

#[test]
fn bad_profile_names_and_empty_tokens_are_refused() {
    let f = Fixture::new();
    for profile in ["", "a b", "x/y", "ü", &"p".repeat(65)] {
        let error = f
            .store
            .save(profile, SERVER, &Token::from(SECRET))
            .unwrap_err();
        assert!(
            matches!(error, CredentialError::InvalidProfile { .. }),
            "{profile:?}"
        );
        assert!(f.store.load(profile).is_err() && f.store.sign_out(profile).is_err());
    }
    for ok in ["default", "ci-2", "prod.eu_1", &"p".repeat(64)] {
        check_profile(ok).unwrap();
    }
    let empty = f
        .store
        .save("default", SERVER, &Token::from("  "))
        .unwrap_err();
    assert!(matches!(empty, CredentialError::EmptyToken));
}

#[test]
fn env_needs_both_variables() {
    assert!(from_lookup(env(&[])).unwrap().is_none());
    assert!(
        from_lookup(env(&[(SERVER_VAR, ""), (TOKEN_VAR, " ")]))
            .unwrap()
            .is_none()
    );

    let only_token = from_lookup(env(&[(TOKEN_VAR, SECRET)])).unwrap_err();
    assert!(matches!(
        only_token,
        CredentialError::EnvIncomplete {
            present: TOKEN_VAR,
            missing: SERVER_VAR
        }
    ));
    assert_no_secret(&only_token);
    let only_server = from_lookup(env(&[(SERVER_VAR, SERVER), (TOKEN_VAR, "")])).unwrap_err();
    assert!(
        only_server
            .to_string()
            .starts_with("SWITCHBOARD_SERVER is set but SWITCHBOARD_TOKEN is not")
    );

    let bad = from_lookup(env(&[(SERVER_VAR, "nope"), (TOKEN_VAR, SECRET)])).unwrap_err();
    assert!(bad.to_string().contains("in SWITCHBOARD_SERVER"), "{bad}");

    let login = from_lookup(env(&[
        (SERVER_VAR, SERVER),
        (TOKEN_VAR, &format!("{SECRET}\n")),
    ]))
    .unwrap()
    .unwrap();
    assert_eq!(
        (login.server.as_str(), login.token.expose()),
        (SERVER, SECRET)
    );
}

#[test]
fn env_wins_over_the_store_and_the_store_over_nothing() {
    let f = Fixture::new();
    f.store
        .save("default", SERVER, &Token::from("stored"))
        .unwrap();
    let from_env = from_lookup(env(&[
        (SERVER_VAR, "https://ci.example"),
        (TOKEN_VAR, SECRET),
    ]))
    .unwrap();

    let login = resolve_with(from_env, Some(&f.store), "default").unwrap();
    assert_eq!(
        (login.server.as_str(), login.token.expose()),
        ("https://ci.example", SECRET)
    );
    let login = resolve_with(None, Some(&f.store), "default").unwrap();
    assert_eq!(login.token.expose(), "stored");

    for store in [None, Some(&f.store)] {
        let error = resolve_with(None, store, "ci").unwrap_err();
        assert!(
            matches!(error, CredentialError::NotLoggedIn { .. }),
            "{error:?}"
        );
        let text = error.to_string();
        assert!(
            text.contains("switchboard agent login --server URL --token T")
                && text.contains("--profile ci")
                && text.contains("SWITCHBOARD_TOKEN"),
            "{text}"
        );
    }
}

#[test]
fn no_error_and_no_login_shows_the_token() {
    let f = Fixture::new();
    let login = Credentials {
        server: SERVER.to_owned(),
        token: Token::from(SECRET),
    };
    let shown = format!("{login:?}"); // Credentials is Debug only
    assert!(shown.contains(SERVER) && !shown.contains(SECRET), "{shown}");
    assert!(!format!("{:?}", f.store).contains(SECRET));

    // keyring-core's own errors can hold the stored bytes: they never get through.
    let carrying_the_secret = [
        keyring_core::Error::BadEncoding(SECRET.as_bytes().to_vec()),
        keyring_core::Error::BadDataFormat(SECRET.as_bytes().to_vec(), "bad".into()),
    ];
    for error in carrying_the_secret {
        assert!(
            format!("{error:?}").contains("115, 98, 95"),
            "the raw error holds the bytes"
        );
        assert!(!describe(Backend::Mock, error).contains(SECRET));
    }
    f.store
        .save("default", SERVER, &Token::from(SECRET))
        .unwrap();
    f.fail_next(
        "default",
        keyring_core::Error::BadEncoding(SECRET.as_bytes().to_vec()),
    );
    let read = f.store.load("default").unwrap_err();
    assert!(
        format!("{read:?}").contains("sign out and log in again"),
        "{read:?}"
    );

    let errors = [
        read,
        CredentialError::NotLoggedIn {
            profile: "default".into(),
        },
        CredentialError::TokenMissing {
            profile: "default".into(),
            backend: Backend::Keyutils,
        },
        CredentialError::EnvIncomplete {
            present: TOKEN_VAR,
            missing: SERVER_VAR,
        },
        CredentialError::InvalidProfile {
            reason: "it is empty",
        },
        check_server(SECRET, || "for profile `default`".into()).unwrap_err(),
        CredentialError::EmptyToken,
        CredentialError::NoKeyring {
            reason: "no bus".into(),
        },
        super::error::keyring(
            Backend::SecretService,
            "save",
            "default",
            keyring_core::Error::Ambiguous(vec![]),
        ),
        CredentialError::NoConfigDir,
        CredentialError::Profiles {
            action: "reading",
            path: f.path(),
            detail: "denied".into(),
        },
        CredentialError::Refresh {
            reason: "login server down".into(),
        },
    ];
    for error in &errors {
        assert_no_secret(error);
    }
}

#[test]
fn profiles_path_follows_xdg_then_home() {
    use std::ffi::OsString;
    let lookup = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let path = profiles::path_from(lookup(&[("XDG_CONFIG_HOME", "/x/cfg"), ("HOME", "/h")]));
    assert_eq!(
        path.unwrap(),
        PathBuf::from("/x/cfg/switchboard/profiles.toml")
    );
    let path = profiles::path_from(lookup(&[("XDG_CONFIG_HOME", "relative"), ("HOME", "/h")]));
    assert_eq!(
        path.unwrap(),
        PathBuf::from("/h/.config/switchboard/profiles.toml"),
        "XDG paths must be absolute"
    );
    let path = profiles::path_from(lookup(&[("XDG_CONFIG_HOME", ""), ("HOME", "/h")]));
    assert_eq!(
        path.unwrap(),
        PathBuf::from("/h/.config/switchboard/profiles.toml")
    );
    if !cfg!(windows) {
        assert!(matches!(
            profiles::path_from(lookup(&[])),
            Err(CredentialError::NoConfigDir)
        ));
    }
}

#[test]
fn mock_backend_is_named_and_not_persistent() {
    let dir = tempfile::tempdir().unwrap();
    let store = TokenStore::mock(dir.path().join("p.toml"));
    assert_eq!(store.backend(), Backend::Mock);
    assert!(!store.backend().survives_reboot());
    assert!(Backend::SecretService.survives_reboot() && !Backend::Keyutils.survives_reboot());
    let moved = store.with_profiles_path(dir.path().join("q.toml"));
    assert_eq!(moved.profiles_path(), dir.path().join("q.toml"));
}

#[tokio::test]
async fn refresh_hooks_are_object_safe() {
    struct Rotate;
    #[async_trait]
    impl Refresh for Rotate {
        async fn refresh(&self, current: &Credentials) -> Result<Option<Token>, CredentialError> {
            Ok(Some(Token::from(format!(
                "{}-next",
                current.token.expose()
            ))))
        }
    }
    let current = Credentials {
        server: SERVER.to_owned(),
        token: Token::from("t1"),
    };
    let hooks: [Arc<dyn Refresh>; 2] = [Arc::new(NoRefresh), Arc::new(Rotate)];
    assert!(hooks[0].refresh(&current).await.unwrap().is_none());
    assert_eq!(
        hooks[1].refresh(&current).await.unwrap().unwrap().expose(),
        "t1-next"
    );
}

#[test]
fn access_denied_says_what_to_do_for_each_keyring() {
    let denied = || keyring_core::Error::NoStorageAccess("denied".into());
    let text = describe(Backend::SecretService, denied());
    assert!(
        text.contains("gnome-keyring-daemon --unlock")
            && text.contains("SWITCHBOARD_KEYRING=keyutils"),
        "{text}"
    );
    let text = describe(Backend::Keyutils, denied());
    assert!(text.contains("keyctl session - CMD"), "{text}");
}
