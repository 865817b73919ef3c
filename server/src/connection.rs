//! One client connection: frames in, one at a time, responses out in the same order.
//!
//! Requests are handled one after the other, as Kafka does (it mutes a connection while a
//! request is in flight), which answers pipelined requests in order by construction. A frame
//! that is malformed, truncated or too large closes this connection with one logged line; the
//! broker and its other connections carry on.

use std::net::SocketAddr;
use std::sync::Arc;

use tokio::io::{AsyncWriteExt, BufReader, BufWriter};
use tokio::net::TcpStream;
use tracing::Instrument;

use crate::broker::Broker;
use crate::frame::read_frame;
use crate::handlers::{self, Session};

/// Serves one connection until the client closes it, sends something unreadable, or the
/// broker shuts down; in a span naming the peer and (once known) the client id.
pub async fn serve(broker: Arc<Broker>, socket: TcpStream, peer: SocketAddr) {
    let span = tracing::info_span!("connection", %peer, client_id = tracing::field::Empty);
    serve_in_span(broker, socket, peer).instrument(span).await;
}

async fn serve_in_span(broker: Arc<Broker>, socket: TcpStream, peer: SocketAddr) {
    let _ = socket.set_nodelay(true);
    let (reader, writer) = socket.into_split();
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let mut writer = BufWriter::with_capacity(64 * 1024, writer);
    let mut shutdown = broker.shutdown.clone();
    let mut session = Session::new(peer);
    let max = broker.config.max_request_bytes;
    loop {
        if broker.is_shutting_down() {
            break;
        }
        let frame = tokio::select! {
            frame = read_frame(&mut reader, max) => frame,
            _ = shutdown.changed() => break,
        };
        let frame = match frame {
            Ok(Some(frame)) => frame,
            Ok(None) => break,
            Err(e) => {
                tracing::warn!(error = %e, "closing connection");
                break;
            }
        };
        match handlers::handle(&broker, frame, &mut session).await {
            Ok(Some(response)) => {
                // Each response goes out before the next request is handled: that request may
                // wait (a long-polling fetch, a JoinGroup) and must not hold this one back. A
                // client that stops reading cannot hold up shutdown either.
                let written = async {
                    writer.write_all(&response).await?;
                    writer.flush().await
                };
                tokio::select! {
                    result = written => {
                        if let Err(e) = result {
                            tracing::debug!(error = %e, "client went away");
                            return;
                        }
                    }
                    _ = shutdown.changed() => return,
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(error = %e, "closing connection");
                break;
            }
        }
    }
    // Whatever is buffered goes out, unless the client stopped reading.
    let _ = tokio::time::timeout(std::time::Duration::from_secs(1), writer.flush()).await;
}
