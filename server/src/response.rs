//! A response frame on its way out: the encoded bytes, with the record batches of Fetch and
//! ShareFetch responses shared with the segment map rather than copied into them.
//!
//! Records are read as slices of a segment's memory map ([`Bytes`] that keep the map alive).
//! Encoding a response would copy every fetched byte once more before the kernel copies it to
//! the socket; instead [`Response::encode`] is told which slices to share, the encoder's write
//! of each one starts a new part, and the connection hands all parts to one vectored write.

use std::io::IoSlice;

use bytes::buf::UninitSlice;
use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::buf::ByteBufMut;
use kafka_protocol::protocol::Encodable;
use tokio::io::{AsyncWrite, AsyncWriteExt};

/// Record slices shorter than this are copied: an extra part costs more than the copy.
pub const SHARE_AT_LEAST: usize = 4096;

/// Parts handed to one `writev` at most (Linux refuses more than 1024).
const MAX_PARTS_PER_WRITE: usize = 512;

/// A response frame (length prefix included): `parts` then `tail`, in that order on the wire.
#[derive(Debug, Default)]
pub struct Response {
    parts: Vec<Bytes>,
    tail: BytesMut,
    /// Bytes of `parts` that are shared slices, not encoded ones.
    shared_len: usize,
}

impl From<BytesMut> for Response {
    fn from(tail: BytesMut) -> Response {
        Response {
            parts: Vec::new(),
            tail,
            shared_len: 0,
        }
    }
}

/// kafka-protocol's encoding errors.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl Response {
    /// Runs `encode` into `scratch`, sharing (not copying) every slice of `shared` the encoder
    /// writes whole, in the order given; any other write, and a shared slice written out of
    /// order, is copied. The result is the bytes `encode` would have written into a buffer.
    pub fn encode<E: From<&'static str>>(
        scratch: &mut BytesMut,
        shared: Vec<Bytes>,
        encode: impl FnOnce(&mut SharingBuf) -> Result<(), E>,
    ) -> Result<Response, E> {
        scratch.clear();
        let mut buf = SharingBuf {
            encoded: std::mem::take(scratch),
            parts: Vec::new(),
            frozen: 0,
            shared_len: 0,
            shared: shared
                .into_iter()
                .filter(|b| b.len() >= SHARE_AT_LEAST)
                .collect(),
            next: 0,
            reached_back: false,
            discard: Vec::new(),
        };
        let result = encode(&mut buf).and_then(|()| match buf.reached_back {
            true => Err(E::from(
                "the encoder reached back past a shared record slice",
            )),
            false => Ok(()),
        });
        let mut tail = buf.encoded;
        let response = Response {
            parts: buf.parts,
            tail: tail.split(),
            shared_len: buf.shared_len,
        };
        *scratch = tail;
        result.map(|()| response)
    }

    /// The frame's length in bytes.
    pub fn len(&self) -> usize {
        self.parts.iter().map(Bytes::len).sum::<usize>() + self.tail.len()
    }

    /// Bytes the encoder wrote into the scratch buffer (the frame less its shared slices).
    pub fn encoded_len(&self) -> usize {
        self.len() - self.shared_len
    }

    /// The whole frame in one buffer (a copy when records are shared).
    #[cfg(any(test, feature = "fuzzing"))]
    pub fn to_bytes(&self) -> Bytes {
        if self.parts.is_empty() {
            return Bytes::copy_from_slice(&self.tail);
        }
        let mut all = BytesMut::with_capacity(self.len());
        for part in &self.parts {
            all.put_slice(part);
        }
        all.put_slice(&self.tail);
        all.freeze()
    }

    /// Writes the frame to `writer` with vectored writes and flushes it.
    pub async fn write_to<W: AsyncWrite + Unpin>(&self, writer: &mut W) -> std::io::Result<()> {
        if self.parts.is_empty() {
            writer.write_all(&self.tail).await?;
            return writer.flush().await;
        }
        let mut slices: Vec<IoSlice<'_>> = self
            .parts
            .iter()
            .map(|p| IoSlice::new(p))
            .chain([IoSlice::new(&self.tail)])
            .filter(|s| !s.is_empty())
            .collect();
        let mut rest = &mut slices[..];
        while !rest.is_empty() {
            let upto = rest.len().min(MAX_PARTS_PER_WRITE);
            let n = writer.write_vectored(&rest[..upto]).await?;
            if n == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            IoSlice::advance_slices(&mut rest, n);
        }
        writer.flush().await
    }

    /// The shared parts (for tests: which slices went out without a copy).
    #[cfg(test)]
    fn shared_parts(&self) -> usize {
        self.parts.len()
    }
}

