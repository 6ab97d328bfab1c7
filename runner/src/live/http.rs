//! One HTTP/1.1 connection: every request is judged by the admission machine before
//! anything else happens, then its route runs.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{BodyExt, Either, Full};
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_LENGTH, CONTENT_TYPE};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use serde_json::{json, Value};
use stapel_runner_protocol::admission::{
    AdmissionInput, Refusal, RequestHead, Route, ERROR_CONTENT_TYPE, RESPONSE_HEADERS,
};
use tokio::net::TcpStream;

use super::stream::{self, ChannelBody};
use super::{assets, runs, Shared, Verdict, HEADER_READ_TIMEOUT, RECEIPT_TIMEOUT};

type Body = Either<Full<Bytes>, ChannelBody>;

/// Serve one connection until it closes.
pub(crate) async fn connection(
    shared: Arc<Shared>,
    stream: TcpStream,
    peer: SocketAddr,
    local: SocketAddr,
) {
    let service = service_fn(move |req| {
        let shared = shared.clone();
        async move { Ok::<_, Infallible>(request(shared, peer, local, req).await) }
    });
    let _ = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_READ_TIMEOUT)
        .serve_connection(TokioIo::new(stream), service)
        .await;
}

/// A response with the core's headers.
fn response(status: u16, content_type: &str, body: Body) -> Response<Body> {
    let mut r = Response::new(body);
    *r.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let h = r.headers_mut();
    for (name, value) in RESPONSE_HEADERS {
        h.insert(*name, HeaderValue::from_static(value));
    }
    if let Ok(v) = HeaderValue::from_str(content_type) {
        h.insert(CONTENT_TYPE, v);
    }
    r
}

fn full(status: u16, content_type: &str, body: impl Into<Bytes>) -> Response<Body> {
    response(status, content_type, Either::Left(Full::new(body.into())))
}

fn json_response(status: u16, v: &Value) -> Response<Body> {
    full(status, "application/json", v.to_string())
}

/// The refusal's status and the core's JSON error body.
fn refused(r: Refusal) -> Response<Body> {
    full(r.status(), ERROR_CONTENT_TYPE, r.body())
}

/// Forgets the request's verdict channel, and a body still being read, however the
/// request ends (a client that goes away mid-body drops the handler's future).
struct Guard<'a> {
    shared: &'a Shared,
    id: u64,
    reading: bool,
}

impl Drop for Guard<'_> {
    fn drop(&mut self) {
        if self.reading {
            self.shared.feed(AdmissionInput::Aborted { id: self.id });
        }
        self.shared.unregister(self.id);
    }
}

async fn request(
    shared: Arc<Shared>,
    peer: SocketAddr,
    local: SocketAddr,
    req: Request<Incoming>,
) -> Response<Body> {
    let (id, mut verdicts) = shared.register();
    let mut guard = Guard {
        shared: &shared,
        id,
        reading: false,
    };
    let head = RequestHead {
        id,
        peer: peer.to_string(),
        local: local.to_string(),
        method: req.method().as_str().to_owned(),
        target: req.uri().to_string(),
        headers: req
            .headers()
            .iter()
            .map(|(n, v)| {
                (
                    n.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect(),
    };
    let head_only = req.method() == Method::HEAD;
    let what = format!("{} {:.200}", head.method, head.target);
    shared.feed(AdmissionInput::Request(head));
    let mut verdict = verdicts.recv().await;
    if matches!(verdict, Some(Verdict::ReadBody)) {
        guard.reading = true;
        let mut body = req.into_body();
        verdict = loop {
            tokio::select! {
                biased;
                v = verdicts.recv() => break v,
                frame = body.frame() => match frame {
                    Some(Ok(f)) => {
                        if let Ok(data) = f.into_data() {
                            shared.feed(AdmissionInput::Body { id, data: data.to_vec() });
                        }
                    }
                    Some(Err(_)) => return full(400, "text/plain", ""),
                    None => {
                        guard.reading = false;
                        shared.feed(AdmissionInput::BodyEnd { id });
                        break verdicts.recv().await;
                    }
                },
            }
        };
        // A verdict while reading means the body was refused (or timed out).
        guard.reading = false;
    }
    let reply = match verdict {
        Some(Verdict::Admit(route)) => route_response(&shared, id, route, head_only).await,
        Some(Verdict::Refuse(r)) => {
            eprintln!(
                "stapel-runner live: refused {what:?} from {peer}: {} {}",
                r.status(),
                r.code()
            );
            refused(r)
        }
        // Not a verdict (cannot happen: the machine answers every request).
        _ => full(500, "text/plain", ""),
    };
    drop(guard);
    reply
}

async fn route_response(
    shared: &Arc<Shared>,
    id: u64,
    route: Route,
    head_only: bool,
) -> Response<Body> {
    match route {
        Route::Page { path } => match assets::get(&path) {
            Some(asset) => {
                let mut r = if head_only {
                    full(200, asset.content_type, Bytes::new())
                } else {
                    full(200, asset.content_type, Bytes::from_static(asset.bytes))
                };
                r.headers_mut()
                    .insert(CONTENT_LENGTH, HeaderValue::from(asset.bytes.len()));
                r
            }
            // Every page path is an asset (the machine's `pages` are the assets' paths).
            None => refused(Refusal::NotFound),
        },
        Route::Scripts => {
            let o = shared.options();
            json_response(
                200,
                &json!({"scripts": o.scripts, "default": o.default_script}),
            )
        }
        Route::StartRun {
            run,
            session,
            script,
        } => {
            let state = runs::start(shared, run, session, script);
            json_response(201, &state.started_body())
        }
        Route::Events { run, cursor } => match shared.run(&run) {
            Some(state) => {
                let body = stream::open(shared.clone(), state, cursor, id);
                let mut r = response(200, "text/event-stream", Either::Right(body));
                r.headers_mut()
                    .insert("X-Accel-Buffering", HeaderValue::from_static("no"));
                r
            }
            None => {
                // Evicted between the verdict and now.
                shared.feed(AdmissionInput::StreamClosed { id });
                refused(Refusal::UnknownRun)
            }
        },
        Route::Action {
            run,
            command,
            payload,
        } => {
            let Some(state) = shared.run(&run) else {
                return refused(Refusal::UnknownRun);
            };
            let Some(command_id) = state.steer(command, payload).await else {
                return refused(Refusal::RunFinished);
            };
            match state.receipt(&command_id, RECEIPT_TIMEOUT).await {
                Some(receipt) => json_response(200, &receipt),
                None => json_response(202, &json!({"commandId": command_id, "status": "queued"})),
            }
        }
        _ => refused(Refusal::NotFound),
    }
}
