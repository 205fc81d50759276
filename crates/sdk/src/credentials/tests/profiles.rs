//! The profiles file: mode, contents, compatibility, errors, location.

use super::*;

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
fn profiles_path_follows_xdg_then_home() {
    use std::ffi::OsString;
    let lookup = |vars: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        }
    };
    let path = crate::credentials::profiles::path_from(lookup(&[
        ("XDG_CONFIG_HOME", "/x/cfg"),
        ("HOME", "/h"),
    ]));
    assert_eq!(
        path.unwrap(),
        PathBuf::from("/x/cfg/switchboard/profiles.toml")
    );
    let path = crate::credentials::profiles::path_from(lookup(&[
        ("XDG_CONFIG_HOME", "relative"),
        ("HOME", "/h"),
    ]));
    assert_eq!(
        path.unwrap(),
        PathBuf::from("/h/.config/switchboard/profiles.toml"),
        "XDG paths must be absolute"
    );
    let path =
        crate::credentials::profiles::path_from(lookup(&[("XDG_CONFIG_HOME", ""), ("HOME", "/h")]));
    assert_eq!(
        path.unwrap(),
        PathBuf::from("/h/.config/switchboard/profiles.toml")
    );
    if !cfg!(windows) {
        assert!(matches!(
            crate::credentials::profiles::path_from(lookup(&[])),
            Err(CredentialError::NoConfigDir)
        ));
    }
}
