//! Embeds the live page (`runner/live-page/`) and the core's browser build
//! (`bindings-node/browser/dist/`, committed, linked as `assets/core-browser`) into the binary: `OUT_DIR/live_assets.rs`
//! lists every file with its URL path and content type, read with `include_bytes!`, so
//! building the runner needs neither Node nor a wasm toolchain.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn content_type(path: &Path) -> &'static str {
    match path.extension().and_then(|e| e.to_str()) {
        Some("html") => "text/html; charset=utf-8",
        Some("js" | "mjs") => "text/javascript; charset=utf-8",
        Some("css") => "text/css; charset=utf-8",
        Some("wasm") => "application/wasm",
        Some("json") => "application/json",
        Some("txt") => "text/plain; charset=utf-8",
        Some("png") => "image/png",
        Some("svg") => "image/svg+xml",
        _ => "application/octet-stream",
    }
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR"));
    let page = manifest.join("live-page");
    // `assets/core-browser` is a link to `bindings-node/browser/dist`, so the packaged
    // crate (`cargo package` follows the link) carries the files too.
    let core = manifest.join("assets/core-browser");
    println!("cargo:rerun-if-changed={}", page.display());
    println!("cargo:rerun-if-changed={}", core.display());
    let mut table = String::from("/// `(URL path, content type, bytes)` of every embedded file.\npub static ASSETS: &[(&str, &str, &[u8])] = &[\n");
    for (root, prefix) in [(&page, "/"), (&core, "/core/")] {
        let mut list = Vec::new();
        files(root, &mut list);
        for f in list {
            println!("cargo:rerun-if-changed={}", f.display());
            let rel = f
                .strip_prefix(root)
                .expect("under its root")
                .to_string_lossy()
                .replace('\\', "/");
            let url = if prefix == "/" && rel == "index.html" {
                "/".to_owned()
            } else {
                format!("{prefix}{rel}")
            };
            let abs = f.canonicalize().expect("readable asset");
            writeln!(
                table,
                "    ({url:?}, {:?}, include_bytes!({:?})),",
                content_type(&f),
                abs.display().to_string()
            )
            .expect("write to a String");
        }
    }
    table.push_str("];\n");
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR")).join("live_assets.rs");
    std::fs::write(out, table).expect("write live_assets.rs");
}
