//! `stapel-runner live` over raw HTTP: for every admission rule a hostile request gets
//! its status and stable code, next to the control showing the legitimate request passes;
//! runs started, streamed (SSE, resumed from a cursor), steered by actions (through the
//! ledger: each answered with its receipt) and capped. A real `stapel-runner live`
//! process on 127.0.0.1 with the built-in fake harness.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// A running `stapel-runner live`; killed when dropped.
struct Server {
    child: Child,
    port: u16,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn server(extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_stapel-runner"))
        .args(["live", "--port", "0", "--delay-ms", "0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start stapel-runner live");
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    // The first stdout line, exactly.
    let port: u16 = line
        .trim_end()
        .strip_prefix("{\"url\": \"http://127.0.0.1:")
        .and_then(|r| r.strip_suffix("/\"}"))
        .unwrap_or_else(|| panic!("first line {line:?}"))
        .parse()
        .unwrap();
    assert!(port > 0);
    Server { child, port }
}

#[derive(Debug)]
struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Reply {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", String::from_utf8_lossy(&self.body)))
    }
    fn code(&self) -> String {
        self.json()["error"]["code"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    s
}

/// Read one response (its body by Content-Length, or to the end of the connection).
fn read_reply(s: &mut TcpStream) -> Reply {
    read_response(s, true)
}

/// Read one response; `with_body: false` for the answer to a HEAD.
fn read_response(s: &mut TcpStream, with_body: bool) -> Reply {
    let mut r = BufReader::new(s);
    let mut status_line = String::new();
    r.read_line(&mut status_line).unwrap();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .unwrap_or_else(|| panic!("status line {status_line:?}"))
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        r.read_line(&mut l).unwrap();
        let l = l.trim_end();
        if l.is_empty() {
            break;
        }
        let (n, v) = l.split_once(':').unwrap();
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let len = headers
        .iter()
        .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
        .map(|(_, v)| v.parse::<usize>().unwrap());
    let mut body = Vec::new();
    match len {
        _ if !with_body => {}
        Some(n) => {
            body.resize(n, 0);
            r.read_exact(&mut body).unwrap();
        }
        None => {
            r.read_to_end(&mut body).unwrap();
        }
    }
    Reply {
        status,
        headers,
        body,
    }
}

/// Send raw bytes (a whole request) on a fresh connection; the response.
fn raw(port: u16, request: &str) -> Reply {
    let mut s = connect(port);
    s.write_all(request.as_bytes()).unwrap();
    read_reply(&mut s)
}

/// A request with these extra header lines (`Host` first unless `host` is `None`).
fn req(
    port: u16,
    method: &str,
    target: &str,
    host: Option<&str>,
    headers: &[&str],
    body: &str,
) -> Reply {
    let own = format!("127.0.0.1:{port}");
    let mut text = format!("{method} {target} HTTP/1.1\r\n");
    if let Some(h) = host.or(Some(&own)).filter(|h| !h.is_empty()) {
        text.push_str(&format!("Host: {h}\r\n"));
    }
    for h in headers {
        text.push_str(h);
        text.push_str("\r\n");
    }
    if !body.is_empty() || method == "POST" {
        text.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    text.push_str("Connection: close\r\n\r\n");
    text.push_str(body);
    raw(port, &text)
}

/// A same-origin browser-like JSON POST.
fn post(port: u16, target: &str, body: &Value) -> Reply {
    let origin = format!("Origin: http://127.0.0.1:{port}");
    req(
        port,
        "POST",
        target,
        None,
        &[
            &origin,
            "Sec-Fetch-Site: same-origin",
            "Content-Type: application/json",
        ],
        &body.to_string(),
    )
}

fn start(port: u16, script: &str) -> (String, String) {
    let r = post(port, "/api/runs", &json!({"script": script}));
    assert_eq!(
        r.status,
        201,
        "start {script}: {:?}",
        String::from_utf8_lossy(&r.body)
    );
    let v = r.json();
    (
        v["runId"].as_str().unwrap().to_owned(),
        v["sessionId"].as_str().unwrap().to_owned(),
    )
}

/// The core's response headers, on every response; never a CORS header.
fn assert_headers(r: &Reply) {
    for (name, value) in stapel_runner_protocol::admission::RESPONSE_HEADERS {
        assert_eq!(
            r.header(name),
            Some(*value),
            "{name} on a {} response",
            r.status
        );
    }
    assert!(
        !r.headers
            .iter()
            .any(|(n, _)| n.to_ascii_lowercase().starts_with("access-control-")),
        "a CORS header: {:?}",
        r.headers
    );
}

fn refused(r: &Reply, status: u16, code: &str, what: &str) {
    assert_eq!(
        (r.status, r.code().as_str()),
        (status, code),
        "{what}: {:?}",
        String::from_utf8_lossy(&r.body)
    );
    assert_eq!(r.header("content-type"), Some("application/json"), "{what}");
    assert_eq!(
        String::from_utf8_lossy(&r.body),
        stapel_runner_protocol::admission::error_body(code).unwrap(),
        "{what}: the core's body"
    );
    assert_headers(r);
}

/// One SSE message.
#[derive(Debug, Clone)]
struct Sse {
    id: Option<usize>,
    event: String,
    data: String,
}

/// An open event stream.
struct Stream {
    reader: BufReader<TcpStream>,
}

fn open_stream(port: u16, run: &str, last_event_id: Option<usize>) -> Result<Stream, Reply> {
    let mut s = connect(port);
    let mut text = format!(
        "GET /api/runs/{run}/events HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: text/event-stream\r\nSec-Fetch-Site: same-origin\r\n"
    );
    if let Some(id) = last_event_id {
        text.push_str(&format!("Last-Event-ID: {id}\r\n"));
    }
    text.push_str("\r\n");
    s.write_all(text.as_bytes()).unwrap();
    let mut reader = BufReader::new(s);
    let mut status_line = String::new();
    reader.read_line(&mut status_line).unwrap();
    let status: u16 = status_line
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let mut headers = Vec::new();
    loop {
        let mut l = String::new();
        reader.read_line(&mut l).unwrap();
        if l.trim_end().is_empty() {
            break;
        }
        let (n, v) = l.trim_end().split_once(':').unwrap();
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    if status != 200 {
        let len: usize = headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case("content-length"))
            .map(|(_, v)| v.parse().unwrap())
            .unwrap_or(0);
        let mut body = vec![0; len];
        reader.read_exact(&mut body).unwrap();
        return Err(Reply {
            status,
            headers,
            body,
        });
    }
    let r = Reply {
        status,
        headers,
        body: Vec::new(),
    };
    assert_headers(&r);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert!(
        r.header("transfer-encoding")
            .is_some_and(|t| t.contains("chunked")),
        "a streamed body"
    );
    Ok(Stream { reader })
}

impl Stream {
    /// The next SSE message (chunk framing skipped: each chunk holds whole lines).
    fn next(&mut self) -> Option<Sse> {
        let mut id = None;
        let mut event = String::new();
        let mut data = String::new();
        loop {
            let mut l = String::new();
            if self.reader.read_line(&mut l).ok()? == 0 {
                return None;
            }
            let l = l.trim_end_matches(['\r', '\n']);
            if let Some(v) = l.strip_prefix("id: ") {
                id = Some(v.parse().unwrap());
            } else if let Some(v) = l.strip_prefix("event: ") {
                event = v.to_owned();
            } else if let Some(v) = l.strip_prefix("data: ") {
                data = v.to_owned();
            } else if l.is_empty() && !event.is_empty() {
                return Some(Sse { id, event, data });
            }
            // Chunk-size lines, `retry:` and `: keepalive` comments are skipped.
        }
    }

    /// Every message up to and including `end`.
    fn read_to_end(&mut self) -> Vec<Sse> {
        let mut out = Vec::new();
        while let Some(m) = self.next() {
            let end = m.event == "end";
            out.push(m);
            if end {
                return out;
            }
        }
        panic!("the stream closed before `end`: {out:?}");
    }

    /// Messages until an event of `event_type` (its message included).
    fn until(&mut self, event_type: &str) -> Vec<Sse> {
        let mut out = Vec::new();
        while let Some(m) = self.next() {
            let hit = m.event == "event"
                && serde_json::from_str::<Value>(&m.data).unwrap()["eventType"] == event_type;
            let end = m.event == "end";
            out.push(m);
            if hit {
                return out;
            }
            assert!(!end, "ended before {event_type}: {out:?}");
        }
        panic!("closed before {event_type}: {out:?}");
    }
}

fn event_types(msgs: &[Sse]) -> Vec<String> {
    msgs.iter()
        .filter(|m| m.event == "event")
        .map(|m| {
            serde_json::from_str::<Value>(&m.data).unwrap()["eventType"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .collect()
}

fn terminal(msgs: &[Sse]) -> Value {
    msgs.iter()
        .filter(|m| m.event == "event")
        .map(|m| serde_json::from_str::<Value>(&m.data).unwrap())
        .find(|e| e["eventType"] == "run.terminal")
        .expect("a run.terminal")["payload"]
        .clone()
}

#[test]
fn page_assets_and_response_headers() {
    let s = server(&[]);
    let p = s.port;
    let page = req(
        p,
        "GET",
        "/",
        None,
        &["Sec-Fetch-Site: none", "Sec-Fetch-Mode: navigate"],
        "",
    );
    assert_eq!(page.status, 200);
    assert_eq!(
        page.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(String::from_utf8_lossy(&page.body).contains("stapel-runner live"));
    assert_headers(&page);
    let csp = page.header("content-security-policy").unwrap();
    assert!(
        !csp.contains("unsafe-inline") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    let mut c = connect(p);
    c.write_all(
        format!("HEAD / HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .unwrap();
    let head = read_response(&mut c, false);
    assert_eq!(head.status, 200);
    assert_eq!(
        head.header("content-length"),
        Some(page.body.len().to_string().as_str())
    );
    for (path, ty) in [
        ("/app.js", "text/javascript; charset=utf-8"),
        ("/style.css", "text/css; charset=utf-8"),
        (
            "/core/stapel-runner-protocol.js",
            "text/javascript; charset=utf-8",
        ),
        (
            "/core/stapel-runner-protocol.wasm32-wasip1.wasm",
            "application/wasm",
        ),
    ] {
        let r = req(p, "GET", path, None, &["Sec-Fetch-Site: same-origin"], "");
        assert_eq!(
            (r.status, r.header("content-type")),
            (200, Some(ty)),
            "{path}"
        );
        assert!(!r.body.is_empty(), "{path}");
        assert_headers(&r);
    }
    // The embedded core is exactly the committed browser build (every file of it).
    let dist =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bindings-node/browser/dist");
    let mut served = 0;
    for entry in std::fs::read_dir(&dist).expect("bindings-node/browser/dist") {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let r = req(p, "GET", &format!("/core/{name}"), None, &[], "");
        assert_eq!(r.status, 200, "{name}");
        assert!(
            r.body == std::fs::read(&path).unwrap(),
            "/core/{name} differs from {}",
            path.display()
        );
        served += 1;
    }
    assert!(served >= 2, "the browser build has its module and its wasm");
    // The page holds no inline script (the CSP would refuse it anyway).
    let html = String::from_utf8_lossy(&page.body);
    for tag in html.match_indices("<script").map(|(i, _)| &html[i..]) {
        assert!(
            tag.starts_with("<script type=\"module\" src=\""),
            "inline script: {tag:.60}"
        );
    }
    let scripts = req(
        p,
        "GET",
        "/api/scripts",
        None,
        &["Sec-Fetch-Site: same-origin"],
        "",
    );
    assert_eq!(scripts.status, 200);
    assert_eq!(scripts.json()["default"], "happy-path");
    assert_eq!(scripts.json()["scripts"].as_array().unwrap().len(), 7);
}

#[test]
fn every_admission_rule_refuses_its_hostile_request_and_admits_the_control() {
    let s = server(&[]);
    let p = s.port;
    let own = format!("127.0.0.1:{p}");
    let origin = format!("Origin: http://{own}");
    let other_port = format!("Origin: http://127.0.0.1:{}", p.wrapping_add(1).max(1));
    let rebound = format!("attacker.test:{p}");
    let rebound_origin = format!("Origin: http://{rebound}");
    let json_ct = "Content-Type: application/json";
    let start_body = r#"{"script":"happy-path"}"#;

    // Host: DNS rebinding (a page from attacker.test:PORT resolved to 127.0.0.1), another
    // port, another loopback address, a missing Host — for any path.
    refused(
        &req(p, "GET", "/", Some(&rebound), &[], ""),
        403,
        "bad_host",
        "rebound page",
    );
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            Some(&rebound),
            &[&rebound_origin, json_ct],
            start_body,
        ),
        403,
        "bad_host",
        "rebound start",
    );
    refused(
        &req(
            p,
            "GET",
            "/api/runs/run_1/events",
            Some(&rebound),
            &[&rebound_origin],
            "",
        ),
        403,
        "bad_host",
        "rebound stream",
    );
    refused(
        &req(p, "GET", "/nope", Some(&rebound), &[], ""),
        403,
        "bad_host",
        "rebound 404 path",
    );
    let other_host = format!("127.0.0.1:{}", p.wrapping_add(1).max(1));
    refused(
        &req(p, "GET", "/", Some(&other_host), &[], ""),
        403,
        "bad_host",
        "other port",
    );
    refused(
        &req(p, "GET", "/", Some(&format!("127.0.0.2:{p}")), &[], ""),
        403,
        "bad_host",
        "127.0.0.2",
    );
    refused(
        &raw(p, "GET / HTTP/1.0\r\n\r\n"),
        403,
        "bad_host",
        "no Host",
    );
    // Control: localhost:PORT and 127.0.0.1:PORT pass.
    assert_eq!(
        req(p, "GET", "/", Some(&format!("localhost:{p}")), &[], "").status,
        200
    );
    assert_eq!(req(p, "GET", "/", None, &[], "").status, 200);

    // Origin: another loopback port is same-site, not same-origin; null; https.
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            None,
            &[&other_port, json_ct, "Sec-Fetch-Site: same-site"],
            start_body,
        ),
        403,
        "origin_mismatch",
        "second loopback port start",
    );
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            None,
            &[&other_port, json_ct],
            start_body,
        ),
        403,
        "origin_mismatch",
        "second loopback port start (no fetch metadata)",
    );
    refused(
        &req(p, "GET", "/api/scripts", None, &["Origin: null"], ""),
        403,
        "origin_mismatch",
        "null origin",
    );
    refused(
        &req(
            p,
            "GET",
            "/api/scripts",
            None,
            &[&format!("Origin: https://{own}")],
            "",
        ),
        403,
        "origin_mismatch",
        "https origin",
    );
    // Control: the exact origin.
    assert_eq!(
        req(
            p,
            "GET",
            "/api/scripts",
            None,
            &[&origin, "Sec-Fetch-Site: same-origin"],
            ""
        )
        .status,
        200
    );

    // Fetch Metadata.
    refused(
        &req(
            p,
            "GET",
            "/api/scripts",
            None,
            &["Sec-Fetch-Site: same-site"],
            "",
        ),
        403,
        "fetch_site_refused",
        "same-site API",
    );
    refused(
        &req(
            p,
            "GET",
            "/api/scripts",
            None,
            &["Sec-Fetch-Site: none"],
            "",
        ),
        403,
        "fetch_site_refused",
        "typed API URL",
    );
    refused(
        &req(p, "GET", "/", None, &["Sec-Fetch-Site: cross-site"], ""),
        403,
        "fetch_site_refused",
        "cross-site page",
    );
    // Control: none (a typed navigation) for the page.
    assert_eq!(
        req(p, "GET", "/", None, &["Sec-Fetch-Site: none"], "").status,
        200
    );

    // WebSocket upgrades pass the same Origin check.
    let ws = [
        "Upgrade: websocket",
        "Connection: Upgrade",
        "Sec-WebSocket-Version: 13",
        "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==",
    ];
    let with = |o: &str| -> Vec<String> {
        ws.iter()
            .map(|s| s.to_string())
            .chain([o.to_owned()])
            .collect()
    };
    let hdrs = |v: &[String]| -> Reply {
        let refs: Vec<&str> = v.iter().map(String::as_str).collect();
        let own = format!("127.0.0.1:{p}");
        let mut text = format!("GET /api/runs/run_1/events HTTP/1.1\r\nHost: {own}\r\n");
        for h in refs {
            text.push_str(h);
            text.push_str("\r\n");
        }
        text.push_str("\r\n");
        raw(p, &text)
    };
    refused(
        &hdrs(&with(&other_port)),
        403,
        "origin_mismatch",
        "ws from another port",
    );
    refused(
        &hdrs(&ws.iter().map(|s| s.to_string()).collect::<Vec<_>>()),
        403,
        "origin_required",
        "ws without Origin",
    );
    refused(
        &hdrs(&with(&origin)),
        400,
        "upgrade_not_supported",
        "ws same-origin",
    );

    // Target, routes, methods (a CORS preflight gets 405 and no CORS header).
    refused(
        &raw(
            p,
            &format!("GET http://{own}/ HTTP/1.1\r\nHost: {own}\r\nConnection: close\r\n\r\n"),
        ),
        400,
        "bad_target",
        "absolute-form",
    );
    refused(
        &req(p, "GET", "/nope.js", None, &[], ""),
        404,
        "not_found",
        "unknown page",
    );
    refused(
        &req(p, "GET", "/api/nope", None, &[], ""),
        404,
        "not_found",
        "unknown API path",
    );
    refused(
        &req(p, "DELETE", "/", None, &[], ""),
        405,
        "method_not_allowed",
        "DELETE page",
    );
    refused(
        &req(
            p,
            "OPTIONS",
            "/api/runs",
            None,
            &[&origin, "Access-Control-Request-Method: POST"],
            "",
        ),
        405,
        "method_not_allowed",
        "preflight",
    );

    // Bodies: none on GET; JSON only; 16 KiB at most.
    refused(
        &req(p, "GET", "/", None, &[], "hello"),
        400,
        "body_not_allowed",
        "GET with a body",
    );
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            None,
            &[&origin, "Content-Type: text/plain"],
            start_body,
        ),
        415,
        "unsupported_media_type",
        "text/plain start",
    );
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            None,
            &[&origin, "Content-Type: application/x-www-form-urlencoded"],
            "script=happy-path",
        ),
        415,
        "unsupported_media_type",
        "form start",
    );
    // (Framing hyper settles itself never reaches the machine: with Content-Length and
    // chunked both present hyper drops the length; conflicting lengths or another final
    // transfer coding get hyper's bare 400. The machine's own framing rules are pinned by
    // the `admission` vectors.)
    let big = format!(
        "{{\"script\":\"happy-path\",\"pad\":\"{}\"}}",
        "x".repeat(16 * 1024)
    );
    refused(
        &req(p, "POST", "/api/runs", None, &[&origin, json_ct], &big),
        413,
        "body_too_large",
        "declared length",
    );
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            None,
            &[&origin, json_ct],
            "{\"script\"",
        ),
        400,
        "invalid_json",
        "truncated JSON",
    );
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            None,
            &[&origin, json_ct],
            r#"{"script":"../x"}"#,
        ),
        400,
        "unknown_script",
        "path as script",
    );
    refused(
        &req(
            p,
            "POST",
            "/api/runs",
            None,
            &[&origin, json_ct],
            r#"{"script":"flood"}"#,
        ),
        400,
        "unknown_script",
        "unoffered script",
    );

    // Runs: unknown run, bad cursor, bad action, finished run.
    refused(
        &req(p, "GET", "/api/runs/run_9/events", None, &[], ""),
        404,
        "unknown_run",
        "unknown run stream",
    );
    refused(
        &post(p, "/api/runs/run_9/actions", &json!({"type": "cancel"})),
        404,
        "unknown_run",
        "unknown run action",
    );
    // No run was registered by any refused request: the first start is run_1.
    let (run, _) = start(p, "happy-path");
    assert_eq!(run, "run_1");
    refused(
        &req(p, "GET", "/api/runs/run_1/events?cursor=x", None, &[], ""),
        400,
        "invalid_cursor",
        "cursor",
    );
    refused(
        &post(p, "/api/runs/run_1/actions", &json!({"type": "run.cancel"})),
        400,
        "invalid_action",
        "raw command type",
    );
    let mut st = open_stream(p, &run, None).unwrap();
    st.read_to_end();
    refused(
        &post(p, "/api/runs/run_1/actions", &json!({"type": "cancel"})),
        409,
        "run_finished",
        "finished run",
    );
}