impl Response {
    /// Encodes `body` into `scratch` as the response frame (length prefix, header, body) to
    /// request `correlation_id` of API `key` at `version`, sharing the slices of `shared`
    /// (see [`Response::encode`]).
    pub fn frame<T: Encodable>(
        key: ApiKey,
        version: i16,
        correlation_id: i32,
        body: &T,
        scratch: &mut BytesMut,
        shared: Vec<Bytes>,
    ) -> Result<Response, BoxError> {
        let header = ResponseHeader::default().with_correlation_id(correlation_id);
        let header_version = key.response_header_version(version);
        Response::encode(scratch, shared, |out| {
            encode_frame(&header, header_version, body, version, out)
        })
    }
}

/// Length prefix, header, body.
fn encode_frame<T: Encodable>(
    header: &ResponseHeader,
    header_version: i16,
    body: &T,
    version: i16,
    out: &mut SharingBuf,
) -> Result<(), BoxError> {
    let size = header.compute_size(header_version)? + body.compute_size(version)?;
    let prefix =
        i32::try_from(size).map_err(|_| format!("response of {size} bytes exceeds 2 GiB"))?;
    out.reserve(4 + size);
    out.put_i32(prefix);
    header.encode(out, header_version)?;
    body.encode(out, version)?;
    Ok(())
}

/// The buffer a response is encoded into by [`Response::encode`]: bytes go to `encoded`, except
/// a write of the next slice to share, which closes the bytes so far as a part and adds the
/// slice itself as the next.
///
/// Only message encoders write into it; they never seek back (only record-batch encoders do,
/// to fill in lengths and CRCs), so `seek` and `range` address the bytes after the last shared
/// slice only; reaching further back fails the encoding.
pub struct SharingBuf {
    encoded: BytesMut,
    parts: Vec<Bytes>,
    /// Bytes already closed into `parts`.
    frozen: usize,
    /// Bytes of `parts` that are shared slices.
    shared_len: usize,
    shared: Vec<Bytes>,
    next: usize,
    /// An encoder sought or read back past a shared slice (which message encoders never do):
    /// the output is wrong and [`Response::encode`] fails.
    reached_back: bool,
    /// Where such a write goes.
    discard: Vec<u8>,
}

impl SharingBuf {
    /// Makes room for `len` more bytes, less the slices still to be shared.
    pub fn reserve(&mut self, len: usize) {
        let shared: usize = self.shared[self.next..].iter().map(Bytes::len).sum();
        self.encoded.reserve(len.saturating_sub(shared));
    }

    fn take_shared(&mut self, src: &[u8]) -> Option<Bytes> {
        let candidate = self.shared.get(self.next)?;
        let same = candidate.as_ptr() == src.as_ptr() && candidate.len() == src.len();
        same.then(|| {
            self.next += 1;
            candidate.clone()
        })
    }
}

// SAFETY: every method forwards to the `BytesMut` holding the unshared bytes; `put_slice`
// either forwards too or appends a whole part without touching that buffer's spare capacity.
unsafe impl BufMut for SharingBuf {
    fn remaining_mut(&self) -> usize {
        self.encoded.remaining_mut()
    }

    unsafe fn advance_mut(&mut self, cnt: usize) {
        // SAFETY: the caller's contract, forwarded.
        unsafe { self.encoded.advance_mut(cnt) }
    }

    fn chunk_mut(&mut self) -> &mut UninitSlice {
        self.encoded.chunk_mut()
    }

    fn put_slice(&mut self, src: &[u8]) {
        match self.take_shared(src) {
            Some(slice) => {
                let before = self.encoded.split().freeze();
                self.frozen += before.len() + slice.len();
                self.shared_len += slice.len();
                if !before.is_empty() {
                    self.parts.push(before);
                }
                self.parts.push(slice);
            }
            None => self.encoded.put_slice(src),
        }
    }
}

impl ByteBufMut for SharingBuf {
    fn offset(&self) -> usize {
        self.frozen + self.encoded.len()
    }

    fn seek(&mut self, offset: usize) {
        match offset.checked_sub(self.frozen) {
            Some(offset) => self.encoded.resize(offset, 0),
            None => self.reached_back = true,
        }
    }

