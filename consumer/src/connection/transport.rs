//! Opening a connection: the TCP socket and, under `security.protocol` SSL and SASL_SSL, its
//! TLS handshake (rustls), with TLS failures reported as [`NetError::Tls`].

use std::sync::Arc;

use tokio::net::TcpStream;

use crate::config::NetConfig;
use crate::error::NetError;

/// An open socket, before the connection's task takes it.
pub(crate) enum Transport {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

/// The TCP connection to `addr` and, under SSL and SASL_SSL, its TLS handshake, within
/// `socket.connection.setup.timeout.ms`.
pub(crate) async fn open(addr: &str, net: &NetConfig) -> Result<Transport, NetError> {
    let setup = async {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|source| NetError::Connect {
                addr: addr.to_string(),
                source: Arc::new(source),
            })?;
        let _ = stream.set_nodelay(true);
        let Some(tls) = net.security.tls.as_ref() else {
            return Ok(Transport::Plain(stream));
        };
        let name = server_name(addr).ok_or_else(|| NetError::Tls {
            addr: addr.to_string(),
            reason: "the host is neither a DNS name nor an IP address".to_string(),
        })?;
        let connector = tokio_rustls::TlsConnector::from(tls.config.clone());
        match connector.connect(name, stream).await {
            Ok(stream) => Ok(Transport::Tls(Box::new(stream))),
            Err(e) => Err(match tls_error(addr, &e) {
                Some(e) => e,
                // A broker that hangs up on a ClientHello is no TLS listener (Kafka's plaintext
                // listeners read it as an oversized request and close).
                None if matches!(
                    e.kind(),
                    std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::ConnectionReset
                ) =>
                {
                    NetError::Tls {
                        addr: addr.to_string(),
                        reason: format!(
                            "the broker closed the connection during the handshake ({e}): is \
                             this a TLS listener? security.protocol must match the broker's \
                             listener"
                        ),
                    }
                }
                None => NetError::Connect {
                    addr: addr.to_string(),
                    source: Arc::new(e),
                },
            }),
        }
    };
    let timeout = net.connection_setup_timeout;
    match tokio::time::timeout(timeout, setup).await {
        Err(_) => Err(NetError::ConnectTimeout {
            addr: addr.to_string(),
            after: timeout,
        }),
        Ok(result) => result,
    }
}

/// The name a broker's certificate is checked against: the host of `host:port` (an IP
/// address, or a DNS name; `[v6]:port` too).
fn server_name(addr: &str) -> Option<rustls::pki_types::ServerName<'static>> {
    let host = addr.rsplit_once(':').map_or(addr, |(host, _)| host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    rustls::pki_types::ServerName::try_from(host.to_string()).ok()
}

/// A rustls error (a certificate refused, an alert from the broker) inside an I/O error.
pub(crate) fn tls_error(addr: &str, e: &std::io::Error) -> Option<NetError> {
    let inner = e.get_ref()?.downcast_ref::<rustls::Error>()?;
    let hint = match inner {
        rustls::Error::InvalidMessage(_) => {
            " (is this a TLS listener? security.protocol must match the broker's listener)"
        }
        _ => "",
    };
    Some(NetError::Tls {
        addr: addr.to_string(),
        reason: format!("{inner}{hint}"),
    })
}
