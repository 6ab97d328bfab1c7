//! One task per WebSocket: it reads and writes, and talks to the case driver through
//! two channels, so the driver handles server- and client-side sockets alike.

use futures_util::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio_tungstenite::tungstenite::Message as WsMessage;
use tokio_tungstenite::WebSocketStream;

/// What arrived on a socket.
#[derive(Debug)]
pub enum WsIn {
    /// A text message.
    Text(String),
    /// A binary message.
    Binary(Vec<u8>),
    /// The socket ended: the peer closed it (with the close code, if any) or the
    /// transport failed.
    Closed(String),
}

/// What the driver asks of a socket.
#[derive(Debug)]
pub enum WsOut {
    /// Send a text message.
    Text(String),
    /// Send a binary message.
    Binary(Vec<u8>),
    /// Close with a handshake (code 1000).
    Close,
    /// Drop the connection at once, without a close handshake (a cut).
    Abort,
}

/// The driver's end of a socket.
#[derive(Debug)]
pub struct Conn {
    /// Requests to the socket task.
    pub tx: mpsc::UnboundedSender<WsOut>,
    /// What the socket task read.
    pub rx: mpsc::UnboundedReceiver<WsIn>,
}

/// Start the task that serves `ws`.
pub fn spawn<S>(ws: WebSocketStream<S>) -> Conn
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, mut out_rx) = mpsc::unbounded_channel::<WsOut>();
    let (in_tx, in_rx) = mpsc::unbounded_channel::<WsIn>();
    tokio::spawn(async move {
        let (mut sink, mut stream) = ws.split();
        loop {
            tokio::select! {
                msg = stream.next() => match msg {
                    Some(Ok(WsMessage::Text(t))) => {
                        let _ = in_tx.send(WsIn::Text(t.as_str().to_string()));
                    }
                    Some(Ok(WsMessage::Binary(b))) => {
                        let _ = in_tx.send(WsIn::Binary(b.to_vec()));
                    }
                    Some(Ok(WsMessage::Close(frame))) => {
                        let why = frame.map_or_else(
                            || "closed by the peer".to_string(),
                            |f| format!("closed by the peer: {} {}", u16::from(f.code), f.reason),
                        );
                        let _ = in_tx.send(WsIn::Closed(why));
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), sink.close()).await;
                        return;
                    }
                    Some(Ok(_)) => {}
                    Some(Err(e)) => {
                        let _ = in_tx.send(WsIn::Closed(format!("transport failed: {e}")));
                        return;
                    }
                    None => {
                        let _ = in_tx.send(WsIn::Closed("the connection ended".into()));
                        return;
                    }
                },
                cmd = out_rx.recv() => match cmd {
                    Some(WsOut::Text(t)) => {
                        if sink.send(WsMessage::text(t)).await.is_err() {
                            let _ = in_tx.send(WsIn::Closed("write failed".into()));
                            return;
                        }
                    }
                    Some(WsOut::Binary(b)) => {
                        if sink.send(WsMessage::binary(b)).await.is_err() {
                            let _ = in_tx.send(WsIn::Closed("write failed".into()));
                            return;
                        }
                    }
                    Some(WsOut::Close) => {
                        let _ = tokio::time::timeout(std::time::Duration::from_secs(2), sink.close()).await;
                        return;
                    }
                    Some(WsOut::Abort) | None => return,
                },
            }
        }
    });
    Conn {
        tx: out_tx,
        rx: in_rx,
    }
}
