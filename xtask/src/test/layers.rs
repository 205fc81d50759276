//! The layer rule, checked: no import cycle between the modules of any workspace
//! crate, at any level of the module tree, and no module of the server importing
//! one of a layer above its own ([`SERVER_LAYERS`], the order ARCHITECTURE.md
//! draws). The store is a crate of its own below the server, so Cargo already
//! refuses an import from the store into the server; this keeps the server's own
//! modules in one direction.
//!
//! An arrow is every `crate::…` (or `$crate::…`, in a macro), `super::…` and
//! `self::…` path a module's file names (grouped `use` lists included), as the module-cycles tool of the shared
//! library counts them. Test code (`#[cfg(test)] mod …`, `tests.rs`, `tests/`)
//! is left out: tests may reach anywhere.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::Path;

use anyhow::{Context, Result, bail};

mod source;
use source::*;

/// The crates whose modules must form no cycle.
pub(crate) const CRATES: &[&str] = &[
    "crates/proto/src",
    "crates/names/src",
    "crates/webhook/src",
    "crates/store/src",
    "crates/server/src",
    "crates/sdk/src",
    "crates/cli/src",
    "crates/broker/src",
];

/// The server's top-level modules, top layer first. A module may import its own
/// layer (without a cycle) or any layer below; never one above. The store crate
/// (re-exported as `store`, with its `clock`) is below them all.
pub(crate) const SERVER_LAYERS: &[(&str, &[&str])] = &[
    ("composition", &["server", "embed", "doctor"]),
    ("http", &["http"]),
    ("workers", &["workers"]),
    ("application", &["app"]),
    (
        "services",
        &["webhooks", "oauth", "history", "names_import"],
    ),
    (
        "shared",
        &["access", "sealing", "hub", "metrics", "archive", "tls"],
    ),
    ("settings", &["config", "hooks", "error"]),
    ("store", &["store", "clock"]),
];

/// Arrows forbidden even where the order allows them: `(from, to, why)`. The HTTP
/// layer translates requests and answers, and the desktop app's handle (`embed`)
/// reads what its tray shows; every read and write of either goes through the
/// application's use cases (`app/`), so neither imports the store nor reaches it
/// through the application state's field (`state.store`).
pub(crate) const FORBIDDEN: &[(&str, &str, &str)] = &[
    (
        "http",
        "store",
        "call the use case in app/ (add one there) instead of the store",
    ),
    (
        "embed",
        "store",
        "the embedding app reads through the use cases in app/, like the HTTP API",
    ),
];

/// Runs both checks from the workspace root.
pub(crate) fn check(root: &Path) -> Result<()> {
    let mut problems = Vec::new();
    for dir in CRATES {
        let src = root.join(dir);
        let graph = Graph::read(&src)?;
        for (folder, cycle) in graph.cycles() {
            problems.push(format!(
                "{dir}: import cycle in `{folder}`: {}",
                cycle.join(" <-> ")
            ));
        }
        if *dir == "crates/server/src" {
            problems.extend(upward(&graph, SERVER_LAYERS));
            problems.extend(forbidden(&graph, FORBIDDEN));
        }
    }
    if problems.is_empty() {
        eprintln!(
            "layers: no cycle in {} crates; the server's modules import downward only",
            CRATES.len()
        );
        Ok(())
    } else {
        for p in &problems {
            eprintln!("layers: {p}");
        }
        bail!(
            "{} layer problem(s): break each cycle by moving the shared piece below both \
             sides; for an upward import, move what is imported down, or what imports it up \
             (the order is SERVER_LAYERS in xtask/src/test/layers.rs and the picture in \
             ARCHITECTURE.md)",
            problems.len()
        )
    }
}

/// The desktop app links SQLite only: neither networked driver is in its tree.
pub(crate) fn sqlite_only_desktop() -> Result<()> {
    for driver in ["sqlx-postgres", "sqlx-mysql"] {
        let out = std::process::Command::new(env!("CARGO"))
            .args(["tree", "-p", "switchboard-desktop", "-i", driver])
            .args(["--edges", "normal,build", "--target", "all"])
            .current_dir(crate::cmd::root())
            .output()
            .context("running cargo tree")?;
        let tree = String::from_utf8_lossy(&out.stdout);
        if tree.contains(driver) {
            bail!(
                "the desktop app links {driver}:\n{tree}\nbuild switchboard-server without \
                 its default features there (src-tauri/Cargo.toml)"
            );
        }
    }
    eprintln!("layers: the desktop app links no PostgreSQL or MySQL driver");
    Ok(())
}

/// The server's arrows between top-level modules that point up, or name a module
/// no layer lists.
fn upward(graph: &Graph, layers: &[(&str, &[&str])]) -> Vec<String> {
    let layer_of = |m: &str| layers.iter().position(|(_, mods)| mods.contains(&m));
    let mut found = BTreeSet::new();
    for top in graph.modules.iter().filter_map(|m| m.first()) {
        if layer_of(top).is_none() {
            found.insert(format!(
                "crates/server/src: module `{top}` is in no layer: add it to SERVER_LAYERS \
                 (xtask/src/test/layers.rs) and to ARCHITECTURE.md's picture"
            ));
        }
    }
    for (from, to, file) in &graph.arrows {
        let (Some(a), Some(b)) = (from.first(), to.first()) else {
            continue;
        };
        if a == b {
            continue;
        }
        if let (Some(la), Some(lb)) = (layer_of(a), layer_of(b))
            && lb < la
        {
            found.insert(format!(
                "crates/server/src: {file} (layer {}) imports `{b}` (layer {}, above it)",
                layers[la].0, layers[lb].0
            ));
        }
    }
    found.into_iter().collect()
}

