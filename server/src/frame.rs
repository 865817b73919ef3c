//! Kafka framing: a big-endian i32 length, then that many bytes. The length is checked before
//! anything is allocated.

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt};

/// api_key (2) + api_version (2) + correlation_id (4): the least a request can be.
const MIN_REQUEST: usize = 8;

#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    #[error("frame of {size} bytes exceeds the {max}-byte limit (--max-request-bytes)")]
    TooLarge { size: i64, max: usize },
    #[error("frame of {0} bytes is too small to hold a request header")]
    TooSmall(i32),
    #[error("connection closed in the middle of a frame")]
    Truncated,
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Reads one frame. `Ok(None)` when the peer closed the connection between frames.
pub async fn read_frame<R: AsyncRead + Unpin>(
    reader: &mut R,
    max: usize,
) -> Result<Option<Bytes>, FrameError> {
    let mut prefix = [0u8; 4];
    let mut got = 0;
    while got < prefix.len() {
        match reader.read(&mut prefix[got..]).await? {
            0 if got == 0 => return Ok(None),
            0 => return Err(FrameError::Truncated),
            n => got += n,
        }
    }
    let size = i32::from_be_bytes(prefix);
    if i64::from(size) > max as i64 {
        return Err(FrameError::TooLarge {
            size: size.into(),
            max,
        });
    }
    let Ok(len) = usize::try_from(size) else {
        return Err(FrameError::TooSmall(size));
    };
    if len < MIN_REQUEST {
        return Err(FrameError::TooSmall(size));
    }
    // Filled straight from the socket: no zeroing of a buffer about to be overwritten.
    let mut buf = BytesMut::with_capacity(len);
    let mut body = reader.take(len as u64);
    while buf.len() < len {
        if body.read_buf(&mut buf).await? == 0 {
            return Err(FrameError::Truncated);
        }
    }
    Ok(Some(buf.freeze()))
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn read(bytes: &[u8], max: usize) -> Result<Option<Bytes>, FrameError> {
        let mut reader = bytes;
        read_frame(&mut reader, max).await
    }

    #[tokio::test]
    async fn frames_are_checked_before_allocation() {
        let mut ok = 8i32.to_be_bytes().to_vec();
        ok.extend_from_slice(&[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(read(&ok, 100).await.unwrap().unwrap().len(), 8);
        assert!(read(&[], 100).await.unwrap().is_none());
        assert!(matches!(
            read(&[0, 0], 100).await,
            Err(FrameError::Truncated)
        ));
        assert!(matches!(
            read(&ok[..10], 100).await,
            Err(FrameError::Truncated)
        ));
        let huge = i32::MAX.to_be_bytes();
        assert!(matches!(
            read(&huge, 100).await,
            Err(FrameError::TooLarge { .. })
        ));
        let negative = (-5i32).to_be_bytes();
        assert!(matches!(
            read(&negative, 100).await,
            Err(FrameError::TooSmall(-5))
        ));
        assert!(matches!(
            read(&3i32.to_be_bytes(), 100).await,
            Err(FrameError::TooSmall(3))
        ));
    }
}
