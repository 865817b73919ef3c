//! Kafka framing: a big-endian i32 length, then that many bytes: the API key, version,
//! correlation id and the rest of the request.
//!
//! Nothing is allocated on a length's word. The length is checked against the largest request
//! of its API (only Produce may be large) as soon as the API key is in. A request that fits
//! the connection's read-ahead buffer ([`READ_AHEAD`]) is split off it without a copy; a
//! larger one first takes its size from the broker-wide budget of request bytes
//! (`queued.max.request.bytes`), the connection reading nothing more until it gets it, and is
//! then read into a buffer that grows as the bytes arrive, not one of the declared size.

use std::sync::Arc;

use bytes::{Buf, Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// api_key (2) + api_version (2) + correlation_id (4): the least a request can be.
const MIN_REQUEST: usize = 8;
/// Bytes read from the socket at a time; requests up to this size skip the budget.
pub const READ_AHEAD: usize = 64 * 1024;
/// A large request's buffer starts at this size and doubles as its bytes arrive.
const FIRST_CHUNK: usize = 1024 * 1024;

/// Why no request could be read off a connection; the connection closes on any of them.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The declared length is over the limit of its API ([`FrameLimits`]); found as soon as the
    /// length and the API key are in, before the rest is waited for.
    #[error("request of {size} bytes exceeds the {max}-byte limit ({setting})")]
    TooLarge {
        /// The length the frame declares, in bytes.
        size: i64,
        /// The limit, in bytes.
        max: usize,
        /// The flag that sets the limit (`--max-request-bytes`,
        /// `--max-non-produce-request-bytes` or `--sasl-server-max-receive-size`).
        setting: &'static str,
    },
    /// A declared length under the 8 bytes of api_key, api_version and correlation_id
    /// (negative included).
    #[error("frame of {0} bytes is too small to hold a request header")]
    TooSmall(i32),
    /// The peer closed the connection after a frame's first byte and before its last.
    #[error("connection closed in the middle of a frame")]
    Truncated,
    /// The budget semaphore passed to [`FrameReader::read_frame`] was closed while a large
    /// request waited for room (the broker never closes its own).
    #[error("the request budget is closed")]
    BudgetClosed,
    /// Reading the socket failed.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// The largest request accepted, per API.
#[derive(Debug, Clone, Copy)]
pub struct FrameLimits {
    /// Produce (`--max-request-bytes`).
    pub max_request_bytes: usize,
    /// Every other API (`--max-non-produce-request-bytes`).
    pub max_non_produce_request_bytes: usize,
    /// A SASL connection before it authenticated: every API
    /// (`--sasl-server-max-receive-size`).
    pub unauthenticated: Option<usize>,
}

impl FrameLimits {
    /// The largest request of any API, and the setting that says so.
    fn max(&self) -> (usize, &'static str) {
        match self.unauthenticated {
            Some(max) => (max, "--sasl-server-max-receive-size"),
            None => (self.max_request_bytes, "--max-request-bytes"),
        }
    }

    /// The largest request of the API with this key, and the setting that says so.
    fn max_for(&self, api_key: i16) -> (usize, &'static str) {
        if self.unauthenticated.is_some() {
            self.max()
        } else if api_key == ApiKey::Produce as i16 {
            (self.max_request_bytes, "--max-request-bytes")
        } else {
            (
                self.max_non_produce_request_bytes
                    .min(self.max_request_bytes),
                "--max-non-produce-request-bytes",
            )
        }
    }
}

/// One request frame (length prefix removed) and, for a large one, its share of the request
/// budget, given back when the frame is dropped.
#[derive(Debug)]
pub struct Frame {
    /// The request: api_key, api_version, correlation_id, then the rest of the header and the
    /// body.
    pub bytes: Bytes,
    _budget: Option<OwnedSemaphorePermit>,
}

impl Frame {
    /// The frame's bytes, and what keeps its budget taken: drop it once the request is handled.
    pub fn into_parts(self) -> (Bytes, Option<OwnedSemaphorePermit>) {
        (self.bytes, self._budget)
    }
}

/// Reads frames off one connection, with a read-ahead buffer.
#[derive(Debug)]
pub struct FrameReader<R> {
    reader: R,
    buffered: BytesMut,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// Frames `reader`, which must be at the first byte of a frame; nothing is read before
    /// [`fill`](Self::fill) or [`read_frame`](Self::read_frame).
    pub fn new(reader: R) -> Self {
        FrameReader {
            reader,
            buffered: BytesMut::new(),
        }
    }

    /// Whether bytes of the next frame are already here.
    pub fn has_buffered(&self) -> bool {
        !self.buffered.is_empty()
    }

    /// Waits for more bytes from the peer; `Ok(0)` at the end of the stream. Cancel-safe: a
    /// caller racing it against a timer loses no data.
    pub async fn fill(&mut self) -> std::io::Result<usize> {
        if self.buffered.capacity() == self.buffered.len() {
            self.buffered.reserve(READ_AHEAD);
        }
        self.reader.read_buf(&mut self.buffered).await
    }

    /// Reads until at least `n` bytes are buffered.
    async fn fill_to(&mut self, n: usize) -> Result<(), FrameError> {
        while self.buffered.len() < n {
            self.buffered.reserve(n - self.buffered.len());
            if self.reader.read_buf(&mut self.buffered).await? == 0 {
                return Err(FrameError::Truncated);
            }
        }
        Ok(())
    }

    /// Reads one frame. `Ok(None)` when the peer closed the connection between frames. A large
    /// frame waits for room in `budget` before more of it is read.
    pub async fn read_frame(
        &mut self,
        limits: &FrameLimits,
        budget: &Arc<Semaphore>,
    ) -> Result<Option<Frame>, FrameError> {
        if self.buffered.is_empty() && self.fill().await? == 0 {
            return Ok(None);
        }
        self.fill_to(4).await?;
        let size = i32::from_be_bytes([
            self.buffered[0],
            self.buffered[1],
            self.buffered[2],
            self.buffered[3],
        ]);
        let (max, setting) = limits.max();
        if i64::from(size) > max as i64 {
            return Err(FrameError::TooLarge {
                size: size.into(),
                max,
                setting,
            });
        }
        let len = match usize::try_from(size) {
            Ok(len) if len >= MIN_REQUEST => len,
            _ => return Err(FrameError::TooSmall(size)),
        };
        self.fill_to(6).await?;
        let api_key = i16::from_be_bytes([self.buffered[4], self.buffered[5]]);
        let (max, setting) = limits.max_for(api_key);
        if len > max {
            return Err(FrameError::TooLarge {
                size: size.into(),
                max,
                setting,
            });
        }
        if 4 + len <= self.buffered.len().max(READ_AHEAD) {
            self.fill_to(4 + len).await?;
            self.buffered.advance(4);
            let bytes = self.buffered.split_to(len).freeze();
            return Ok(Some(Frame {
                bytes,
                _budget: None,
            }));
        }
        let permits = u32::try_from(len).map_err(|_| FrameError::TooSmall(size))?;
        let permit = budget
            .clone()
            .acquire_many_owned(permits)
            .await
            .map_err(|_| FrameError::BudgetClosed)?;
        self.buffered.advance(4);
        let mut body = BytesMut::with_capacity(len.min(FIRST_CHUNK));
        let ahead = self.buffered.len().min(len);
        body.extend_from_slice(&self.buffered.split_to(ahead));
        while body.len() < len {
            if body.len() == body.capacity() {
                body.reserve(body.len().min(len - body.len()));
            }
            let room = (body.capacity() - body.len()).min(len - body.len());
            let mut part = (&mut self.reader).take(room as u64);
            if part.read_buf(&mut body).await? == 0 {
                return Err(FrameError::Truncated);
            }
        }
        Ok(Some(Frame {
            bytes: body.freeze(),
            _budget: Some(permit),
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: FrameLimits = FrameLimits {
        max_request_bytes: 1 << 20,
        max_non_produce_request_bytes: 100,
        unauthenticated: None,
    };

    async fn read(bytes: &[u8], budget: usize) -> Result<Option<Bytes>, FrameError> {
        let budget = Arc::new(Semaphore::new(budget));
        let mut reader = FrameReader::new(bytes);
        Ok(reader.read_frame(&LIMITS, &budget).await?.map(|f| f.bytes))
    }

    fn frame(api_key: i16, len: usize) -> Vec<u8> {
        let mut f = (len as i32).to_be_bytes().to_vec();
        f.extend_from_slice(&api_key.to_be_bytes());
        f.resize(4 + len, 7);
        f
    }

    #[tokio::test]
    async fn frames_are_checked_before_allocation() {
        let ok = frame(18, 8);
        assert_eq!(read(&ok, 0).await.unwrap().unwrap().len(), 8);
        assert!(read(&[], 0).await.unwrap().is_none());
        assert!(matches!(read(&[0, 0], 0).await, Err(FrameError::Truncated)));
        assert!(matches!(
            read(&ok[..10], 0).await,
            Err(FrameError::Truncated)
        ));
        let huge = i32::MAX.to_be_bytes();
        assert!(matches!(
            read(&huge, 0).await,
            Err(FrameError::TooLarge { .. })
        ));
        let negative = (-5i32).to_be_bytes();
        assert!(matches!(
            read(&negative, 0).await,
            Err(FrameError::TooSmall(-5))
        ));
        assert!(matches!(
            read(&3i32.to_be_bytes(), 0).await,
            Err(FrameError::TooSmall(3))
        ));
    }

    #[tokio::test]
    async fn only_produce_requests_may_be_large() {
        assert_eq!(read(&frame(0, 5000), 0).await.unwrap().unwrap().len(), 5000);
        assert!(matches!(
            read(&frame(15, 101), 0).await,
            Err(FrameError::TooLarge {
                max: 100,
                setting: "--max-non-produce-request-bytes",
                ..
            })
        ));
        assert_eq!(read(&frame(15, 100), 0).await.unwrap().unwrap().len(), 100);
    }

    #[tokio::test]
    async fn large_frames_take_budget_and_arrive_whole() {
        let len = 3 * FIRST_CHUNK + 5;
        let mut two = frame(0, len);
        two.extend_from_slice(&frame(0, 9));
        let budget = Arc::new(Semaphore::new(len));
        let mut reader = FrameReader::new(&two[..]);
        let first = reader
            .read_frame(&LIMITS_BIG, &budget)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(first.bytes.len(), len);
        assert_eq!(budget.available_permits(), 0, "held while the frame lives");
        assert!(first.bytes[2..].iter().all(|b| *b == 7));
        drop(first);
        assert_eq!(budget.available_permits(), len);
        let second = reader
            .read_frame(&LIMITS_BIG, &budget)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(second.bytes.len(), 9);
        assert!(reader
            .read_frame(&LIMITS_BIG, &budget)
            .await
            .unwrap()
            .is_none());
    }

    const LIMITS_BIG: FrameLimits = FrameLimits {
        max_request_bytes: 16 << 20,
        max_non_produce_request_bytes: 100,
        unauthenticated: None,
    };

    #[tokio::test]
    async fn a_large_frame_waits_for_room_in_the_budget() {
        let budget = Arc::new(Semaphore::new(READ_AHEAD * 3));
        let held = budget
            .clone()
            .acquire_many_owned(READ_AHEAD as u32 * 2)
            .await
            .unwrap();
        let big = frame(0, READ_AHEAD * 2);
        let mut reader = FrameReader::new(&big[..]);
        tokio::select! {
            biased;
            _ = reader.read_frame(&LIMITS_BIG, &budget) => panic!("read without room in the budget"),
            () = tokio::task::yield_now() => {}
        }
        drop(held);
        let mut reader = FrameReader::new(&big[..]);
        let frame = reader
            .read_frame(&LIMITS_BIG, &budget)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(frame.bytes.len(), READ_AHEAD * 2);
    }
}
