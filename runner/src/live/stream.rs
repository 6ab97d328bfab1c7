//! A run's stream as server-sent events.
//!
//! Why SSE and not NDJSON: each message is one SSE event whose `id` is the cursor after
//! it (the number of messages the client has then seen), so a browser's `EventSource`
//! resumes a dropped stream by itself with `Last-Event-ID` — exactly the cursor the
//! admission machine reads — and hands the page one complete message per event (no
//! partial-line buffering in JavaScript). The event name carries the message kind
//! (`event`, `receipt`, `diagnostic`), so the page passes an `event`'s data straight to
//! the core without unwrapping anything itself. After the last message of a finished
//! run the stream sends `end` (`{"messages": N}`) and closes; an `EventSource` must be
//! closed then (it would reconnect, and get the `end` again). A comment line every 15 s
//! keeps idle streams alive and finds gone clients.

use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame};
use stapel_runner_protocol::admission::AdmissionInput;
use tokio::sync::mpsc;

use super::runs::RunState;
use super::Shared;

/// Interval of the keep-alive comment.
pub const KEEPALIVE: Duration = Duration::from_secs(15);
/// Frames buffered per client before the stream waits for it (a slow client lags behind
/// in the retained history; nothing grows).
const CLIENT_QUEUE: usize = 64;

/// A response body fed by a channel.
pub(crate) struct ChannelBody(mpsc::Receiver<Bytes>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b))))
    }
}

fn event(id: usize, name: &str, data: &str) -> Bytes {
    Bytes::from(format!("id: {id}\nevent: {name}\ndata: {data}\n\n"))
}

/// Start streaming `state` from `cursor` for the request `id` admitted as a stream
/// client; the body to answer with. The admission machine hears `StreamClosed` when the
/// stream ends, however it ends.
pub(crate) fn open(shared: Arc<Shared>, state: Arc<RunState>, cursor: u64, id: u64) -> ChannelBody {
    let (tx, rx) = mpsc::channel::<Bytes>(CLIENT_QUEUE);
    tokio::spawn(async move {
        pump(&state, cursor, &tx).await;
        shared.feed(AdmissionInput::StreamClosed { id });
    });
    ChannelBody(rx)
}

async fn pump(state: &RunState, cursor: u64, tx: &mpsc::Sender<Bytes>) {
    let mut changed = state.subscribe();
    let mut next = usize::try_from(cursor).unwrap_or(usize::MAX);
    if tx
        .send(Bytes::from_static(b"retry: 1000\n\n"))
        .await
        .is_err()
    {
        return;
    }
    loop {
        let (batch, done, gone, total) = {
            let log = state.log();
            let total = log.messages.len();
            next = next.min(total);
            let batch: Vec<_> = log.messages.get(next..).unwrap_or_default().to_vec();
            (batch, log.done, log.gone, total)
        };
        for m in batch {
            next += 1;
            if tx.send(event(next, m.event, &m.data)).await.is_err() {
                return;
            }
        }
        if gone {
            return;
        }
        if done && next >= total {
            let end = format!("{{\"messages\":{total}}}");
            let _ = tx.send(event(total, "end", &end)).await;
            return;
        }
        tokio::select! {
            r = changed.changed() => if r.is_err() { return },
            () = tx.closed() => return,
            () = tokio::time::sleep(KEEPALIVE) => {
                if tx.send(Bytes::from_static(b": keepalive\n\n")).await.is_err() {
                    return;
                }
            }
        }
    }
}
