//! The layer check's own tests: fixtures in a temporary folder, and the workspace.

use super::*;

/// A crate in a temporary folder: `(path, text)` per file.
fn fixture(files: &[(&str, &str)]) -> (tempdir::Dir, Graph) {
    let dir = tempdir::Dir::new();
    for (path, text) in files {
        let path = dir.0.join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }
    let graph = Graph::read(&dir.0).expect("read");
    (dir, graph)
}

mod tempdir {
    pub(super) struct Dir(pub(super) std::path::PathBuf);
    impl Dir {
        pub(super) fn new() -> Self {
            let n = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .expect("time")
                .as_nanos();
            let path =
                std::env::temp_dir().join(format!("xtask-layers-{}-{n}", std::process::id()));
            std::fs::create_dir_all(&path).expect("mkdir");
            Self(path)
        }
    }
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

#[test]
fn a_cycle_between_siblings_is_found_at_its_level() {
    let (_dir, graph) = fixture(&[
        ("lib.rs", "mod http; mod store;"),
        ("http/mod.rs", "mod auth; mod session;"),
        ("http/auth.rs", "use super::session::Cookie;"),
        (
            "http/session.rs",
            "use crate::http::{auth::Principal, other};",
        ),
        ("store.rs", "use crate::http::auth; // crate::nothing"),
    ]);
    let cycles = graph.cycles();
    assert_eq!(
        cycles,
        vec![(
            "http".to_owned(),
            vec!["auth".to_owned(), "session".to_owned()]
        )]
    );
}

#[test]
fn test_code_and_comments_make_no_arrow() {
    let (_dir, graph) = fixture(&[
        ("lib.rs", "mod a; mod b;\n#[cfg(test)]\nmod tests;"),
        ("a.rs", "use crate::b::X;"),
        (
            "b.rs",
            "// use crate::a::Y;\n#[cfg(test)]\nmod tests {\n    use crate::a::Y;\n}\n",
        ),
        ("tests.rs", "use crate::a::Z; use crate::b::Z;"),
    ]);
    assert!(graph.cycles().is_empty(), "{:?}", graph.cycles());
}

#[test]
fn an_upward_import_and_an_unlisted_module_are_reported() {
    let layers: &[(&str, &[&str])] = &[("top", &["http"]), ("bottom", &["config"])];
    let (_dir, graph) = fixture(&[
        ("lib.rs", "pub mod http; pub mod config; pub mod stray;"),
        ("http/mod.rs", "use crate::config::Config;"),
        ("config.rs", "pub use crate::http::rate_limit::RateLimit;"),
        ("stray.rs", ""),
    ]);
    let found = upward(&graph, layers);
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("config.rs (layer bottom) imports `http` (layer top"));
    assert!(found[1].contains("module `stray` is in no layer"));
}

#[test]
fn http_reaching_the_store_is_reported_by_import_and_by_field() {
    let rules = &[("http", "store", "use app")];
    let (_dir, graph) = fixture(&[
        ("lib.rs", "mod http; mod store; mod app;"),
        ("http/mod.rs", "mod a; mod b; mod c;"),
        ("http/a.rs", "use crate::store::Thing;"),
        (
            "http/b.rs",
            "async fn f(state: S) { state.store.agent().await; }",
        ),
        // Near misses: a header value, a use case, a test.
        (
            "http/c.rs",
            "const C: &str = \"no-store\"; fn g() { crate::app::inbox::claim(); }\n\
             #[cfg(test)] mod tests { fn t(s: S) { s.store.x(); } }",
        ),
        ("app/mod.rs", "fn h(state: S) { state.store.agent(); }"),
        ("store/mod.rs", ""),
    ]);
    let found = forbidden(&graph, rules);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("http/a.rs imports `store`"), "{found:#?}");
    assert!(
        found[1].contains("http/b.rs reaches `.store`"),
        "{found:#?}"
    );
}

#[test]
fn a_macro_s_crate_path_is_an_arrow_too() {
    let (_dir, graph) = fixture(&[
        ("lib.rs", "mod dialect; mod engine;"),
        (
            "dialect.rs",
            "macro_rules! stmt { () => { $crate::engine::Driver::X }; }",
        ),
        (
            "engine.rs",
            "use crate::dialect::Dialect; pub trait Driver {}",
        ),
    ]);
    let cycles = graph.cycles();
    assert_eq!(cycles.len(), 1, "{cycles:?}");
    assert_eq!(cycles[0].1, ["dialect", "engine"]);
}

#[test]
fn super_paths_resolve_from_the_files_module() {
    let here = ["http".to_owned(), "oauth".to_owned(), "token".to_owned()];
    let code = "use super::super::auth::hash; use super::{form, issuer};";
    let mut found = paths_named(code, &here);
    found.sort();
    let path = |p: &[&str]| p.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        found,
        vec![
            path(&["http", "auth", "hash"]),
            path(&["http", "oauth", "form"]),
            path(&["http", "oauth", "issuer"]),
        ]
    );
}

/// The workspace itself keeps the rule (what `cargo xtask test` runs).
#[test]
fn the_workspace_keeps_the_layer_rule() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    check(&root).expect("the layer rule holds");
}