    fn range(&mut self, r: std::ops::Range<usize>) -> &mut [u8] {
        match (
            r.start.checked_sub(self.frozen),
            r.end.checked_sub(self.frozen),
        ) {
            (Some(start), Some(end)) if end <= self.encoded.len() => &mut self.encoded[start..end],
            _ => {
                self.reached_back = true;
                self.discard.resize(r.len(), 0);
                &mut self.discard
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::fetch_response::{FetchableTopicResponse, PartitionData};
    use kafka_protocol::messages::FetchResponse;
    use kafka_protocol::protocol::Encodable;

    use super::*;

    fn records(len: usize, fill: u8) -> Bytes {
        Bytes::from(vec![fill; len])
    }

    fn fetch_response(records: &[Bytes]) -> FetchResponse {
        let partitions = records
            .iter()
            .enumerate()
            .map(|(i, r)| {
                PartitionData::default()
                    .with_partition_index(i as i32)
                    .with_high_watermark(100 + i as i64)
                    .with_records(Some(r.clone()))
            })
            .collect();
        FetchResponse::default().with_responses(vec![FetchableTopicResponse::default()
            .with_topic(kafka_protocol::protocol::StrBytes::from_static_str("t").into())
            .with_partitions(partitions)])
    }

    /// The shared encoding is byte for byte the copying one, in every Fetch version served.
    #[test]
    fn shared_encoding_matches_the_copy_in_every_version() {
        let all = [
            records(5000, 1),
            records(10, 2),
            records(SHARE_AT_LEAST, 3),
            records(0, 4),
            records(70_000, 5),
        ];
        let response = fetch_response(&all);
        for version in 4..=16 {
            let mut copy = BytesMut::new();
            response.encode(&mut copy, version).unwrap();
            let mut scratch = BytesMut::new();
            let shared = Response::encode(&mut scratch, all.to_vec(), |b| {
                response.encode(b, version).map_err(|e| e.to_string())
            })
            .unwrap();
            assert_eq!(shared.to_bytes(), copy.freeze(), "version {version}");
            // The three slices of SHARE_AT_LEAST bytes or more are shared, each after the
            // encoded bytes before it.
            assert_eq!(shared.shared_parts(), 6, "version {version}");
            assert_eq!(
                shared.encoded_len(),
                shared.len() - 5000 - SHARE_AT_LEAST - 70_000
            );
        }
    }

    /// A slice that is not the next one named is copied, and the output stays the same.
    #[test]
    fn an_unexpected_order_falls_back_to_copying() {
        let all = [records(5000, 1), records(6000, 2)];
        let response = fetch_response(&all);
        let mut copy = BytesMut::new();
        response.encode(&mut copy, 12).unwrap();
        let mut scratch = BytesMut::new();
        let reversed = vec![all[1].clone(), all[0].clone()];
        let shared = Response::encode(&mut scratch, reversed, |b| {
            response.encode(b, 12).map_err(|e| e.to_string())
        })
        .unwrap();
        assert_eq!(shared.to_bytes(), copy.freeze());
        // The 5000-byte slice, written first, is not the next named (the 6000-byte one is):
        // copied. The 6000-byte one then is: shared, after the bytes encoded before it.
        assert_eq!(shared.shared_parts(), 2);
        assert_eq!(shared.encoded_len(), shared.len() - 6000);
    }

    /// An encoder that reaches back past a shared slice gets an error, not a wrong frame.
    #[test]
    fn reaching_back_past_a_shared_slice_fails() {
        let slice = records(5000, 1);
        let mut scratch = BytesMut::new();
        let encoded = Response::encode(&mut scratch, vec![slice.clone()], |b| {
            b.put_i32(7);
            b.put_slice(&slice);
            b.range(0..4)[0] = 1;
            Ok::<(), String>(())
        });
        assert!(encoded.is_err());
        let encoded = Response::encode(&mut scratch, vec![slice.clone()], |b| {
            b.put_slice(&slice);
            b.put_i32(7);
            b.seek(5000 + 2);
            b.range(5000..5002)[1] = 9;
            Ok::<(), String>(())
        })
        .unwrap();
        let mut expected = slice.to_vec();
        expected.extend([0, 9]);
        assert_eq!(encoded.to_bytes(), expected);
    }

    /// A vectored write of many parts goes out whole, in order, through a small buffer.
    #[tokio::test]
    async fn many_parts_are_written_in_order() {
        let all: Vec<Bytes> = (0..1500)
            .map(|i| records(SHARE_AT_LEAST, i as u8))
            .collect();
        let response = fetch_response(&all);
        let mut copy = BytesMut::new();
        response.encode(&mut copy, 12).unwrap();
        let mut scratch = BytesMut::new();
        let shared = Response::encode(&mut scratch, all, |b| {
            response.encode(b, 12).map_err(|e| e.to_string())
        })
        .unwrap();
        let (client, mut server) = tokio::io::duplex(64 * 1024);
        let reader = tokio::spawn(async move {
            let mut got = Vec::new();
            tokio::io::AsyncReadExt::read_to_end(&mut server, &mut got)
                .await
                .unwrap();
            got
        });
        let mut writer = tokio::io::BufWriter::new(client);
        shared.write_to(&mut writer).await.unwrap();
        drop(writer);
        assert_eq!(reader.await.unwrap(), copy.to_vec());
    }
}
