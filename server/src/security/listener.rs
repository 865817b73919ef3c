//! Kafka's listener model: `listeners=PLAINTEXT://127.0.0.1:9092,SASL_SSL://0.0.0.0:9093`, each
//! name mapped to a security protocol by `listener.security.protocol.map` (the four protocol
//! names map to themselves), and `advertised.listeners` saying what Metadata tells clients
//! who came in on each.

use std::fmt;

use vocabulary::UnknownSecurityProtocol;

use super::tls::ClientAuth;

/// How a listener's connections are secured (the client's `security.protocol` too).
pub use vocabulary::SecurityProtocol;

/// Listener settings that cannot be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ListenersError {
    /// A protocol of `listener.security.protocol.map` that is not one of Kafka's four.
    #[error("unknown security protocol {0:?} (PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL)")]
    UnknownProtocol(String),
    /// A `listeners` or `advertised.listeners` entry that is not `NAME://HOST:PORT` (a port of
    /// 0 to 65535), or a protocol-map entry without a `:`.
    #[error("{0:?} is not NAME://HOST:PORT")]
    Malformed(String),
    /// A listener name that is neither in the protocol map nor a protocol's name.
    #[error("listener {0} has no security protocol: add NAME:PROTOCOL to --listener-security-protocol-map")]
    Unmapped(String),
    /// Two `listeners` entries of one name (names are compared upper-cased).
    #[error("listener {0} is named twice")]
    Duplicate(String),
    /// An `advertised.listeners` entry whose name is not in `listeners`.
    #[error("--advertised-listeners names {0}, which is not in --listeners")]
    AdvertisedUnknown(String),
    /// `listeners` holds no entry (empty, or only commas and spaces).
    #[error("no listener: --listeners is empty")]
    None,
    /// `--listen` and `--listeners` given together.
    #[error(
        "--listen and --listeners both given: --listen is the shorthand for one PLAINTEXT listener"
    )]
    Both,
}

impl From<UnknownSecurityProtocol> for ListenersError {
    fn from(e: UnknownSecurityProtocol) -> Self {
        ListenersError::UnknownProtocol(e.0)
    }
}

/// One listener as configured: where it binds and what it advertises.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListenerConfig {
    /// `PLAINTEXT`, `SASL_SSL`, or a name of the protocol map (`CLIENT`).
    pub name: String,
    /// The name's protocol in `listener.security.protocol.map`, else the protocol the name
    /// itself is.
    pub protocol: SecurityProtocol,
    /// `host:port` to bind; an empty host binds every interface, port 0 a free port.
    pub bind: String,
    /// The host and port Metadata advertises; `None`: the bound address (127.0.0.1 when bound
    /// to every interface).
    pub advertised: Option<(String, u16)>,
}

/// The listener settings as given: `listeners`, `listener.security.protocol.map`,
/// `advertised.listeners`.
#[derive(Debug, Clone, Default)]
pub struct ListenerSettings {
    /// `--listeners` (`NAME://HOST:PORT,...`); `None`: one PLAINTEXT listener on `--listen`.
    pub listeners: Option<String>,
    /// `--listener-security-protocol-map` (`NAME:PROTOCOL,...`); may be empty.
    pub protocol_map: String,
    /// `--advertised-listeners` (`NAME://HOST:PORT,...`); may be empty, and a listener it does
    /// not name advertises its bound address.
    pub advertised: String,
}

impl ListenerSettings {
    /// The listeners to bind: `listeners`, or one PLAINTEXT listener on `listen` (the
    /// `--listen` shorthand, default `127.0.0.1:9092`); not both.
    pub fn parse(&self, listen: Option<&str>) -> Result<Vec<ListenerConfig>, ListenersError> {
        match (&self.listeners, listen) {
            (Some(_), Some(_)) => Err(ListenersError::Both),
            (Some(listeners), None) => parse(listeners, &self.protocol_map, &self.advertised),
            (None, listen) => parse(
                &format!("PLAINTEXT://{}", listen.unwrap_or("127.0.0.1:9092")),
                &self.protocol_map,
                &self.advertised,
            ),
        }
    }
}

/// Parses `listeners`, `listener.security.protocol.map` and `advertised.listeners`
/// (comma-separated, as in Kafka's `server.properties`; `map` and `advertised` may be empty).
pub fn parse(
    listeners: &str,
    map: &str,
    advertised: &str,
) -> Result<Vec<ListenerConfig>, ListenersError> {
    let mut protocols = Vec::new();
    for entry in split(map) {
        let (name, protocol) = entry
            .split_once(':')
            .ok_or_else(|| ListenersError::Malformed(entry.to_string()))?;
        protocols.push((name.trim().to_ascii_uppercase(), protocol.trim().parse()?));
    }
    let mut parsed: Vec<ListenerConfig> = Vec::new();
    for entry in split(listeners) {
        let (name, host, port) = endpoint(entry)?;
        let protocol = match protocols.iter().find(|(n, _)| *n == name) {
            Some((_, protocol)) => *protocol,
            None => name
                .parse()
                .map_err(|_| ListenersError::Unmapped(name.clone()))?,
        };
        if parsed.iter().any(|l| l.name == name) {
            return Err(ListenersError::Duplicate(name));
        }
        parsed.push(ListenerConfig {
            name,
            protocol,
            bind: format!("{host}:{port}"),
            advertised: None,
        });
    }
    if parsed.is_empty() {
        return Err(ListenersError::None);
    }
    for entry in split(advertised) {
        let (name, host, port) = endpoint(entry)?;
        let listener = parsed
            .iter_mut()
            .find(|l| l.name == name)
            .ok_or(ListenersError::AdvertisedUnknown(name))?;
        listener.advertised = Some((host, port));
    }
    Ok(parsed)
}