#[test]
fn a_chunked_body_is_cut_off_while_it_streams() {
    let s = server(&[]);
    let p = s.port;
    let mut c = connect(p);
    let head = format!(
        "POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nOrigin: http://127.0.0.1:{p}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    );
    c.write_all(head.as_bytes()).unwrap();
    // 2 × 9000 bytes: past 16 KiB with the second chunk. The final chunk is never sent:
    // the refusal comes while the body is still streaming.
    for _ in 0..2 {
        c.write_all(format!("{:x}\r\n{}\r\n", 9000, " ".repeat(9000)).as_bytes())
            .unwrap();
    }
    let r = read_reply(&mut c);
    refused(&r, 413, "body_too_large", "chunked past 16 KiB");
    // Control: a chunked body within the bound starts a run.
    let mut c = connect(p);
    c.write_all(head.as_bytes()).unwrap();
    let body = r#"{"script":"happy-path"}"#;
    c.write_all(format!("{:x}\r\n{}\r\n0\r\n\r\n", body.len(), body).as_bytes())
        .unwrap();
    let r = read_reply(&mut c);
    assert_eq!(r.status, 201, "{:?}", String::from_utf8_lossy(&r.body));
}

#[test]
fn a_stalled_body_times_out() {
    let s = server(&["--admission-config", r#"{"body_timeout_ms": 300}"#]);
    let p = s.port;
    let mut c = connect(p);
    let t0 = Instant::now();
    c.write_all(
        format!("POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1:{p}\r\nContent-Type: application/json\r\nContent-Length: 23\r\n\r\n{{\"scr")
            .as_bytes(),
    )
    .unwrap();
    let r = read_reply(&mut c);
    refused(&r, 408, "body_timeout", "stalled body");
    assert!(t0.elapsed() >= Duration::from_millis(300));
}

#[test]
fn happy_path_streams_history_then_resumes_from_a_cursor() {
    let s = server(&[]);
    let p = s.port;
    let (run, session) = start(p, "happy-path");
    let mut st = open_stream(p, &run, None).unwrap();
    let all = st.read_to_end();
    let end = all.last().unwrap();
    let n = all.len() - 1;
    assert_eq!(
        serde_json::from_str::<Value>(&end.data).unwrap(),
        json!({"messages": n})
    );
    // Ids are the cursor after each message: 1..=n.
    let ids: Vec<usize> = all[..n].iter().map(|m| m.id.unwrap()).collect();
    assert_eq!(ids, (1..=n).collect::<Vec<_>>());
    let types = event_types(&all);
    assert_eq!(
        types.first().map(String::as_str),
        Some("runtime.phase.changed")
    );
    assert_eq!(types.last().map(String::as_str), Some("run.terminal"));
    for m in all.iter().filter(|m| m.event == "event") {
        let e: Value = serde_json::from_str(&m.data).unwrap();
        assert_eq!(
            (e["runId"].as_str(), e["normalizedSessionId"].as_str()),
            (Some(run.as_str()), Some(session.as_str()))
        );
    }
    assert_eq!(terminal(&all)["runTerminalState"], "succeeded");
    // The built-in controller's commands went through the ledger: receipts, all accepted.
    let receipts: Vec<Value> = all
        .iter()
        .filter(|m| m.event == "receipt")
        .map(|m| serde_json::from_str(&m.data).unwrap())
        .collect();
    assert_eq!(receipts.len(), 3, "run.prepare, session.open, turn.start");
    assert!(receipts.iter().all(|r| r["status"] == "accepted"));
    // Resumed from a cursor: exactly the rest, then `end`.
    let mut again = open_stream(p, &run, Some(5)).unwrap();
    let rest = again.read_to_end();
    assert_eq!(rest.len(), n - 5 + 1);
    assert_eq!(rest[0].id, Some(6));
    assert_eq!(rest[0].data, all[5].data);
    // A cursor past the end: only `end`.
    let mut past = open_stream(p, &run, Some(n + 10)).unwrap();
    assert_eq!(past.read_to_end().len(), 1);
}

#[test]
fn actions_answer_the_permission_and_the_input_through_the_ledger() {
    let s = server(&[]);
    let p = s.port;
    let (run, _) = start(p, "permission-input");
    let mut st = open_stream(p, &run, None).unwrap();
    let seen = st.until("runtime_request.created");
    let request = serde_json::from_str::<Value>(&seen.last().unwrap().data).unwrap()["payload"]
        ["request"]
        .clone();
    assert_eq!(request["type"], "permission");
    let r = post(
        p,
        &format!("/api/runs/{run}/actions"),
        &json!({"type": "resolve_permission", "requestId": request["requestId"], "choice": "allow"}),
    );
    assert_eq!(r.status, 200, "{:?}", r.json());
    let receipt = r.json();
    assert_eq!(
        (
            receipt["status"].as_str(),
            receipt["controllerSeq"].as_u64()
        ),
        (Some("accepted"), Some(4))
    );
    let seen = st.until("runtime_request.created");
    let request = serde_json::from_str::<Value>(&seen.last().unwrap().data).unwrap()["payload"]
        ["request"]
        .clone();
    assert_eq!(request["type"], "input");
    let r = post(
        p,
        &format!("/api/runs/{run}/actions"),
        &json!({"type": "answer_input", "requestId": request["requestId"], "text": "typed by a person"}),
    );
    assert_eq!(
        (r.status, r.json()["status"].as_str()),
        (200, Some("accepted"))
    );
    assert_eq!(r.json()["controllerSeq"], 5);
    let rest = st.read_to_end();
    let resolved: Vec<Value> = rest
        .iter()
        .filter(|m| m.event == "event")
        .map(|m| serde_json::from_str::<Value>(&m.data).unwrap())
        .filter(|e| e["eventType"] == "runtime_request.resolved")
        .collect();
    assert_eq!(
        resolved.len(),
        1,
        "the input's (the permission's came before)"
    );
    assert_eq!(
        resolved[0]["payload"]["response"],
        json!({"text": "typed by a person"})
    );
    assert_eq!(terminal(&rest)["runTerminalState"], "succeeded");
}

#[test]
fn interrupt_and_cancel_end_the_run_their_way() {
    let s = server(&[]);
    let p = s.port;
    let (run, _) = start(p, "interrupted");
    let mut st = open_stream(p, &run, None).unwrap();
    st.until("item.started");
    let r = post(
        p,
        &format!("/api/runs/{run}/actions"),
        &json!({"type": "interrupt", "turnId": "turn_live_1"}),
    );
    assert_eq!(
        (r.status, r.json()["status"].as_str()),
        (200, Some("accepted")),
        "{:?}",
        r.json()
    );
    let t = terminal(&st.read_to_end());
    assert_eq!(
        (
            t["turnTerminalState"].as_str(),
            t["reconciliation"]["reason"].as_str()
        ),
        (Some("interrupted"), Some("turn_interrupted"))
    );

    let (run, _) = start(p, "interrupted");
    let mut st = open_stream(p, &run, None).unwrap();
    st.until("item.started");
    let r = post(
        p,
        &format!("/api/runs/{run}/actions"),
        &json!({"type": "cancel"}),
    );
    assert_eq!(
        (r.status, r.json()["status"].as_str()),
        (200, Some("accepted"))
    );
    let t = terminal(&st.read_to_end());
    assert_eq!(
        (
            t["runTerminalState"].as_str(),
            t["reconciliation"]["reason"].as_str()
        ),
        (Some("cancelled"), Some("run_cancelled"))
    );
}

#[test]
fn run_and_stream_caps_with_eviction() {
    let s = server(&[
        "--admission-config",
        r#"{"max_active_runs": 1, "max_retained_runs": 2, "max_stream_clients": 2}"#,
    ]);
    let p = s.port;
    let (run1, _) = start(p, "interrupted");
    refused(
        &post(p, "/api/runs", &json!({"script": "happy-path"})),
        429,
        "too_many_active_runs",
        "second active run",
    );
    let a = open_stream(p, &run1, None).unwrap();
    let _b = open_stream(p, &run1, None).unwrap();
    match open_stream(p, &run1, None) {
        Err(r) => refused(&r, 429, "too_many_stream_clients", "third stream"),
        Ok(_) => panic!("a third stream was admitted"),
    }
    // A client that goes away frees its place (the server notices at once).
    drop(a);
    let deadline = Instant::now() + Duration::from_secs(5);
    let _c = loop {
        match open_stream(p, &run1, None) {
            Ok(st) => break st,
            Err(r) => {
                assert_eq!(r.code(), "too_many_stream_clients");
                assert!(
                    Instant::now() < deadline,
                    "the closed stream's place was never freed"
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    };
    let r = post(
        p,
        &format!("/api/runs/{run1}/actions"),
        &json!({"type": "cancel"}),
    );
    assert_eq!(r.status, 200);
    // Once run_1 ended, a new run starts; with two retained, the third evicts run_1.
    let wait_start = |script: &str| -> String {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let r = post(p, "/api/runs", &json!({"script": script}));
            if r.status == 201 {
                return r.json()["runId"].as_str().unwrap().to_owned();
            }
            assert_eq!(r.code(), "too_many_active_runs");
            assert!(
                Instant::now() < deadline,
                "the ended run never freed its place"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let run2 = wait_start("happy-path");
    assert_eq!(run2, "run_2");
    open_stream(p, &run2, None).unwrap().read_to_end();
    let run3 = wait_start("happy-path");
    assert_eq!(run3, "run_3");
    match open_stream(p, &run1, None) {
        Err(r) => refused(&r, 404, "unknown_run", "evicted run"),
        Ok(_) => panic!("run_1 was not evicted"),
    }
    assert!(open_stream(p, &run2, None).is_ok(), "run_2 is retained");
}
