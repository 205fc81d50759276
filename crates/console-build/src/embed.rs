//! Embedding a built console in a binary, for the server's build script: the assets
//! become a `memory_serve::Asset` table (`include!`d by the server), text stored
//! brotli-compressed, each with its SHA-256 as the ETag; `index.html` stays out of the
//! table, because the server rewrites it to point at the assets' hashed routes.
//!
//! This is what `memory_serve::load_directory` does in a build script, without making
//! the build script depend on memory-serve itself (and so on axum, tokio and hyper,
//! compiled a second time for the host).

use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use sha2::{Digest, Sha256};

/// The literals `index.html` must contain, which the server replaces by the hashed
/// routes of the same assets.
pub fn index_literals() -> [String; 2] {
    [
        format!("\"/{}.js\"", crate::OUT_NAME),
        format!("\"/{}_bg.wasm\"", crate::OUT_NAME),
    ]
}

/// Files smaller than this are sent as they are (memory-serve's own threshold).
const MIN_COMPRESS_SIZE: usize = 128;

/// What [`embed`] wrote.
#[derive(Debug)]
pub struct Embedded {
    /// A Rust expression of type `&'static [memory_serve::Asset]`, to `include!`.
    pub assets_rs: PathBuf,
    /// The console's `index.html`, to `include_str!`.
    pub index_html: PathBuf,
    /// `(route, bytes, stored bytes)` of every asset, for the build log.
    pub sizes: Vec<(String, usize, usize)>,
}

/// Writes the table of `dist`'s files (all but `index.html`) into `out_dir`.
pub fn embed(dist: &Path, out_dir: &Path) -> Result<Embedded> {
    let index = std::fs::read_to_string(dist.join("index.html"))
        .with_context(|| format!("{} has no index.html", dist.display()))?;
    for literal in index_literals() {
        if !index.contains(&literal) {
            bail!(
                "{}/index.html does not contain {literal}, which the server rewrites to the \
                 asset's hashed route",
                dist.display()
            );
        }
    }
    let index_html = out_dir.join("console-index.html");
    std::fs::write(&index_html, &index)?;

    let store = out_dir.join("console-assets");
    let _ = std::fs::remove_dir_all(&store);
    std::fs::create_dir_all(&store)?;

    let mut files = Vec::new();
    list(dist, dist, &mut files)?;
    files.sort();
    let mut code = String::from("&[\n");
    let mut sizes = Vec::new();
    for (route, path) in files {
        if route == "/index.html" {
            continue;
        }
        let bytes = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
        if bytes.is_empty() {
            continue;
        }
        let content_type = content_type(&route)
            .with_context(|| format!("no content type known for {route}; add it to embed.rs"))?;
        let etag = hex(&Sha256::digest(&bytes));
        let should_compress = is_text(content_type) && bytes.len() >= MIN_COMPRESS_SIZE;
        let stored = if should_compress {
            brotli(&bytes)?
        } else {
            bytes.clone()
        };
        let stored_path = store.join(&etag);
        std::fs::write(&stored_path, &stored)?;
        sizes.push((route.clone(), bytes.len(), stored.len()));
        writeln!(
            code,
            "    memory_serve::Asset {{ route: {route:?}, path: {path:?}, etag: {etag:?}, \
             content_type: {content_type:?}, bytes: Some(include_bytes!({stored_path:?})), \
             is_compressed: {should_compress}, should_compress: {should_compress} }},",
            path = path.to_string_lossy(),
            stored_path = stored_path.to_string_lossy(),
        )?;
    }
    code.push(']');
    let assets_rs = out_dir.join("console-assets.rs");
    std::fs::write(&assets_rs, code)?;
    Ok(Embedded {
        assets_rs,
        index_html,
        sizes,
    })
}

/// Every file under `dir`, as `(route, path)`.
fn list(root: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.is_dir() {
            list(root, &path, out)?;
            continue;
        }
        let relative = path.strip_prefix(root)?;
        let route = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .fold(String::new(), |route, part| route + "/" + &part);
        out.push((route, path));
    }
    Ok(())
}

fn content_type(route: &str) -> Option<&'static str> {
    let ext = route.rsplit_once('.')?.1;
    Some(match ext {
        "html" => "text/html",
        "js" | "mjs" => "text/javascript",
        "css" => "text/css",
        "wasm" => "application/wasm",
        "json" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "txt" => "text/plain",
        _ => return None,
    })
}

fn is_text(content_type: &str) -> bool {
    content_type.starts_with("text/")
        || matches!(
            content_type,
            "application/wasm" | "application/json" | "image/svg+xml"
        )
}

/// Brotli at the highest quality, as memory-serve stores its assets.
fn brotli(bytes: &[u8]) -> Result<Vec<u8>> {
    let mut writer = brotli::CompressorWriter::new(Vec::new(), 4096, 11, 22);
    writer.write_all(bytes)?;
    Ok(writer.into_inner())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embeds_every_file_but_the_index_with_its_hash() {
        let (dist, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (dist, out) = (dist.path(), out.path());
        let index = format!(
            "<script type=module>import init from {};init({{module_or_path: {}}})</script>",
            index_literals()[0],
            index_literals()[1]
        );
        std::fs::write(dist.join("index.html"), &index).unwrap();
        let js = "export default function init() {}\n".repeat(10);
        std::fs::write(dist.join("switchboard_ui.js"), &js).unwrap();
        std::fs::create_dir_all(dist.join("snippets/x")).unwrap();
        std::fs::write(dist.join("snippets/x/inline0.js"), "f()").unwrap();

        let embedded = embed(dist, out).unwrap();
        assert_eq!(
            std::fs::read_to_string(&embedded.index_html).unwrap(),
            index
        );
        let code = std::fs::read_to_string(&embedded.assets_rs).unwrap();
        assert!(
            !code.contains("index.html"),
            "the index is served apart: {code}"
        );
        assert!(
            code.contains(r#"route: "/snippets/x/inline0.js""#),
            "{code}"
        );
        let sha = hex(&Sha256::digest(js.as_bytes()));
        assert!(code.contains(&format!(r#"etag: "{sha}""#)), "{code}");
        // The compressed copy is what is included, and it decompresses to the file.
        let stored = std::fs::read(out.join("console-assets").join(&sha)).unwrap();
        let mut plain = Vec::new();
        brotli::BrotliDecompress(&mut &stored[..], &mut plain).unwrap();
        assert_eq!(plain, js.as_bytes());
        // A 3-byte snippet is not worth compressing.
        let small = embedded
            .sizes
            .iter()
            .find(|(r, ..)| r == "/snippets/x/inline0.js")
            .unwrap();
        assert_eq!((small.1, small.2), (3, 3));
    }

    #[test]
    fn an_index_without_the_literals_is_refused() {
        let (dist, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let (dist, out) = (dist.path(), out.path());
        std::fs::write(dist.join("index.html"), "<script src=/other.js></script>").unwrap();
        let error = embed(dist, out).unwrap_err().to_string();
        assert!(error.contains("does not contain"), "{error}");
    }
}
