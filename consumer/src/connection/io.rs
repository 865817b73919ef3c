//! A connection's socket task and its write queue: frames the callers could not write (every
//! frame, under TLS) go out from here, responses are read in order and matched to the
//! requests waiting for them, and large receive buffers are reused.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::sync::{oneshot, Notify};

use super::transport::tls_error;
use crate::error::NetError;
use crate::util::lock;

/// The largest response accepted (a fetch is bounded by `fetch.max.bytes`, 50 MiB by default).
const MAX_RESPONSE: usize = 256 << 20;

/// A request waiting for its response.
pub(super) struct Pending {
    pub(super) correlation_id: i32,
    pub(super) reply: oneshot::Sender<Result<Bytes, NetError>>,
}

/// Who writes frames to the socket.
pub(super) enum Writer {
    /// Plain TCP: a caller writes its frame itself when nothing is queued before it.
    Direct(Arc<OwnedWriteHalf>),
    /// TLS: the background task writes every frame (it owns the stream's write half).
    Task,
}

/// The connection's write side and the requests waiting for responses, under one lock so
/// that requests are registered in the order their bytes go out.
pub(super) struct Out {
    /// Taken out when the connection closes (dropping the last handle shuts the socket).
    pub(super) half: Option<Writer>,
    /// Frames (the first maybe partly written) not yet taken by the socket.
    pub(super) queue: VecDeque<Bytes>,
    /// Requests written or queued, oldest first.
    pub(super) pending: VecDeque<Pending>,
}

impl Out {
    pub(super) fn new(half: Writer) -> Arc<Mutex<Out>> {
        Arc::new(Mutex::new(Out {
            half: Some(half),
            queue: VecDeque::new(),
            pending: VecDeque::new(),
        }))
    }

    /// Writes queued frames until the queue is empty (true) or the socket is full (false;
    /// always, with frames queued, when the task writes).
    pub(super) fn flush(&mut self) -> std::io::Result<bool> {
        let half = match self.half.as_ref() {
            None => return Err(std::io::ErrorKind::NotConnected.into()),
            Some(Writer::Task) => return Ok(self.queue.is_empty()),
            Some(Writer::Direct(half)) => half,
        };
        while let Some(front) = self.queue.front_mut() {
            match half.try_write(front) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) if n == front.len() => {
                    self.queue.pop_front();
                }
                Ok(n) => front.advance(n),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Fails every waiting request (their senders dropped) and drops the write side.
    pub(super) fn shut(&mut self) {
        self.half = None;
        self.queue.clear();
        self.pending.clear();
    }
}

impl std::fmt::Debug for Out {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Out({} frames queued, {} pending)",
            self.queue.len(),
            self.pending.len()
        )
    }
}

/// Writes what callers could not (plain TCP: they write themselves while the socket takes
/// it), whenever woken.
async fn write_direct(out: &Mutex<Out>, queued: &Notify) {
    loop {
        queued.notified().await;
        loop {
            let blocked = {
                let mut o = lock(out);
                match o.flush() {
                    Ok(true) => break,
                    Ok(false) => match o.half.as_ref() {
                        Some(Writer::Direct(half)) => half.clone(),
                        _ => return,
                    },
                    Err(_) => return,
                }
            };
            if blocked.writable().await.is_err() {
                return;
            }
        }
    }
}

/// Writes every queued frame, in order, to `write` (the TLS stream's write half), flushing
/// whenever the queue runs empty.
async fn write_queued<W: AsyncWrite + Unpin>(mut write: W, out: &Mutex<Out>, queued: &Notify) {
    loop {
        queued.notified().await;
        loop {
            let frame = {
                let mut o = lock(out);
                if o.half.is_none() {
                    return;
                }
                o.queue.pop_front()
            };
            let Some(frame) = frame else {
                break;
            };
            if write.write_all(&frame).await.is_err() {
                return;
            }
        }
        if write.flush().await.is_err() {
            return;
        }
    }
}