/// The forbidden arrows `graph` has: an import of the module, or a use of a field
/// of that name (`state.store`) in the module's code.
fn forbidden(graph: &Graph, rules: &[(&str, &str, &str)]) -> Vec<String> {
    let mut found = BTreeSet::new();
    for (from, to, why) in rules {
        for (a, b, file) in &graph.arrows {
            if a.first().map(String::as_str) == Some(*from)
                && b.first().map(String::as_str) == Some(*to)
            {
                found.insert(format!(
                    "crates/server/src: {file} imports `{to}`, which `{from}` may not: {why}"
                ));
            }
        }
        for (module, file) in &graph.fields {
            if module.first().map(String::as_str) == Some(*from) && file.1.contains(*to) {
                found.insert(format!(
                    "crates/server/src: {} reaches `.{to}`, which `{from}` may not: {why}",
                    file.0
                ));
            }
        }
    }
    found.into_iter().collect()
}

/// A crate's modules and the arrows between them.
struct Graph {
    /// Every module with a file, by path (`["http", "auth"]`); the crate root is `[]`.
    modules: BTreeSet<Vec<String>>,
    /// From, to (a module, or an item inside one), and the file that names it.
    arrows: Vec<(Vec<String>, Vec<String>, String)>,
    /// Per module: its file, and the fields its code reads.
    fields: Vec<(Vec<String>, FieldsOf)>,
}

/// A file, and the fields and methods its code names.
type FieldsOf = (String, BTreeSet<String>);

impl Graph {
    fn read(src: &Path) -> Result<Self> {
        let mut files = Vec::new();
        rust_files(src, &mut files)?;
        let mut test_mods = HashSet::new();
        let mut texts = Vec::new();
        for path in files {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let here = module_of(src, &path);
            for name in test_declarations(&text) {
                let mut m = here.clone();
                m.push(name);
                test_mods.insert(m);
            }
            texts.push((path, here, text));
        }
        let mut modules = BTreeSet::new();
        let mut arrows = Vec::new();
        let mut fields = Vec::new();
        for (path, here, text) in texts {
            if (1..=here.len()).any(|i| test_mods.contains(&here[..i])) {
                continue;
            }
            let file = path
                .strip_prefix(src)
                .unwrap_or(&path)
                .display()
                .to_string();
            let code = strip_tests_and_comments(&text);
            for target in paths_named(&code, &here) {
                arrows.push((here.clone(), target, file.clone()));
            }
            fields.push((here.clone(), (file, fields_named(&code))));
            modules.insert(here);
        }
        Ok(Self {
            modules,
            arrows,
            fields,
        })
    }

    /// The cycles between siblings, by the folder that holds them.
    fn cycles(&self) -> Vec<(String, Vec<String>)> {
        let prefixes: BTreeSet<&[String]> = self
            .modules
            .iter()
            .flat_map(|m| (0..=m.len()).map(move |i| &m[..i]))
            .collect();
        let mut by_folder: BTreeMap<Vec<String>, BTreeMap<String, BTreeSet<String>>> =
            BTreeMap::new();
        for (a, b, _) in &self.arrows {
            // An item inside a module: keep the module.
            let mut b = b.as_slice();
            while !b.is_empty() && !prefixes.contains(b) {
                b = &b[..b.len() - 1];
            }
            let k = a.iter().zip(b).take_while(|(x, y)| x == y).count();
            if k >= a.len() || k >= b.len() {
                continue; // one contains the other: not between siblings
            }
            by_folder
                .entry(a[..k].to_vec())
                .or_default()
                .entry(a[k].clone())
                .or_default()
                .insert(b[k].clone());
        }
        let mut found = Vec::new();
        for (folder, graph) in by_folder {
            for mut component in strongly_connected(&graph) {
                component.sort();
                let name = if folder.is_empty() {
                    "crate".to_owned()
                } else {
                    folder.join("::")
                };
                found.push((name, component));
            }
        }
        found
    }
}

/// The strongly connected components of more than one node (Tarjan).
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        on_stack: HashSet<&'g str>,
        out: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            let n = self.index.len();
            self.index.insert(v, n);
            self.low.insert(v, n);
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(lw);
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low.get_mut(v).expect("visited");
                    *lv = (*lv).min(iw);
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_owned());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    self.out.push(component);
                }
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: HashSet::new(),
        out: Vec::new(),
    };
    let nodes: BTreeSet<&str> = graph
        .iter()
        .flat_map(|(k, vs)| std::iter::once(k.as_str()).chain(vs.iter().map(String::as_str)))
        .collect();
    for v in nodes {
        if !t.index.contains_key(v) {
            t.visit(v);
        }
    }
    t.out
}

#[cfg(test)]
mod tests;
