//! Produce v0–2: advertised (older librdkafka turns compression off when they are missing) but
//! not served. kafka-protocol cannot decode them, so just enough of the request is read by hand
//! to answer every partition with UNSUPPORTED_VERSION.

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::error::ResponseError;

/// The first Produce version served.
pub const MIN_VERSION: i16 = 3;

/// Answers a Produce v0–2 frame with UNSUPPORTED_VERSION for every partition it names (no
/// response for acks=0); `Err` says what in the frame is malformed.
pub fn reject(frame: Bytes, version: i16) -> Result<Option<BytesMut>, &'static str> {
    let bad = |reason: &'static str| reason;
    let mut buf = frame;
    let take_string = |buf: &mut Bytes| -> Result<Bytes, &'static str> {
        let len = buf.try_get_i16().map_err(|_| bad("truncated"))?;
        let len = usize::try_from(len).unwrap_or(0);
        if buf.remaining() < len {
            return Err(bad("truncated string"));
        }
        Ok(buf.split_to(len))
    };
    buf.advance(4); // api key, version
    let correlation_id = buf.try_get_i32().map_err(|_| bad("truncated"))?;
    take_string(&mut buf)?; // client id
    let acks = buf.try_get_i16().map_err(|_| bad("truncated"))?;
    buf.try_get_i32().map_err(|_| bad("truncated"))?; // timeout
    let mut out = BytesMut::new();
    out.put_i32(0); // length, filled in below
    out.put_i32(correlation_id);
    let topics = buf.try_get_i32().map_err(|_| bad("truncated"))?;
    out.put_i32(topics.max(0));
    for _ in 0..topics.max(0) {
        let name = take_string(&mut buf)?;
        out.put_i16(i16::try_from(name.len()).map_err(|_| bad("topic name too long"))?);
        out.put_slice(&name);
        let partitions = buf.try_get_i32().map_err(|_| bad("truncated"))?;
        out.put_i32(partitions.max(0));
        for _ in 0..partitions.max(0) {
            let index = buf.try_get_i32().map_err(|_| bad("truncated"))?;
            let size = buf.try_get_i32().map_err(|_| bad("truncated"))?;
            let size = usize::try_from(size).unwrap_or(0);
            if buf.remaining() < size {
                return Err(bad("truncated records"));
            }
            buf.advance(size);
            out.put_i32(index);
            out.put_i16(ResponseError::UnsupportedVersion.code());
            out.put_i64(-1); // base offset
            if version >= 2 {
                out.put_i64(-1); // log append time
            }
        }
    }
    if version >= 1 {
        out.put_i32(0); // throttle time
    }
    if acks == 0 {
        // No response to acks=0, even to refuse it.
        return Ok(None);
    }
    let len = i32::try_from(out.len() - 4).map_err(|_| bad("too large"))?;
    out[..4].copy_from_slice(&len.to_be_bytes());
    Ok(Some(out))
}