/// The socket task: writes the frames callers queued (`write` None: plain TCP, whose callers
/// write too), reads responses in order, and fails every pending request when either side
/// stops (with the TLS error when TLS ended it, else [`NetError::Disconnected`]).
pub(super) async fn run<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(
    addr: String,
    mut read: R,
    write: Option<W>,
    out: Arc<Mutex<Out>>,
    queued: Arc<Notify>,
    alive: Arc<AtomicBool>,
) {
    let writer = async {
        match write {
            None => write_direct(&out, &queued).await,
            Some(write) => write_queued(write, &out, &queued).await,
        }
        None
    };
    let reader = async {
        let mut buffers = ReceiveBuffers::default();
        loop {
            let len = match read.read_i32().await {
                Ok(len) => len,
                Err(e) => return tls_error(&addr, &e),
            };
            // (A `None` here ends the connection, with no error of TLS's to report.)
            let len = usize::try_from(len)
                .ok()
                .filter(|n| *n >= 4 && *n <= MAX_RESPONSE)?;
            // Read into spare capacity: no zeroing of (up to fetch-sized) buffers.
            let mut body = buffers.take(len);
            while body.len() < len {
                let left = len - body.len();
                let mut limited = (&mut body).limit(left);
                match read.read_buf(&mut limited).await {
                    Ok(0) => return None,
                    Err(e) => return tls_error(&addr, &e),
                    Ok(_) => {}
                }
            }
            let body = body.freeze();
            buffers.keep(&body);
            let correlation_id = i32::from_be_bytes([body[0], body[1], body[2], body[3]]);
            let p = lock(&out).pending.pop_front()?;
            if p.correlation_id != correlation_id {
                let _ = p.reply.send(Err(NetError::Malformed {
                    addr: addr.clone(),
                    api: ApiKey::ApiVersions,
                    reason: format!(
                        "response to correlation id {correlation_id}, expected {}",
                        p.correlation_id
                    ),
                }));
                return None;
            }
            // The caller may have given up (its future dropped): nothing to do.
            let _ = p.reply.send(Ok(body));
        }
    };
    let failure = tokio::select! {
        f = writer => f,
        f = reader => f,
    };
    alive.store(false, Ordering::Relaxed);
    let mut out = lock(&out);
    // A TLS failure (the broker refused the client's certificate, which TLS 1.3 reports after
    // the handshake) goes to the requests waiting; dropping the senders fails the rest with
    // `Disconnected`.
    if let Some(failure) = failure {
        for p in out.pending.drain(..) {
            let _ = p.reply.send(Err(failure.clone()));
        }
    }
    out.shut();
}

/// Large responses are read into buffers of earlier ones once nothing refers to them any more
/// (the records handed out are slices of their response). A fresh buffer of megabytes costs a
/// page fault per 4 KiB as it is filled: reading a 6 MB fetch response took 5-6 ms that way
/// against 1-1.5 ms into memory already touched (this 2-vCPU VM, `lograil-bench consume`).
#[derive(Default)]
struct ReceiveBuffers {
    /// Responses of at least `REUSE_MIN` bytes, newest last; at most `REUSE_KEEP`.
    recent: VecDeque<Bytes>,
}

const REUSE_MIN: usize = 256 << 10;
const REUSE_KEEP: usize = 4;
/// New large buffers are rounded up to this, so that a slightly larger response fits later.
const REUSE_ROUND: usize = 1 << 20;

impl ReceiveBuffers {
    /// An empty buffer with room for `len` bytes: a free earlier one if there is one large
    /// enough.
    fn take(&mut self, len: usize) -> BytesMut {
        if len < REUSE_MIN {
            return BytesMut::with_capacity(len);
        }
        if let Some(i) = self.recent.iter().position(Bytes::is_unique) {
            if let Some(Ok(mut buf)) = self.recent.remove(i).map(Bytes::try_into_mut) {
                buf.clear();
                if buf.capacity() >= len {
                    return buf;
                }
            }
        }
        BytesMut::with_capacity(len.div_ceil(REUSE_ROUND) * REUSE_ROUND)
    }

    /// Remembers a large response's buffer for reuse once its records are dropped.
    fn keep(&mut self, body: &Bytes) {
        if body.len() >= REUSE_MIN {
            self.recent.push_back(body.clone());
            if self.recent.len() > REUSE_KEEP {
                self.recent.pop_front();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_buffer_is_reused_once_its_slices_are_dropped() {
        let mut buffers = ReceiveBuffers::default();
        let mut first = buffers.take((5 << 19) + 1);
        assert_eq!(first.capacity(), 3 << 20, "rounded up to whole MiB");
        first.extend_from_slice(&vec![7u8; 5 << 19]);
        let first = first.freeze();
        let address = first.as_ptr();
        buffers.keep(&first);
        let record = first.slice(100..200);
        drop(first);
        let second = buffers.take(3 << 20);
        assert_ne!(second.as_ptr(), address, "a record still refers to it");
        drop(record);
        let third = buffers.take(3 << 20);
        assert_eq!(third.as_ptr(), address, "free again: reused");
        assert!(third.is_empty());
        let small = buffers.take(1000);
        assert!(
            small.capacity() < REUSE_MIN,
            "small responses are not pooled"
        );
    }
}
