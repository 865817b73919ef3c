//! Raw Kafka protocol for tests: frames encoded with kafka-protocol, one call at a time.

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

/// The correlation id of the requests [`send`] and [`call`] make.
const CORRELATION_ID: i32 = 42;

/// A connection whose reads time out after 10 s (a hang fails the test, see [`closed`]).
pub fn connect(addr: &str) -> TcpStream {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream
}

/// `body` framed as a request: its 4-byte length, the request header (`correlation_id`, client
/// id `e2e`, in the header version `key` and `version` call for), then the body. Panics if
/// `body` cannot be encoded in `version` (e.g. it sets a field that version does not have).
pub fn frame<T: Encodable>(key: ApiKey, version: i16, correlation_id: i32, body: &T) -> BytesMut {
    let header = RequestHeader::default()
        .with_request_api_key(key as i16)
        .with_request_api_version(version)
        .with_correlation_id(correlation_id)
        .with_client_id(Some(StrBytes::from_static_str("e2e")));
    let header_version = key.request_header_version(version);
    let mut buf = BytesMut::new();
    buf.put_i32(0);
    header.encode(&mut buf, header_version).unwrap();
    body.encode(&mut buf, version).unwrap();
    let len = (buf.len() - 4) as i32;
    buf[..4].copy_from_slice(&len.to_be_bytes());
    buf
}

/// Whether the broker closed the connection: end of stream or a reset. A read that times out
/// fails the test instead: a broker that hangs must not pass a "closes the connection" check.
/// Bytes from the broker (a response) mean it did not close.
pub fn closed(stream: &mut TcpStream) -> bool {
    let mut byte = [0u8; 1];
    match stream.read(&mut byte) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e)
            if matches!(
                e.kind(),
                ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe
            ) =>
        {
            true
        }
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("the connection was neither closed nor answered within the read timeout: the broker hung")
        }
        Err(e) => panic!("reading from the broker: {e}"),
    }
}

/// Reads one response frame; `None` if the broker closed the connection. A read that times
/// out fails the test: no answer is not the same as a closed connection.
pub fn read_response(stream: &mut TcpStream) -> Option<Bytes> {
    let mut len = [0u8; 4];
    read_or_timeout(stream, &mut len)?;
    let mut body = vec![0u8; i32::from_be_bytes(len) as usize];
    read_or_timeout(stream, &mut body)?;
    Some(Bytes::from(body))
}

fn read_or_timeout(stream: &mut TcpStream, buf: &mut [u8]) -> Option<()> {
    match stream.read_exact(buf) {
        Ok(()) => Some(()),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
            panic!("no response within the read timeout: the broker hung")
        }
        Err(_) => None,
    }
}

/// Sends one request whose response is read later with [`receive`].
pub fn send<Req: Encodable>(stream: &mut TcpStream, key: ApiKey, version: i16, request: &Req) {
    stream
        .write_all(&frame(key, version, CORRELATION_ID, request))
        .unwrap();
}

/// The response to the request [`send`] sent; fails on a closed connection (and, through the
/// read timeout, on a hang).
pub fn receive<Resp: Decodable>(stream: &mut TcpStream, key: ApiKey, version: i16) -> Resp {
    let mut body =
        read_response(stream).unwrap_or_else(|| panic!("{key:?} v{version}: connection closed"));
    let header = ResponseHeader::decode(&mut body, key.response_header_version(version)).unwrap();
    assert_eq!(header.correlation_id, CORRELATION_ID);
    Resp::decode(&mut body, version).unwrap()
}

/// Sends one request and decodes its response.
pub fn call<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Resp {
    send(stream, key, version, request);
    receive(stream, key, version)
}

/// [`call`] for a broker that may be killed meanwhile: `None` once the connection is gone (a
/// hang still fails the test through the read timeout).
pub fn try_call<Req: Encodable, Resp: Decodable>(
    stream: &mut TcpStream,
    key: ApiKey,
    version: i16,
    request: &Req,
) -> Option<Resp> {
    stream
        .write_all(&frame(key, version, CORRELATION_ID, request))
        .ok()?;
    let mut body = read_response(stream)?;
    ResponseHeader::decode(&mut body, key.response_header_version(version)).ok()?;
    Resp::decode(&mut body, version).ok()
}

/// `batch` with its header saying `count` records (lastOffsetDelta and CRC made to agree), as
/// a producer that lies about its records sends it.
pub fn claiming(batch: &[u8], count: i32) -> Bytes {
    use record_batch::layout::{CRC_AT, LAST_OFFSET_DELTA_AT, RECORD_COUNT_AT};
    let mut batch = batch.to_vec();
    batch[RECORD_COUNT_AT..][..4].copy_from_slice(&count.to_be_bytes());
    batch[LAST_OFFSET_DELTA_AT..][..4].copy_from_slice(&(count - 1).to_be_bytes());
    let crc = record_batch::compute_crc(&batch);
    batch[CRC_AT..][..4].copy_from_slice(&crc.to_be_bytes());
    Bytes::from(batch)
}
