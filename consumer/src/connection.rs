//! One connection to one broker: requests in order, each at the highest version both sides
//! support.

use std::collections::HashMap;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, RequestHeader, ResponseHeader,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, Request, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest response accepted.
const MAX_RESPONSE: usize = 256 << 20;

#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("connecting to {addr}: {source}")]
    Connect {
        addr: String,
        source: std::io::Error,
    },
    #[error("talking to the broker: {0}")]
    Io(#[from] std::io::Error),
    #[error("the broker does not serve {0:?} in a version this client speaks")]
    Unsupported(ApiKey),
    #[error("malformed response to {key:?}: {reason}")]
    Malformed { key: ApiKey, reason: String },
    #[error("{0}")]
    Broker(String),
}

#[derive(Debug)]
pub struct Connection {
    stream: TcpStream,
    correlation_id: i32,
    /// API key → (min, max) the broker serves.
    versions: HashMap<i16, (i16, i16)>,
}

impl Connection {
    /// Connects to `addr` (`host:port`) and learns which versions the broker serves.
    pub async fn connect(addr: &str) -> Result<Connection, ClientError> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| ClientError::Connect {
                addr: addr.to_string(),
                source,
            })?;
        let _ = stream.set_nodelay(true);
        let mut connection = Connection {
            stream,
            correlation_id: 0,
            versions: HashMap::new(),
        };
        let response: ApiVersionsResponse = connection
            .send(ApiKey::ApiVersions, 0, &ApiVersionsRequest::default())
            .await?;
        connection.versions = response
            .api_keys
            .iter()
            .map(|k| (k.api_key, (k.min_version, k.max_version)))
            .collect();
        Ok(connection)
    }

    /// Sends `request` at the highest version both sides serve, up to `max_version`.
    pub async fn call<R: Request>(
        &mut self,
        request: &R,
        max_version: i16,
    ) -> Result<R::Response, ClientError> {
        let key = ApiKey::try_from(R::KEY)
            .map_err(|()| ClientError::Broker(format!("unknown API key {}", R::KEY)))?;
        let (min, max) = self
            .versions
            .get(&R::KEY)
            .copied()
            .ok_or(ClientError::Unsupported(key))?;
        let version = max.min(max_version).min(R::VERSIONS.max);
        if version < min || version < R::VERSIONS.min {
            return Err(ClientError::Unsupported(key));
        }
        self.send(key, version, request).await
    }

    async fn send<Req: Encodable + HeaderVersion, Resp: Decodable + HeaderVersion>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Result<Resp, ClientError> {
        let malformed = |reason: String| ClientError::Malformed { key, reason };
        self.correlation_id = self.correlation_id.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation_id)
            .with_client_id(Some(StrBytes::from_static_str("lograil-cli")));
        let mut buf = BytesMut::new();
        buf.put_i32(0);
        header
            .encode(&mut buf, Req::header_version(version))
            .and_then(|()| request.encode(&mut buf, version))
            .map_err(|e| malformed(e.to_string()))?;
        let len =
            i32::try_from(buf.len() - 4).map_err(|_| malformed("request too large".into()))?;
        buf[..4].copy_from_slice(&len.to_be_bytes());
        self.stream.write_all(&buf).await?;

        let len = self.stream.read_i32().await?;
        let len = usize::try_from(len)
            .ok()
            .filter(|n| *n >= 4 && *n <= MAX_RESPONSE)
            .ok_or_else(|| malformed(format!("response length {len}")))?;
        let mut body = vec![0u8; len];
        self.stream.read_exact(&mut body).await?;
        let mut body = Bytes::from(body);
        let header = ResponseHeader::decode(&mut body, Resp::header_version(version))
            .map_err(|e| malformed(e.to_string()))?;
        if header.correlation_id != self.correlation_id {
            return Err(malformed(format!(
                "correlation id {} for request {}",
                header.correlation_id, self.correlation_id
            )));
        }
        let response = Resp::decode(&mut body, version).map_err(|e| malformed(e.to_string()))?;
        if body.has_remaining() {
            return Err(malformed(format!("{} bytes left over", body.remaining())));
        }
        Ok(response)
    }
}
