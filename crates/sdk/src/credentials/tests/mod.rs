//! The token store over keyring-core's mock store and a real profiles file in a temp
//! dir; the environment through a lookup function, never the process environment.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use keyring_core::{CredentialStore, Entry, mock};

use super::*;

mod env;
mod profiles;
mod secrecy;

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
        region: None,
        signing_key: None,
    };
    let hooks: [Arc<dyn Refresh>; 2] = [Arc::new(NoRefresh), Arc::new(Rotate)];
    assert!(hooks[0].refresh(&current).await.unwrap().is_none());
    assert_eq!(
        hooks[1].refresh(&current).await.unwrap().unwrap().expose(),
        "t1-next"
    );
}

#[test]
fn the_forced_keyring_is_one_of_the_known_names() {
    assert_eq!(os::parse("keyutils").unwrap(), Backend::Keyutils);
    assert_eq!(os::parse("secret-service").unwrap(), Backend::SecretService);
    let error = os::parse("gnome").unwrap_err().to_string();
    assert!(
        error.contains("SWITCHBOARD_KEYRING is `gnome`") && error.contains("keyutils"),
        "{error}"
    );
    let other = if cfg!(target_os = "linux") {
        Backend::Keychain
    } else {
        Backend::Keyutils
    };
    assert!(matches!(
        os::open(other),
        Err(CredentialError::NoKeyring { .. })
    ));
    assert!(matches!(
        os::open(Backend::Custom),
        Err(CredentialError::NoKeyring { .. })
    ));
}

#[test]
fn credentials_make_a_client() {
    let login = Credentials {
        server: SERVER.to_owned(),
        token: Token::from(SECRET),
        region: None,
        signing_key: None,
    };
    login.client().expect("a client for a valid URL");
}
