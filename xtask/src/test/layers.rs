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
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};

/// The crates whose modules must form no cycle.
pub(crate) const CRATES: &[&str] = &[
    "crates/proto/src",
    "crates/names/src",
    "crates/webhook/src",
    "crates/store/src",
    "crates/server/src",
    "crates/sdk/src",
    "crates/cli/src",
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

/// The fields and methods (`.name`) that `code` names.
fn fields_named(code: &str) -> BTreeSet<String> {
    let bytes = code.as_bytes();
    let ident = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'.' && i > 0 && (ident(bytes[i - 1]) || bytes[i - 1] == b')') {
            let start = i + 1;
            let mut end = start;
            while end < bytes.len() && ident(bytes[end]) {
                end += 1;
            }
            if end > start && !bytes[start].is_ascii_digit() {
                out.insert(code[start..end].to_owned());
            }
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    out
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

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if name != "tests" {
                rust_files(&path, out)?;
            }
        } else if name.ends_with(".rs") && name != "tests.rs" && !name.ends_with("_tests.rs") {
            out.push(path);
        }
    }
    Ok(())
}

/// The module a file is (`mod.rs`, `lib.rs` and `main.rs` are their folder's).
fn module_of(src: &Path, path: &Path) -> Vec<String> {
    let rel = path.strip_prefix(src).unwrap_or(path).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts
        .last()
        .is_some_and(|l| matches!(l.as_str(), "mod" | "lib" | "main"))
    {
        parts.pop();
    }
    parts
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `name` of each `#[cfg(test)] mod name;` (its file is test code).
fn test_declarations(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (at, _) in text.match_indices("#[cfg(test)]") {
        let rest = text[at + "#[cfg(test)]".len()..].trim_start();
        let rest = skip_visibility(rest);
        if let Some(rest) = rest.strip_prefix("mod ") {
            let name: String = rest
                .trim_start()
                .bytes()
                .take_while(|b| is_ident(*b))
                .map(char::from)
                .collect();
            if rest.trim_start()[name.len()..]
                .trim_start()
                .starts_with(';')
            {
                out.push(name);
            }
        }
    }
    out
}

fn skip_visibility(s: &str) -> &str {
    match s.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => {
            rest.find(')').map_or(rest, |i| rest[i + 1..].trim_start())
        }
        Some(rest) if rest.starts_with(' ') => rest.trim_start(),
        _ => s,
    }
}

/// The text without `#[cfg(test)] mod … { … }` blocks and `//` comments.
fn strip_tests_and_comments(text: &str) -> String {
    let mut kept = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(found) = text[i..].find("#[cfg(test)]") {
        let at = i + found;
        let after = &text[at + "#[cfg(test)]".len()..];
        let rest = skip_visibility(after.trim_start());
        let inline_mod = rest.strip_prefix("mod ").and_then(|r| {
            let r = r.trim_start();
            let name_len = r.bytes().take_while(|b| is_ident(*b)).count();
            r[name_len..].trim_start().starts_with('{').then_some(())
        });
        kept.push_str(&text[i..at]);
        match inline_mod {
            Some(()) => {
                let open = at + text[at..].find('{').unwrap_or(0);
                let mut depth = 0usize;
                let mut end = text.len();
                for (j, b) in text.bytes().enumerate().skip(open) {
                    match b {
                        b'{' => depth += 1,
                        b'}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = j + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                i = end;
            }
            None => {
                kept.push_str("#[cfg(test)]");
                i = at + "#[cfg(test)]".len();
            }
        }
    }
    kept.push_str(&text[i..]);
    kept.lines()
        .map(|line| line.find("//").map_or(line, |c| &line[..c]))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths `code` (of the module `here`) names: `crate::a::b`,
/// `super::x`, `self::y`, and each item of `use crate::{a, b::c}`.
fn paths_named(code: &str, here: &[String]) -> Vec<Vec<String>> {
    let bytes = code.as_bytes();
    let mut out = Vec::new();
    for kind in ["crate", "super", "self"] {
        let mut from = 0;
        while let Some(found) = code[from..].find(kind) {
            let at = from + found;
            from = at + kind.len();
            // `$crate::…` (in a macro) is an arrow like `crate::…`: the module that
            // expands the macro depends on what it names.
            if at > 0 && is_ident(bytes[at - 1]) {
                continue;
            }
            // `super::super::x` is read once, from its first `super`.
            if kind == "super" && at >= 2 && &code[at - 2..at] == "::" {
                continue;
            }
            let (segments, end) = segments_after(code, at);
            if segments.len() < 2 || segments[0] != kind {
                continue;
            }
            let base = resolve(&segments, here);
            if code[end..].starts_with("::{") {
                for item in group_items(code, end + 3) {
                    let mut target = base.clone();
                    target.push(item);
                    out.push(target);
                }
            } else {
                out.push(base);
            }
        }
        // `use crate::{a, b}` (no segment before the brace).
        let mut from = 0;
        let open = format!("{kind}::{{");
        while let Some(found) = code[from..].find(&open) {
            let at = from + found;
            from = at + open.len();
            if at > 0 && (is_ident(bytes[at - 1]) || bytes[at - 1] == b':') {
                continue;
            }
            let base = resolve(&[kind.to_owned()], here);
            for item in group_items(code, at + open.len()) {
                let mut target = base.clone();
                target.push(item);
                out.push(target);
            }
        }
    }
    out
}

/// The `::`-separated identifiers from `at`, and where they end.
fn segments_after(code: &str, at: usize) -> (Vec<String>, usize) {
    let bytes = code.as_bytes();
    let mut segments = Vec::new();
    let mut i = at;
    loop {
        let start = i;
        while i < bytes.len() && is_ident(bytes[i]) {
            i += 1;
        }
        if i == start {
            break;
        }
        segments.push(code[start..i].to_owned());
        if code[i..].starts_with("::") && bytes.get(i + 2).is_some_and(|b| is_ident(*b)) {
            i += 2;
        } else {
            break;
        }
    }
    (segments, i)
}

/// The first identifier of each top-level item of the `{ … }` group opening
/// before `start`.
fn group_items(code: &str, start: usize) -> Vec<String> {
    let mut items = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in code[start..].chars() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => break,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                items.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    items.push(current);
    items
        .iter()
        .filter_map(|item| {
            let item = item.trim_start();
            let name: String = item
                .bytes()
                .take_while(|b| is_ident(*b))
                .map(char::from)
                .collect();
            (!name.is_empty() && !matches!(name.as_str(), "self" | "super" | "crate"))
                .then_some(name)
        })
        .collect()
}

/// A path's module path: `crate::a` is `[a]`; `self::a` is `here + [a]`; each
/// `super` goes up one from `here`.
fn resolve(segments: &[String], here: &[String]) -> Vec<String> {
    match segments.first().map(String::as_str) {
        Some("crate") => segments[1..].to_vec(),
        Some("self") => here.iter().chain(&segments[1..]).cloned().collect(),
        _ => {
            let ups = segments.iter().take_while(|s| *s == "super").count();
            let base = &here[..here.len().saturating_sub(ups)];
            base.iter().chain(&segments[ups..]).cloned().collect()
        }
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