fn split(list: &str) -> impl Iterator<Item = &str> {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// `NAME://host:port` (the host may be empty, or a bracketed IPv6 address).
fn endpoint(entry: &str) -> Result<(String, String, u16), ListenersError> {
    let malformed = || ListenersError::Malformed(entry.to_string());
    let (name, address) = entry.split_once("://").ok_or_else(malformed)?;
    let (host, port) = address.rsplit_once(':').ok_or_else(malformed)?;
    let port = port.parse().map_err(|_| malformed())?;
    if name.is_empty() {
        return Err(malformed());
    }
    let host = if host.is_empty() { "0.0.0.0" } else { host };
    Ok((name.to_ascii_uppercase(), host.to_string(), port))
}

/// A bound listener, as a connection sees it: its name, protocol and advertised endpoint.
pub struct Listener {
    /// The configured name, upper-cased (`PLAINTEXT`, `CLIENT`); tags the connection's logs.
    pub name: String,
    /// Decides whether connections do TLS and SASL.
    pub protocol: SecurityProtocol,
    /// What Metadata, FindCoordinator and DescribeCluster tell clients who came in here.
    pub host: String,
    /// The advertised port (an INT32, as Kafka's messages carry it).
    pub port: i32,
    /// SSL and SASL_SSL: the TLS side of accepted connections.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// Whether TLS clients must show a certificate (`none` on listeners without TLS).
    pub client_auth: ClientAuth,
    /// The SASL mechanisms SaslHandshake offers here.
    pub mechanisms: Vec<sasl::Mechanism>,
}

/// How a bound listener secures its connections: TLS (SSL and SASL_SSL), with or without
/// client certificates, and the SASL mechanisms it offers.
#[derive(Clone)]
pub(crate) struct Secured {
    /// The TLS side of accepted connections; `None` on PLAINTEXT and SASL_PLAINTEXT.
    pub tls: Option<tokio_rustls::TlsAcceptor>,
    /// `ssl.client.auth` as this listener serves it.
    pub client_auth: ClientAuth,
    /// `sasl.enabled.mechanisms` as this listener serves it.
    pub mechanisms: Vec<sasl::Mechanism>,
}

impl fmt::Debug for Listener {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {}:{} ({})",
            self.name, self.host, self.port, self.protocol
        )
    }
}

impl Listener {
    /// A PLAINTEXT listener advertising `addr`.
    pub fn plaintext(addr: std::net::SocketAddr) -> Listener {
        Listener {
            name: "PLAINTEXT".to_string(),
            protocol: SecurityProtocol::Plaintext,
            host: addr.ip().to_string(),
            port: i32::from(addr.port()),
            tls: None,
            client_auth: ClientAuth::None,
            mechanisms: super::sasl::SaslSettings::default().mechanisms,
        }
    }

    /// The listener `config` bound at `bound`, secured as `secured` says.
    pub(crate) fn bound(
        config: &ListenerConfig,
        bound: std::net::SocketAddr,
        secured: Secured,
    ) -> Listener {
        let (host, port) = match &config.advertised {
            Some((host, port)) => (host.clone(), *port),
            None if bound.ip().is_unspecified() => ("127.0.0.1".to_string(), bound.port()),
            None => (bound.ip().to_string(), bound.port()),
        };
        Listener {
            name: config.name.clone(),
            protocol: config.protocol,
            host,
            port: i32::from(port),
            tls: secured.tls,
            client_auth: secured.client_auth,
            mechanisms: secured.mechanisms,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn listeners_parse_as_kafka_writes_them() {
        let parsed = parse(
            "PLAINTEXT://127.0.0.1:9092, CLIENT://:9093,SSL://[::1]:9094",
            "CLIENT:SASL_SSL",
            "CLIENT://broker.example:19093",
        )
        .unwrap();
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed[0].protocol, SecurityProtocol::Plaintext);
        assert_eq!(parsed[0].bind, "127.0.0.1:9092");
        assert_eq!(parsed[1].name, "CLIENT");
        assert_eq!(parsed[1].protocol, SecurityProtocol::SaslSsl);
        assert_eq!(parsed[1].bind, "0.0.0.0:9093");
        assert_eq!(
            parsed[1].advertised,
            Some(("broker.example".to_string(), 19093))
        );
        assert_eq!(parsed[2].bind, "[::1]:9094");
        assert_eq!(parsed[2].protocol, SecurityProtocol::Ssl);
    }

    #[test]
    fn listener_mistakes_are_named() {
        let err = |l: &str, m: &str, a: &str| parse(l, m, a).unwrap_err().to_string();
        assert!(err("CLIENT://:9093", "", "").contains("CLIENT has no security protocol"));
        assert!(err("PLAINTEXT://:1,PLAINTEXT://:2", "", "").contains("named twice"));
        assert!(err("PLAINTEXT://:1", "", "SSL://h:2").contains("not in --listeners"));
        assert!(err("PLAINTEXT//:1", "", "").contains("NAME://HOST:PORT"));
        assert!(err("PLAINTEXT://h:x", "", "").contains("NAME://HOST:PORT"));
        assert!(err("", "", "").contains("empty"));
        assert!(err("A://:1", "A:TLS", "").contains("unknown security protocol"));
    }
}
