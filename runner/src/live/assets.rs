//! The page and its assets, embedded at build time (`runner/build.rs`): the page's own
//! files from `runner/live-page/` (`index.html` is served at `/`), and the core's browser
//! build from `bindings-node/browser/dist/` under `/core/`.

include!(concat!(env!("OUT_DIR"), "/live_assets.rs"));

/// One embedded file.
#[derive(Debug, Clone, Copy)]
pub struct Asset {
    /// Its `Content-Type`.
    pub content_type: &'static str,
    /// Its bytes.
    pub bytes: &'static [u8],
}

/// The file served at `path`.
pub fn get(path: &str) -> Option<Asset> {
    ASSETS
        .iter()
        .find(|(p, _, _)| *p == path)
        .map(|(_, content_type, bytes)| Asset {
            content_type,
            bytes,
        })
}

/// Every page path (the admission machine's `pages`).
pub fn pages() -> Vec<String> {
    ASSETS.iter().map(|(p, _, _)| (*p).to_owned()).collect()
}
