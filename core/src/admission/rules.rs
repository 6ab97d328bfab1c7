//! The header rules of the admission machine (rules 1–10 of the module docs), as pure
//! functions of the request head.

use std::net::{IpAddr, SocketAddr};

use super::Refusal;

/// `true` for `/api` and every path under `/api/`.
pub(crate) fn is_api_path(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

/// `true` for a loopback address: `127.0.0.0/8`, `::1`, or an IPv4-mapped `127.x.y.z`.
fn is_loopback(addr: &SocketAddr) -> bool {
    match addr.ip() {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Rule 1: both socket ends are loopback; the local port on success.
pub(crate) fn loopback(peer: &str, local: &str) -> Result<u16, Refusal> {
    let peer: SocketAddr = peer.parse().map_err(|_| Refusal::NotLoopback)?;
    let local: SocketAddr = local.parse().map_err(|_| Refusal::NotLoopback)?;
    if is_loopback(&peer) && is_loopback(&local) {
        Ok(local.port())
    } else {
        Err(Refusal::NotLoopback)
    }
}

/// The values of every header named `name` (ASCII-case-insensitively), in order.
pub(crate) fn values<'a>(
    headers: &'a [(String, String)],
    name: &'a str,
) -> impl Iterator<Item = &'a str> + 'a {
    headers
        .iter()
        .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
        .map(|(_, v)| v.as_str())
}

/// At most one header `name`: `Ok(None)` when absent, `Err(())` when repeated.
pub(crate) fn single<'a>(
    headers: &'a [(String, String)],
    name: &'a str,
) -> Result<Option<&'a str>, ()> {
    let mut it = values(headers, name);
    let first = it.next();
    if it.next().is_some() {
        return Err(());
    }
    Ok(first)
}

/// Rule 2: the `Host` value, exactly `127.0.0.1:PORT` or `localhost:PORT` (`localhost`
/// in any ASCII case); on port 80 also without `:80`.
pub(crate) fn host(headers: &[(String, String)], port: u16) -> Result<&str, Refusal> {
    let value = single(headers, "host")
        .map_err(|()| Refusal::BadHost)?
        .ok_or(Refusal::BadHost)?;
    let (name, rest) = match value.split_once(':') {
        Some((name, p)) => (name, Some(p)),
        None => (value, None),
    };
    let port_ok = match rest {
        Some(p) => p == port.to_string(),
        None => port == 80,
    };
    if port_ok && (name == "127.0.0.1" || name.eq_ignore_ascii_case("localhost")) {
        Ok(value)
    } else {
        Err(Refusal::BadHost)
    }
}

/// Rule 3: at most one `Origin`, and when present exactly `http://` + the Host value.
/// `Ok(true)` when an Origin was present.
pub(crate) fn origin(headers: &[(String, String)], host: &str) -> Result<bool, Refusal> {
    match single(headers, "origin").map_err(|()| Refusal::OriginMismatch)? {
        None => Ok(false),
        Some(o) => match o.strip_prefix("http://") {
            Some(rest) if rest == host => Ok(true),
            _ => Err(Refusal::OriginMismatch),
        },
    }
}

/// Rule 4: at most one `Sec-Fetch-Site`; `same-origin`, or `none` when `navigation`.
pub(crate) fn fetch_site(headers: &[(String, String)], navigation: bool) -> Result<(), Refusal> {
    match single(headers, "sec-fetch-site").map_err(|()| Refusal::FetchSiteRefused)? {
        None | Some("same-origin") => Ok(()),
        Some("none") if navigation => Ok(()),
        Some(_) => Err(Refusal::FetchSiteRefused),
    }
}

/// How the body is framed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body (no `Content-Length`, or `Content-Length: 0`, and not chunked).
    Empty,
    /// `Content-Length: n`, n > 0.
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// Rule 8's framing part.
pub(crate) fn framing(headers: &[(String, String)]) -> Result<Framing, Refusal> {
    let length = single(headers, "content-length").map_err(|()| Refusal::BadFraming)?;
    let mut encodings = values(headers, "transfer-encoding").peekable();
    let chunked = if encodings.peek().is_some() {
        let all: Vec<&str> = encodings
            .flat_map(|v| v.split(','))
            .map(str::trim)
            .collect();
        if all.len() != 1 || !all.iter().all(|e| e.eq_ignore_ascii_case("chunked")) {
            return Err(Refusal::BadFraming);
        }
        true
    } else {
        false
    };
    match (length, chunked) {
        (Some(_), true) => Err(Refusal::BadFraming),
        (None, true) => Ok(Framing::Chunked),
        (None, false) => Ok(Framing::Empty),
        (Some(l), false) => {
            if l.is_empty() || !l.bytes().all(|b| b.is_ascii_digit()) {
                return Err(Refusal::BadFraming);
            }
            match l.parse::<u64>() {
                Ok(0) => Ok(Framing::Empty),
                Ok(n) => Ok(Framing::Length(n)),
                // More digits than a u64 holds: longer than any bound.
                Err(_) => Ok(Framing::Length(u64::MAX)),
            }
        }
    }
}

