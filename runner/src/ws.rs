//! The connected runner's transport: an outbound WebSocket (`ws://` or `wss://` with
//! rustls) carrying a bearer token, and the token's source.
//!
//! A token file is read on every connect (a short-lived token can rotate: replace the
//! file). A token from an environment variable is read once, at startup, and the
//! variable is removed from the runner's environment at once (so it cannot rotate; use
//! a file for that). The token goes only into the `Authorization` header of the upgrade
//! request. It is never logged, never part of an error text (errors are rebuilt from
//! their kind, see [`ConnectError`]), and never reaches a harness (harnesses get a
//! cleared environment; the runner makes itself non-dumpable so that a harness of the
//! same user cannot read `/proc/<runner>/environ` or its memory).

use std::path::PathBuf;
use std::sync::Arc;

use rustls_pki_types::pem::PemObject;
use rustls_pki_types::CertificateDer;
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::http::HeaderValue;
use tokio_tungstenite::tungstenite::Error as WsError;
use tokio_tungstenite::{Connector, MaybeTlsStream, WebSocketStream};

/// The connected socket.
pub type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// A token held in memory; its `Debug` form never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(…)")
    }
}

/// Where the bearer token comes from.
#[derive(Debug, Clone)]
pub enum TokenSource {
    /// A file holding the token (surrounding whitespace trimmed), re-read on every
    /// connect.
    File(PathBuf),
    /// A token read once (from an environment variable, see [`from_env`](Self::from_env)).
    Value(Secret),
}

impl TokenSource {
    /// Read the token from the environment variable `name` and remove the variable from
    /// this process's environment. Call it before any other thread runs.
    ///
    /// # Errors
    /// The variable is unset (never the token).
    pub fn from_env(name: &str) -> Result<Self, String> {
        let value = std::env::var(name).map_err(|_| format!("token variable {name} is not set"))?;
        std::env::remove_var(name);
        Ok(TokenSource::Value(Secret(value)))
    }

    /// The current token, or a description of why there is none (never the token).
    ///
    /// # Errors
    /// The file cannot be read, or the token is empty.
    pub fn read(&self) -> Result<String, String> {
        let raw = match self {
            TokenSource::File(p) => std::fs::read_to_string(p)
                .map_err(|e| format!("token file {}: {}", p.display(), e.kind()))?,
            TokenSource::Value(Secret(v)) => v.clone(),
        };
        let token = raw.trim().to_string();
        if token.is_empty() {
            return Err("the token is empty".into());
        }
        Ok(token)
    }
}

/// TLS trust for `wss://`.
#[derive(Debug, Clone, Default)]
pub enum Trust {
    /// The system's root certificates.
    #[default]
    System,
    /// Only the certificates of this PEM file.
    CaFile(PathBuf),
}

/// Why a connect failed, without anything secret. (The connect deadline is the link's:
/// it aborts the attempt.)
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectError {
    /// The hub refused the upgrade with this HTTP status (401/403: the token).
    Rejected(u16),
    /// Anything else, described by its kind.
    Other(String),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Rejected(s) => write!(f, "the hub refused the upgrade (HTTP {s})"),
            ConnectError::Other(s) => f.write_str(s),
        }
    }
}

fn describe(e: &WsError) -> ConnectError {
    match e {
        WsError::Http(resp) => ConnectError::Rejected(resp.status().as_u16()),
        WsError::Io(io) => match io.get_ref().and_then(|e| e.downcast_ref::<rustls::Error>()) {
            // tokio-rustls reports handshake failures as I/O errors.
            Some(tls) => ConnectError::Other(format!("TLS handshake failed: {tls}")),
            None => ConnectError::Other(format!("i/o error: {}", io.kind())),
        },
        WsError::Tls(_) => ConnectError::Other("TLS handshake failed".into()),
        WsError::Url(_) => ConnectError::Other("invalid hub URL".into()),
        WsError::HttpFormat(_) => ConnectError::Other("invalid HTTP request".into()),
        WsError::Protocol(p) => ConnectError::Other(format!("WebSocket protocol error: {p}")),
        other => ConnectError::Other(format!(
            "WebSocket error ({})",
            match other {
                WsError::ConnectionClosed | WsError::AlreadyClosed => "closed",
                WsError::Capacity(_) => "capacity",
                _ => "other",
            }
        )),
    }
}

/// A rustls client configuration (ring provider) trusting `trust`.
///
/// # Errors
/// The CA file cannot be read or holds no certificate; no system roots.
pub fn tls_config(trust: &Trust) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore::empty();
    match trust {
        Trust::System => {
            let found = rustls_native_certs::load_native_certs();
            for cert in found.certs {
                let _ = roots.add(cert);
            }
        }
        Trust::CaFile(path) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
                .map_err(|e| format!("CA file {}: {e}", path.display()))?
                .collect::<Result<_, _>>()
                .map_err(|e| format!("CA file {}: {e}", path.display()))?;
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| format!("CA file {}: {e}", path.display()))?;
            }
        }
    }
    if roots.is_empty() {
        return Err("no trusted root certificate".into());
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS configuration: {e}"))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

/// Connect to `url` with `Authorization: Bearer <token>`.
///
/// # Errors
/// See [`ConnectError`].
pub async fn connect(
    url: &str,
    token: &str,
    tls: Option<Arc<rustls::ClientConfig>>,
) -> Result<Socket, ConnectError> {
    let mut request = url.into_client_request().map_err(|e| describe(&e))?;
    let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| ConnectError::Other("the token is not a valid header value".into()))?;
    value.set_sensitive(true);
    request.headers_mut().insert("authorization", value);
    let connector = match (url.starts_with("wss://"), tls) {
        (true, Some(cfg)) => Some(Connector::Rustls(cfg)),
        (true, None) => {
            return Err(ConnectError::Other(
                "wss:// needs a TLS configuration".into(),
            ))
        }
        (false, _) => Some(Connector::Plain),
    };
    match tokio_tungstenite::connect_async_tls_with_config(request, None, true, connector).await {
        Err(e) => Err(describe(&e)),
        Ok((socket, _)) => Ok(socket),
    }
}
