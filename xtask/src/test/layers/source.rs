//! Reading a crate's source as text, for the layer check: its files and their
//! modules, test code and comments left out, and the `crate::` / `super::` /
//! `self::` paths (and `.field`s) a module's code names.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

/// The fields and methods (`.name`) that `code` names.
pub(super) fn fields_named(code: &str) -> BTreeSet<String> {
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

pub(super) fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
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
pub(super) fn module_of(src: &Path, path: &Path) -> Vec<String> {
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

pub(super) fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// `name` of each `#[cfg(test)] mod name;` (its file is test code).
pub(super) fn test_declarations(text: &str) -> Vec<String> {
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

pub(super) fn skip_visibility(s: &str) -> &str {
    match s.strip_prefix("pub") {
        Some(rest) if rest.starts_with('(') => {
            rest.find(')').map_or(rest, |i| rest[i + 1..].trim_start())
        }
        Some(rest) if rest.starts_with(' ') => rest.trim_start(),
        _ => s,
    }
}

/// The text without `#[cfg(test)] mod … { … }` blocks and `//` comments.
pub(super) fn strip_tests_and_comments(text: &str) -> String {
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
pub(super) fn paths_named(code: &str, here: &[String]) -> Vec<Vec<String>> {
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
pub(super) fn segments_after(code: &str, at: usize) -> (Vec<String>, usize) {
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
pub(super) fn group_items(code: &str, start: usize) -> Vec<String> {
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
pub(super) fn resolve(segments: &[String], here: &[String]) -> Vec<String> {
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