/// Rule 9: exactly one `Content-Type` whose media type is `application/json`.
pub(crate) fn json_content_type(headers: &[(String, String)]) -> Result<(), Refusal> {
    let value = single(headers, "content-type")
        .map_err(|()| Refusal::UnsupportedMediaType)?
        .ok_or(Refusal::UnsupportedMediaType)?;
    let media = value.split(';').next().unwrap_or_default().trim();
    if media.eq_ignore_ascii_case("application/json") {
        Ok(())
    } else {
        Err(Refusal::UnsupportedMediaType)
    }
}

/// The events cursor: `Last-Event-ID` (one header), else the query's `cursor=`, else 0.
pub(crate) fn cursor(headers: &[(String, String)], query: Option<&str>) -> Result<u64, Refusal> {
    let digits = |s: &str| -> Result<u64, Refusal> {
        if s.is_empty() || s.len() > 19 || !s.bytes().all(|b| b.is_ascii_digit()) {
            return Err(Refusal::InvalidCursor);
        }
        s.parse::<u64>().map_err(|_| Refusal::InvalidCursor)
    };
    if let Some(id) = single(headers, "last-event-id").map_err(|()| Refusal::InvalidCursor)? {
        return digits(id.trim());
    }
    let mut found = None;
    for pair in query.unwrap_or_default().split('&') {
        if let Some(v) = pair.strip_prefix("cursor=") {
            if found.is_some() {
                return Err(Refusal::InvalidCursor);
            }
            found = Some(digits(v)?);
        }
    }
    Ok(found.unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(n, v)| ((*n).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn loopback_forms() {
        assert_eq!(loopback("127.0.0.1:5", "127.0.0.1:80"), Ok(80));
        assert_eq!(loopback("127.9.9.9:5", "[::1]:81"), Ok(81));
        assert_eq!(loopback("[::ffff:127.0.0.1]:5", "127.0.0.1:82"), Ok(82));
        assert_eq!(
            loopback("10.0.0.1:5", "127.0.0.1:80"),
            Err(Refusal::NotLoopback)
        );
        assert_eq!(
            loopback("nonsense", "127.0.0.1:80"),
            Err(Refusal::NotLoopback)
        );
        assert_eq!(
            loopback("127.0.0.1:5", "0.0.0.0:80"),
            Err(Refusal::NotLoopback)
        );
    }

    #[test]
    fn host_forms() {
        assert_eq!(host(&h(&[("Host", "127.0.0.1:8")]), 8), Ok("127.0.0.1:8"));
        assert_eq!(host(&h(&[("HOST", "LocalHost:8")]), 8), Ok("LocalHost:8"));
        assert_eq!(host(&h(&[("Host", "127.0.0.1")]), 80), Ok("127.0.0.1"));
        for bad in [
            "127.0.0.1",
            "127.0.0.1:08",
            "127.0.0.2:8",
            "[::1]:8",
            "x.test:8",
            "",
        ] {
            assert_eq!(
                host(&h(&[("Host", bad)]), 8),
                Err(Refusal::BadHost),
                "{bad}"
            );
        }
        assert_eq!(
            host(&h(&[("Host", "127.0.0.1:8"), ("host", "127.0.0.1:8")]), 8),
            Err(Refusal::BadHost)
        );
    }

    #[test]
    fn framing_forms() {
        assert_eq!(framing(&h(&[])), Ok(Framing::Empty));
        assert_eq!(framing(&h(&[("Content-Length", "0")])), Ok(Framing::Empty));
        assert_eq!(
            framing(&h(&[("content-length", "12")])),
            Ok(Framing::Length(12))
        );
        assert_eq!(
            framing(&h(&[("content-length", "99999999999999999999999")])),
            Ok(Framing::Length(u64::MAX))
        );
        assert_eq!(
            framing(&h(&[("Transfer-Encoding", "chunked")])),
            Ok(Framing::Chunked)
        );
        for bad in [
            h(&[("Content-Length", "1"), ("Transfer-Encoding", "chunked")]),
            h(&[("Content-Length", "-1")]),
            h(&[("Content-Length", "1"), ("Content-Length", "1")]),
            h(&[("Transfer-Encoding", "gzip, chunked")]),
        ] {
            assert_eq!(framing(&bad), Err(Refusal::BadFraming));
        }
    }

    #[test]
    fn cursor_forms() {
        assert_eq!(cursor(&h(&[]), None), Ok(0));
        assert_eq!(cursor(&h(&[]), Some("a=1&cursor=7")), Ok(7));
        assert_eq!(
            cursor(&h(&[("Last-Event-ID", "9")]), Some("cursor=7")),
            Ok(9)
        );
        assert_eq!(
            cursor(&h(&[]), Some("cursor=x")),
            Err(Refusal::InvalidCursor)
        );
        assert_eq!(
            cursor(&h(&[]), Some("cursor=1&cursor=2")),
            Err(Refusal::InvalidCursor)
        );
    }
}
