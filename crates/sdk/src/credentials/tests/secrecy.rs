//! No token in any message, and messages that say what to do.

use super::*;
use crate::credentials::error::describe;

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
fn no_error_and_no_login_shows_the_token() {
    let f = Fixture::new();
    let login = Credentials {
        server: SERVER.to_owned(),
        token: Token::from(SECRET),
        region: None,
        signing_key: None,
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
