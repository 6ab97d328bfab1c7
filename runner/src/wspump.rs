//! One WebSocket as a tokio task that does what a link says: write frames, pause and
//! resume reading, start the close handshake; and reports what happens on it (frames,
//! its end, failures) with the socket's id. No decision is made here: the link (the
//! core's `RunnerLink` or `HubLink`) decides, the loop that owns the link relays its
//! outputs as [`Command`]s and the [`Report`]s as link inputs. Aborting a socket is
//! aborting its task (dropping the stream drops the TCP connection).

use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use stapel_runner_protocol::host::InboundFrame;
use stapel_runner_protocol::link::ConnectFailure;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::protocol::CloseFrame;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::WebSocketStream;

/// What the loop tells a socket's task (the link's `Send`, `Pause`, `Resume`, `Close`;
/// its `Abort` is the task's abort).
#[derive(Debug)]
pub enum Command {
    /// Write a text frame.
    Send(String),
    /// Stop reading.
    Pause,
    /// Read again.
    Resume,
    /// Start the close handshake with this code and reason.
    Close(u16, String),
}

/// What a socket's task tells the loop (each a link input with the socket's id).
#[derive(Debug)]
pub enum Report {
    /// The upgrade completed (`Opened`).
    Opened(u64),
    /// The connect failed (`ConnectFailed`; the detail never holds the token).
    ConnectFailed(u64, ConnectFailure, String),
    /// A frame was read (`Frame`).
    Frame(u64, InboundFrame),
    /// The socket is gone: the peer closed it, or the close handshake completed
    /// (`SocketClosed`).
    Closed(u64),
    /// Reading or writing failed (`Failed`).
    Failed(u64, String),
}

/// Serve socket `id` until it ends or the task is aborted. `write_timeout` bounds one
/// batch of writes: a socket that cannot take them in time has failed.
pub async fn pump<S>(
    id: u64,
    socket: WebSocketStream<S>,
    mut commands: mpsc::UnboundedReceiver<Command>,
    reports: mpsc::Sender<Report>,
    write_timeout: Duration,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let (mut sink, mut stream) = socket.split();
    let mut paused = false;
    let mut closing = false;
    loop {
        tokio::select! {
            cmd = commands.recv() => {
                // Every frame already queued goes out in one flush.
                let mut frames = Vec::new();
                let mut next = cmd;
                while let Some(Command::Send(f)) = next {
                    frames.push(f);
                    next = commands.try_recv().ok();
                }
                if !frames.is_empty() {
                    let write = async {
                        for f in frames {
                            sink.feed(WsMessage::text(f)).await?;
                        }
                        sink.flush().await
                    };
                    let failed = match tokio::time::timeout(write_timeout, write).await {
                        Ok(Ok(())) => None,
                        Ok(Err(e)) => Some(format!("write failed: {e}")),
                        Err(_) => Some(format!("no write progress for {} ms", write_timeout.as_millis())),
                    };
                    if let Some(detail) = failed {
                        let _ = reports.send(Report::Failed(id, detail)).await;
                        return;
                    }
                }
                match next {
                    // The loop dropped this socket.
                    None if released(&commands) => return,
                    None | Some(Command::Send(_)) => {}
                    Some(Command::Pause) => paused = true,
                    Some(Command::Resume) => paused = false,
                    Some(Command::Close(code, reason)) => {
                        closing = true;
                        let frame = CloseFrame { code: CloseCode::from(code), reason: reason.into() };
                        let _ = tokio::time::timeout(write_timeout, sink.send(WsMessage::Close(Some(frame)))).await;
                    }
                }
            }
            msg = stream.next(), if !paused || closing => match msg {
                Some(Ok(WsMessage::Text(t))) => {
                    let frame = InboundFrame::Text(t.as_str().to_owned());
                    if reports.send(Report::Frame(id, frame)).await.is_err() {
                        return;
                    }
                }
                Some(Ok(WsMessage::Binary(b))) => {
                    if reports.send(Report::Frame(id, InboundFrame::Binary(b.to_vec()))).await.is_err() {
                        return;
                    }
                }
                // Pings are answered by the library and a close frame when the stream is
                // polled on (the link ignores frames of a socket it is closing); the end of
                // the stream is the socket's end.
                Some(Ok(_)) => {}
                Some(Err(_)) | None => {
                    let _ = reports.send(Report::Closed(id)).await;
                    return;
                }
            },
        }
    }
}

/// `true` when the command channel is closed (the loop let go of the socket).
fn released(commands: &mpsc::UnboundedReceiver<Command>) -> bool {
    commands.is_closed() && commands.is_empty()
}
