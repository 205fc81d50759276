//! The environment override and the lookup order.

use super::*;
use crate::credentials::env::{from_lookup, resolve_with};

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
